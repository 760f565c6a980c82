# A tcl program for the runtimes corpus: an exec pipeline, the event loop (after, vwait, a
# fileevent on a pipe), string and list work, a caught child error and an exit status.
puts [exec seq 1 2000 | sort -rn | sed -n 1,3p]
set words {}
foreach i [lsort -integer -decreasing [lmap x [split [exec seq 1 300] \n] {expr {$x * 7 % 101}}]] { lappend words $i }
puts "[llength $words] [lindex $words 0] [lindex $words end] [string map {1 one} [lrange $words 0 5]]"
set ch [open "|sh -c {for i in 1 2 3; do echo tick \$i; done}" r]
fconfigure $ch -blocking 0
set lines {}
fileevent $ch readable { if {[gets $ch line] >= 0} { lappend lines $line } elseif {[eof $ch]} { set done 1 } }
after 10000 { set done timeout }
vwait done
puts "$done [join $lines ,]"
catch {close $ch}
puts [catch {exec sh -c {exit 3}} msg opts]
puts [lindex [dict get $opts -errorcode] end]
exit 2
