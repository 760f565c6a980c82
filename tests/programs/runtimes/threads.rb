# A ruby program for the runtimes corpus: threads on a queue, fork with Process.wait2, IO.popen,
# a trapped signal and an exit status.
# Digest::SHA256 loaded before the threads: Ruby's autoload of it on first use is not thread-safe
# ('Digest::Base cannot be directly inherited' from a thread that raced another's load).
require 'digest/sha2'
q = Queue.new; (1..12).each { |i| q << i }; q.close
res = Queue.new
ts = 4.times.map { Thread.new { while (i = q.pop); h = i.to_s; 3000.times { h = Digest::SHA256.hexdigest(h) }; res << [i, h[0, 8]]; end } }
ts.each(&:join)
out = []; out << res.pop until res.empty?
puts out.sort.map { |i, h| "#{i}=#{h}" }.join(' ')
pid = fork { exit!(7) }
_, st = Process.wait2(pid); puts "child #{st.exitstatus}"
puts IO.popen(%w[sh -c echo\ popen;\ exit\ 2], &:read).strip + " #{$?.exitstatus}"
r, w = IO.pipe
Signal.trap('USR1') { w.write('usr1') }
Process.kill('USR1', Process.pid)
puts r.read(4)
exit 5
