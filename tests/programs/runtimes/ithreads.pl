# A perl program for the runtimes corpus: interpreter threads with a queue, a pipe from a child
# (open '-|' forks), an alarm, and an exit status.
use strict; use warnings; use threads; use Thread::Queue; use Digest::SHA qw(sha256_hex);
my $q = Thread::Queue->new(1..12); $q->end;
my @t = map { threads->create(sub { my %r; while (defined(my $i = $q->dequeue)) {
    my $h = $i; $h = sha256_hex($h) for 1..5000; $r{$i} = substr($h, 0, 8) } return \%r }) } 1..4;
my %all = map { %{ $_->join } } @t;
print join(' ', map { "$_=$all{$_}" } sort { $a <=> $b } keys %all), "\n";
my $pid = open(my $fh, '-|') // die "fork: $!";
if (!$pid) { print "line $_\n" for 1..3; exit 0 }
print "child said: ", join('', <$fh>) =~ tr/\n/ /r, "\n"; close $fh; print "child status $?\n";
local $SIG{ALRM} = sub { print "alarm\n" }; alarm 1; select(undef, undef, undef, 5); 
exit 4;
