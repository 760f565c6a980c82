// Mono: short-lived arrays (the SGen nursery), three Tasks on the thread pool, a caught
// NullReferenceException (a SIGSEGV the runtime turns into an exception) and a child process.
using System;
using System.Collections.Generic;
using System.Threading.Tasks;

class Tasks {
    static void Main() {
        var kept = new List<int[]>();
        long s = 0;
        for (int i = 0; i < 200000; i++) { kept.Add(new int[64]); if (kept.Count > 1000) kept.Clear(); s += i; }
        var ts = new Task<long>[3];
        for (int t = 0; t < 3; t++)
            ts[t] = Task.Run(() => { long a = 0; for (int i = 0; i < 3000000; i++) a += i % 7; return a; });
        Task.WaitAll(ts);
        Console.WriteLine(s + " " + ts[0].Result + " " + ts[2].Result);
        try { object o = null; Console.WriteLine(o.ToString()); } catch (NullReferenceException) { Console.WriteLine("null caught"); }
        var p = System.Diagnostics.Process.Start(new System.Diagnostics.ProcessStartInfo("/bin/echo", "child") {
            RedirectStandardOutput = true, UseShellExecute = false });
        Console.Write(p.StandardOutput.ReadToEnd());
        p.WaitForExit();
        Console.WriteLine("exit " + p.ExitCode);
    }
}
