"""The real-program corpus: programs of many runtimes (Go static and cgo, Rust, the JVM, node,
Python, perl, bash, C) and everyday tools, each a Case with the inputs it needs.

Built artefacts (the Go binaries, the Java classes) are cached under target/conformance/bin; a
program whose toolchain this machine lacks is left out with a note, never silently."""

import os
import shutil
import subprocess
from pathlib import Path

from .compare import REPO, Case

BIN = REPO / "target" / "conformance" / "bin"
PROGRAMS = Path(__file__).parent / "programs"
GO_SOURCE = REPO / "tests" / "programs" / "gowork"
GO = shutil.which("go") or "/usr/local/go/bin/go"

TEXT = "".join(f"line {i} {'abc' * (i % 17)} {i * 7919 % 10007}\n" for i in range(30000))
C_MAIN = '#include <stdio.h>\nint add(int, int);\nint main(void) { printf("%d\\n", add(40, 2)); return 0; }\n'
C_ADD = "int add(int a, int b) { return a + b; }\n"
MAKEFILE = ("CFLAGS = -O1\nprog: main.o add.o\n\t$(CC) -o $@ $^\nmain.o add.o: %.o: %.c\n"
            "\t$(CC) $(CFLAGS) -c -o $@ $<\nclean:\n\trm -f prog *.o\n")

NODE_WORKERS = """
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');
const crypto = require('node:crypto');
if (isMainThread) {
  const jobs = [0, 1, 2, 3].map(i => new Promise((ok, fail) => {
    const w = new Worker(__filename, { workerData: i });
    w.on('message', ok); w.on('error', fail);
  }));
  Promise.all(jobs).then(r => {
    console.log(JSON.stringify(r));
    const out = require('node:child_process').execFileSync('sh', ['-c', 'echo child $((2 + 3))']);
    process.stdout.write(out);
    require('node:fs').writeFileSync('out.txt', r.join('\\n'));
    console.log(require('node:fs').readFileSync('out.txt', 'utf8').length);
  });
} else {
  let h = Buffer.from(String(workerData));
  for (let j = 0; j < 20000; j++) h = crypto.createHash('sha256').update(h).digest();
  parentPort.postMessage(h.toString('hex').slice(0, 8));
}
"""
NODE_SERVER = """
const http = require('node:http');
const srv = http.createServer((req, res) => res.end('hello ' + req.url));
srv.listen(0, '127.0.0.1', () => {
  http.get({ host: '127.0.0.1', port: srv.address().port, path: '/x' }, res => {
    let body = ''; res.on('data', d => body += d);
    res.on('end', () => { console.log(res.statusCode, body); srv.close(); });
  });
});
"""
PY_THREADS = """
import hashlib, queue, threading
q, out = queue.Queue(), {}
def work():
    while (i := q.get()) is not None:
        h = str(i).encode()
        for _ in range(20000): h = hashlib.sha256(h).digest()
        out[i] = h.hex()[:8]
ts = [threading.Thread(target=work) for _ in range(4)]
[t.start() for t in ts]
for i in range(16): q.put(i)
for _ in ts: q.put(None)
[t.join() for t in ts]
print(sorted(out.items()))
"""
PY_MULTIPROCESSING = """
import multiprocessing as mp, hashlib
def work(i):
    h = str(i).encode()
    for _ in range(20000): h = hashlib.sha256(h).digest()
    return h.hex()[:8]
if __name__ == '__main__':
    for method in ('fork', 'spawn', 'forkserver'):
        with mp.get_context(method).Pool(2) as pool:
            print(method, pool.map(work, range(8)))
    p = mp.Process(target=exit, args=(7,)); p.start(); p.join(); print('exitcode', p.exitcode)
"""
PY_SIGNALS = """
import os, signal, subprocess, sys, time
got = []
signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))
signal.setitimer(signal.ITIMER_REAL, 0.05)
signal.signal(signal.SIGALRM, lambda s, f: got.append(s))
os.kill(os.getpid(), signal.SIGUSR1)
time.sleep(0.2)
print(sorted(got), flush=True)
child = subprocess.Popen(["sleep", "5"]); child.terminate(); print("child", child.wait(), flush=True)
r, w = os.pipe(); os.close(r)
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
os.write(w, b'x')
"""
PY_ASYNCIO = """
import asyncio
async def main():
    procs = [await asyncio.create_subprocess_exec('sh', '-c', f'echo {i}; exit {i}',
             stdout=asyncio.subprocess.PIPE) for i in range(4)]
    outs = [await p.communicate() for p in procs]
    print([o[0].decode().strip() for o in outs], [p.returncode for p in procs])
    srv = await asyncio.start_server(lambda r, w: (w.write(b'pong'), w.close()), '127.0.0.1', 0)
    port = srv.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection('127.0.0.1', port)
    print(await reader.read()); srv.close(); await srv.wait_closed()
asyncio.run(main())
"""
GO_UNFORMATTED = "package main\nimport \"fmt\"\nfunc main( ) { for i:=0;i<3;i++ {fmt.Println( []int{i} ) } }\n"
PERL_FORK = r"""
my %kids;
for my $i (1..4) { my $p = fork // die; if (!$p) { my $s = 0; $s += $_ for 1..100000*$i; exit $i } $kids{$p} = $i }
my @st; while ((my $p = wait) > 0) { push @st, $? >> 8 }
print join(',', sort @st), "\n";
pipe(my $r, my $w); if (!fork) { close $r; print $w "from child\n"; exit 0 } close $w; print <$r>; wait;
$SIG{USR1} = sub { print "USR1\n" }; kill 'USR1', $$; print "end\n";
"""
BASH_JOBS = r"""
set -m
sleep 0.3 & sleep 0.3 &
jobs | sed 's/  */ /g'
kill %1; wait %1; echo "killed: $?"
wait; echo "waited: $?"
trap 'echo trapped USR1' USR1; kill -USR1 $$
trap 'echo trapped ERR' ERR; false
trap 'echo exiting' EXIT
( trap 'echo sub TERM; exit 5' TERM; kill -TERM $BASHPID; sleep 1 ); echo "sub: $?"
coproc bc -q; echo '6*7' >&"${COPROC[1]}"; read -r x <&"${COPROC[0]}"; echo "coproc $x"
kill $COPROC_PID; wait $COPROC_PID
diff <(seq 3) <(seq 3) && echo same
exit 3
"""
CURL_SERVER = r"""
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server --bind 127.0.0.1 "$port" >/dev/null 2>&1 &
server=$!
for i in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.05; done
curl -s "http://127.0.0.1:$port/text.txt" | sha256sum
curl -s -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$port/missing"
curl -s --no-progress-meter -Z "http://127.0.0.1:$port/text.txt" "http://127.0.0.1:$port/text.txt" | wc -c
kill $server; wait $server; echo "server: $?"
"""
GIT = r"""
export GIT_AUTHOR_DATE='2020-01-01T00:00:00Z' GIT_COMMITTER_DATE='2020-01-01T00:00:00Z'
git init -q -b main repo && cd repo
git config user.email c@example.org && git config user.name conformance
seq 1000 > a && git add a && git commit -q -m one
seq 2 1001 > a && git commit -q -am two
git log --format='%H %s' && git diff --stat HEAD~1 && git gc -q && git count-objects -v | grep -v size
git checkout -q -b side HEAD~1 && echo x >> a && git commit -q -am three
git rebase -q main 2>/dev/null; echo "rebase: $?"; git status --porcelain | head -3
"""


def text(d: Path) -> None:
    (d / "text.txt").write_text(TEXT)


def files(**contents: str):
    """A prepare step that writes each keyword's text to the file of that name (dots as '_')."""
    def write(d: Path) -> None:
        for name, body in contents.items():
            (d / name.replace("_", ".")).write_text(body)
    return write


def c_project(d: Path) -> None:
    (d / "main.c").write_text(C_MAIN)
    (d / "add.c").write_text(C_ADD)
    (d / "Makefile").write_text(MAKEFILE)


def go_binary(kind: str) -> Path | str:
    """gowork (tests/programs) built static (CGO_ENABLED=0) or with cgo, or why it could not be."""
    if not Path(GO).exists():
        return f"no Go toolchain ({GO})"
    exe = BIN / f"gowork-{kind}"
    if not exe.exists():
        BIN.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "GOCACHE": str(REPO / "target" / "gocache"), "GOFLAGS": "-mod=mod",
               "CGO_ENABLED": "1" if kind == "cgo" else "0"}
        built = subprocess.run([GO, "build", "-o", str(exe), "."], cwd=GO_SOURCE, env=env, capture_output=True,
                               text=True)
        if built.returncode:
            return f"{GO} build failed: {(built.stderr.strip().splitlines() or ['?'])[-1]}"
    return exe


def java_classes() -> Path | None:
    """Workers.class compiled once with the machine's javac; None without a JDK."""
    if not shutil.which("javac"):
        return None
    out = BIN / "java"
    if not (out / "Workers.class").exists():
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-d", str(out), str(PROGRAMS / "Workers.java")], check=True)
    return out


def sh(script: str) -> list[str]:
    return ["sh", "-c", script]


def cases() -> tuple[list[Case], list[str]]:
    """The corpus, and one note per program left out because this machine lacks its toolchain."""
    missing = []
    c = [
        Case("coreutils-sort-pipeline", sh("seq 1 200000 | sort -rn | head -3"), group="coreutils"),
        Case("yes-head", sh("yes | head -c 100000 | wc -c"), group="coreutils"),
        Case("coreutils-mix", sh("sort -k3,3n text.txt | uniq -c | sort -rn | head -3; wc text.txt; "
                                 "cut -d' ' -f2 text.txt | paste -sd+ | bc; ls -l text.txt | cut -d' ' -f5; "
                                 "cat nosuchfile"), text, group="coreutils"),
        Case("find-xargs-P2", sh("mkdir -p t/a t/b && seq 200 | xargs -I{} sh -c 'echo {} > t/a/{}' && "
                                 "find t -type f | sort | xargs -P2 -n20 cat | sort -n | tail -1"),
             group="coreutils"),
        Case("dd", ["dd", "if=text.txt", "of=copy", "bs=512", "status=none"], text, group="coreutils"),
        Case("gawk", ["gawk", "{ s[$4 % 7] += $2 } END { n = asorti(s, k); for (i = 1; i <= n; i++) "
                      "print k[i], s[k[i]] }", "text.txt"], text, group="text"),
        Case("sed-grep", sh("sed -n 's/^line \\([0-9]*5\\) .*/\\1/p' text.txt | grep -c 5; grep -c abcabc text.txt"),
             text, group="text"),
        Case("diff-patch", sh("seq 100 > a; seq 100 | sed 's/50/fifty/' > b; diff -u a b > d; "
                              "patch -s a d && cmp a b && echo patched"), group="text"),
        Case("ripgrep-rust", ["rg", "-j2", "-c", "abcabcabc", "text.txt"], text, group="rust"),
        Case("ripgrep-files", sh("mkdir -p r/x r/y && seq 50 > r/x/f && seq 70 > r/y/g && rg --files r | sort"),
             group="rust"),
        Case("tar-xz-pipeline", sh("tar --mtime=@0 --owner=0 --group=0 -cf - text.txt | xz -T2 -c | "
                                   "xz -dc | tar -tvf -"), text, group="archive"),
        Case("tar-gzip-extract", sh("mkdir d && cp text.txt d/ && tar --mtime=@0 -czf d.tgz d && rm -r d && "
                                    "tar -xzf d.tgz && sha256sum d/text.txt"), text, group="archive"),
        Case("bzip2-pbzip2-lbzip2", sh("pbzip2 -p2 -c text.txt | bzip2 -dc | lbzip2 -n2 -c | lbzip2 -dc | "
                                       "sha256sum"), text, group="archive"),
        Case("gzip-pigz", sh("pigz -p2 -c text.txt | gzip -dc | gzip -c | pigz -dc | sha256sum"), text,
             group="archive"),
        Case("zstd-lz4-plzip", sh("zstd -q -T2 -c text.txt | zstd -dc | lz4 -q -c | lz4 -dc | plzip -n2 -c | "
                                  "plzip -dc | sha256sum"), text, group="archive"),
        Case("cpio-rsync", sh("mkdir -p s/t && cp text.txt s/t/ && (cd s && find . | sort | cpio -o -H newc "
                              "--quiet) | cpio -t --quiet; rsync -a s/ c/ && cmp s/t/text.txt c/t/text.txt "
                              "&& echo synced"), text, group="archive"),
        Case("hashdeep", sh("hashdeep -c sha256 -r text.txt | tail -1"), text, group="archive"),
        Case("sqlite3", ["sqlite3", "db.sqlite", "create table t(a, b); with recursive c(x) as (select 1 union "
                         "all select x + 1 from c where x < 20000) insert into t select x, x * x from c; "
                         "create index i on t(b); select count(*), sum(b) from t where a % 3 = 0; "
                         "pragma integrity_check; select * from nosuch;"], group="database"),
        Case("python-sqlite3", ["python3", "-c", "import sqlite3; c = sqlite3.connect('x.db'); "
                                "c.execute('create table t(x)'); c.executemany('insert into t values (?)', "
                                "[(i,) for i in range(5000)]); c.commit(); "
                                "print(c.execute('select sum(x) from t').fetchone())"], group="database"),
        Case("make-j2-gcc", sh("make -s -j2 && ./prog && make -s clean && ls"), c_project, group="build"),
        Case("gcc-compile-run", sh("gcc -O2 -o prog main.c add.c && ./prog && gcc -c nosuch.c"), c_project,
             group="build"),
        Case("git", ["bash", "-c", GIT], group="vcs"),
        Case("bash-job-control-traps", ["bash", "-c", BASH_JOBS], group="shell"),
        Case("bash-pipefail-subshells", ["bash", "-c", "set -o pipefail; for i in $(seq 20); do "
                                         "(echo $i | tr 0-9 a-j) & done | sort | tr -d '\\n'; echo; "
                                         "false | true; echo pipe $?; exec 3>f; echo fd >&3; cat f"],
             group="shell"),
        Case("dash-script", sh("i=0; while [ $i -lt 200 ]; do i=$((i+1)); x=$(echo $i); done; echo $x; "
                               "trap 'echo trap INT' INT; kill -INT $$; echo after"), group="shell"),
        Case("busybox-static", ["busybox", "sh", "-c", "echo static $((6*7)); busybox seq 1000 | busybox "
                                "sort -rn | busybox head -2; busybox sha1sum /etc/hostname | busybox wc -c"],
             group="shell"),
        Case("timeout-kill", sh("timeout 0.2 sleep 5; echo $?; timeout -s KILL 0.2 sleep 5; echo $?; "
                                "timeout 5 true; echo $?"), group="process"),
        Case("timeout-preserve", ["timeout", "--preserve-status", "0.2", "sleep", "5"], group="process"),
        Case("flock", sh("(flock -x 9; sleep 0.3; echo first) 9>lock & sleep 0.1; "
                         "flock -w 5 lock -c 'echo second'; flock -n lock true && echo free; wait"),
             group="process"),
        Case("nice-nohup-setsid-stdbuf", sh("nice -n 5 nohup sh -c 'echo niced' 2>/dev/null; cat nohup.out "
                                            "2>/dev/null; setsid -w sh -c 'exit 4'; echo $?; "
                                            "stdbuf -oL seq 3"), group="process"),
        Case("sigpipe-writer", sh("seq 1 1000000 | head -1; python3 -c 'import sys; print(\"x\" * 100000)' | "
                                  "head -c 5; echo; yes | sed 1q"), group="process"),
        Case("ps-pgrep-identity", sh("sleep 2 & p=$!; sleep 0.3; cat /proc/$p/comm; tr '\\0' ' ' < /proc/$p/cmdline; "
                                     "echo; ps -o comm=,args= -p $p; pgrep -x -P $$ sleep | grep -c $p; "
                                     "{ pkill -P $$ -f '^sleep 2$'; wait $p; echo $?; } 2>/dev/null"), group="process"),
        Case("strace-tracing", ["strace", "-f", "-qq", "-e", "trace=exit_group", "-e", "signal=none",
                                "sh", "-c", "echo traced; exit 2"], group="process"),
        Case("curl-http-server", sh(CURL_SERVER), text, timeout=60, group="network"),
        Case("python-threads", ["python3", "-c", PY_THREADS], group="python"),
        Case("python-multiprocessing", ["python3", "mp.py"], files(mp_py=PY_MULTIPROCESSING), timeout=60,
             group="python"),
        Case("python-signals", ["python3", "-c", PY_SIGNALS], group="python"),
        Case("python-asyncio", ["python3", "-c", PY_ASYNCIO], group="python"),
        Case("perl-fork", ["perl", "-e", PERL_FORK], group="perl"),
        Case("perl-text", ["perl", "-ne", "$w{$_}++ for /(\\w+)/g; END { printf \"%s %d\\n\", $_, $w{$_} "
                           "for (sort { $w{$b} <=> $w{$a} || $a cmp $b } keys %w)[0..4] }", "text.txt"],
             text, group="perl"),
        Case("node-worker-threads", ["node", "workers.js"], files(workers_js=NODE_WORKERS), timeout=60,
             group="node"),
        Case("node-http", ["node", "-e", NODE_SERVER], timeout=60, group="node"),
        Case("stress-ng-timer", sh("stress-ng --timer 1 --timeout 2 -q; echo $?"), group="stress"),
        Case("stress-ng-vforkmany", sh("stress-ng --vforkmany 1 --vforkmany-ops 2000 --timeout 2 -q --verify; "
                                       "echo $?"), group="stress"),
        Case("file-libmagic", ["file", "-b", "/bin/sh", "/etc/passwd", "/usr/share/doc"], group="misc"),
        Case("openssl", sh("openssl dgst -sha256 text.txt | cut -d' ' -f2; openssl enc -aes-256-cbc -pbkdf2 "
                           "-pass pass:x -in text.txt | openssl enc -d -aes-256-cbc -pbkdf2 "
                           "-pass pass:x | cmp - text.txt && echo roundtrip"), text, group="misc"),
    ]
    for kind in ("static", "cgo"):
        exe = go_binary(kind)
        if isinstance(exe, Path):
            c.append(Case(f"go-{kind}", [str(exe)], timeout=60, group="go"))
        else:
            missing.append(f"go-{kind}: {exe}")
    gofmt = Path(GO).with_name("gofmt")
    if gofmt.exists():
        c.append(Case("gofmt", [str(gofmt), "-s", "x.go"], files(x_go=GO_UNFORMATTED), group="go"))
    classes = java_classes()
    if classes:
        c.append(Case("jvm-workers", ["java", "-Xshare:auto", "-cp", str(classes), "Workers"], timeout=90,
                      group="jvm"))
        c.append(Case("jvm-serial-gc", ["java", "-XX:+UseSerialGC", "-cp", str(classes), "Workers"],
                      timeout=90, group="jvm"))
    else:
        missing.append("jvm-workers: no javac")
    return c, missing
