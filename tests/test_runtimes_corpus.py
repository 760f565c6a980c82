"""The runtimes corpus (issue 12): real programs of many language runtimes from Debian packages,
none of them in the project's other suites, each run natively and under `coreplane run` in five
modes (--delegate none, --delegate all, the mckernel preset, --profile, --memory pool), compared
on exit status, killing signal and, where two native runs agree, output.

`make test` runs QUICK (< 60 s); `make runtimes` runs every case (COREPLANE_RUNTIMES=full) and
writes target/conformance/runtimes.md, the table docs/conformance.md quotes. The rule and the
runner are tests/conformance/compare.py's; programs live in tests/programs/runtimes/."""

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from conftest import REPO
from conformance.compare import (CLI, DROP, Case, Run, base_env, describe, execute, fresh_dir, mismatch,
                                 privileged)

SOURCES = Path(__file__).parent / "programs" / "runtimes"
TABLE = REPO / "target" / "conformance" / "runtimes.md"
FULL = os.environ.get("COREPLANE_RUNTIMES") == "full"
MODES = {"none": ["--delegate", "none"], "all": ["--delegate", "all"], "mckernel": ["--delegate", "mckernel"],
         "profile": ["--profile", "{profile}"], "pool": ["--memory", "pool"]}
# The programs of cases outside QUICK, from RUNTIMES_PACKAGES in the Makefile: `make runtimes`
# installs them, CI's setup does not (hundreds of MB for cases `make test` does not run).
HEAVY = {"go-shfmt": "shfmt", "go-restic": "restic", "go-hugo": "hugo", "rust-bat": "batcat", "rust-sd": "sd",
         "rust-fd-threads": "fdfind", "rust-hyperfine": "hyperfine", "ghc-shellcheck": "shellcheck",
         "ghc-pandoc": "pandoc", "ocaml-unison": "unison", "erlang-escript": "escript",
         "lisp-sbcl-gc-threads": "sbcl", "scheme-guile-par-map": "guile", "scheme-chez": "chezscheme",
         "mono-csharp-tasks": "mcs", "php-cli": "php", "chromium-headless": "chromium"}
# Cases that differ under the runtime, with the cause; they stay in the corpus (and its table)
# and are reported as expected failures until fixed. None now: SBCL's, Guile's (Boehm GC) and
# Mono's collectors, which read a stopped thread's stack pointer and registers in their handler of
# the stop signal, failed until session 16, when the signal came while the thread was inside the
# runtime; handlers are now shown the program's context (runtime program_signal.rs).
KNOWN: dict[str, str] = {}

TEXT = "".join(f"line {i} {'xyz' * (i % 13)} {i * 7919 % 10007}\n" for i in range(20000))
SHELL_SCRIPT = 'f() {\nif [ $1 = x ]\nthen\necho "$1"\nfi\n}\nfor i in 1 2 3\ndo f $i\ndone\n'
BAD_SCRIPT = "#!/bin/sh\nfor f in $(ls *.txt); do\n  cat $f | grep x\ndone\n[ $1 == y ] && echo `date`\n"
MARKDOWN = ("# Title\n\nSome *emphasis*, a [link](http://example.org) and `code`.\n\n| a | b |\n|---|---|\n"
            "| 1 | 2 |\n\n```python\nprint('x')\n```\n\n- one\n- two\n\n> quote\n")
PAGE = ("<html><body><h1 id=t>static</h1><script>document.getElementById('t').textContent = "
        "[1, 2, 3].map(x => x * 7).join('-');</script></body></html>")
PY_SOURCE = "def f(x):\n    return [i * i for i in range(x) if i % 3]\n\nprint(f(10))\n"


def copy(*names: str, text: bool = False, **contents: str):
    """A prepare step: the named files of tests/programs/runtimes, the corpus text as text.txt when
    asked, and each keyword's text as a file of that name (dots written as '_')."""
    def prepare(d: Path) -> None:
        for n in names:
            shutil.copy(SOURCES / n, d / n)
        if text:
            (d / "text.txt").write_text(TEXT)
        for name, body in contents.items():
            (d / name.replace("_", ".")).write_text(body)
    return prepare


def bash(script: str) -> list[str]:
    return ["bash", "-c", script]


def hugo_site(d: Path) -> None:
    site = d / "site"
    for sub, body in {"config.toml": 'baseURL = "http://example.org/"\ntitle = "corpus"\n',
                      "layouts/_default/single.html": "<h1>{{ .Title }}</h1>{{ .Content }}",
                      "layouts/_default/list.html": "{{ range .Pages }}<a>{{ .Title }}</a>{{ end }}",
                      "layouts/index.html": "{{ range .Site.RegularPages }}{{ .Title }} {{ end }}"}.items():
        (site / sub).parent.mkdir(parents=True, exist_ok=True)
        (site / sub).write_text(body)
    for i in range(40):
        page = site / "content" / "posts" / f"p{i}.md"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f'---\ntitle: "Post {i}"\ndate: 2020-01-01\n---\n\n' + MARKDOWN)


CURL = r"""
python3 post_server.py > port & server=$!
for i in $(seq 200); do [ -s port ] && break; sleep 0.05; done
port=$(cat port)
curl -s --data-binary @text.txt "http://127.0.0.1:$port/" ; sha256sum < text.txt
curl -s -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$port/missing"
curl -s -Z "http://127.0.0.1:$port/[1-6]" 2>/dev/null | sort   # -Z's meter shows past 1 s, -s or not
curl -s -f "http://127.0.0.1:$port/missing"; echo "curl -f: $?"
kill $server; wait $server; echo "server: $?"
"""
MAKE_RECURSIVE = ("all: a b c\n%:\n\t@$(MAKE) -s -f sub.mk N=$@\n", "sub.mk",
                  "out: ; @for i in 1 2 3; do echo $(N)$$i; done | sort -r | head -1 > $(N).out; cat $(N).out\n")


def cases() -> list[Case]:
    """Every case; names start with their runtime."""
    mk, sub_name, sub = MAKE_RECURSIVE
    return [
        # Go (static binaries of Debian's packages; the Go runtime's signals, threads, async preemption)
        Case("go-age", bash("age-keygen -o key 2>/dev/null && age -r $(age-keygen -y key) -o x.age text.txt && "
                            "age -d -i key x.age | sha256sum && age -d -i key text.txt; echo $?"),
             copy(text=True), group="go"),
        Case("go-fzf-filter-sigpipe", bash("fzf --filter 77 < text.txt | wc -l; seq 1000000 | fzf --filter 1 | "
                                           "head -1; echo ${PIPESTATUS[@]}"), copy(text=True), group="go"),
        Case("go-shfmt", bash("shfmt -i 2 x.sh; shfmt -d x.sh > /dev/null; echo diff $?; echo 'if' | shfmt; "
                              "echo $?"), copy(x_sh=SHELL_SCRIPT), group="go"),
        Case("go-restic", bash("export RESTIC_PASSWORD=pw RESTIC_REPOSITORY=repo RESTIC_CACHE_DIR=cache; "
                               "mkdir -p data/a && cp text.txt data/ && seq 5000 > data/a/n && restic init -q && "
                               "restic backup -q --host h data && restic restore -q latest --target out && "
                               "diff -r data out/data && echo same && restic check -q && restic snapshots --json "
                               "| python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'"),
             copy(text=True), timeout=90, group="go"),
        Case("go-hugo", bash("hugo -s site --quiet -d ../public && find public -type f | sort | tail -3 && "
                             "cat public/index.html"), hugo_site, timeout=90, group="go"),
        # Rust (std ignores SIGPIPE: the write's EPIPE must come back as the kernel's)
        Case("rust-bat", bash("batcat -p --color=always --paging=never -l python x.py; batcat -n --paging=never "
                              "--color=never text.txt | tail -1; batcat nosuch; echo $?"),
             copy(text=True, x_py=PY_SOURCE), group="rust"),
        Case("rust-hexyl-epipe", bash("hexyl -n 64 text.txt; head -c 200000 text.txt | hexyl | head -2; "
                                      "echo ${PIPESTATUS[@]}"), copy(text=True), group="rust"),
        Case("rust-sd", bash("sd 'line (\\d+)' 'L$1' < text.txt | sha256sum; sd -p x y text.txt | wc -l"),
             copy(text=True), group="rust"),
        Case("rust-fd-threads", bash("mkdir -p t/a/b t/c && for i in $(seq 60); do echo > t/a/$i.txt; "
                                     "echo > t/c/$i.md; done; fdfind -j2 -e txt . t | sort | tail -2; "
                                     "fdfind -j2 -t f . t -x wc -c | wc -l"), group="rust"),
        Case("rust-hyperfine", bash("hyperfine -N --runs 5 --warmup 1 --export-json h.json 'true' 'sleep 0.01' "
                                    "> /dev/null 2>&1 && python3 -c \"import json; r = json.load(open('h.json'))"
                                    "['results']; print([len(x['times']) for x in r])\""), group="rust"),
        # The JVM (javac is itself a JVM program; then java -jar of the result)
        Case("jvm-javac-jar", bash("javac -d c App.java && jar cfe app.jar App -C c . && java -jar app.jar"),
             copy("App.java"), timeout=120, group="jvm"),
        # GHC-compiled (the GHC runtime's timer signal and its own threads)
        Case("ghc-shellcheck", bash("shellcheck -f gcc bad.sh; echo $?; shellcheck -S error bad.sh; echo $?"),
             copy(bad_sh=BAD_SCRIPT), group="ghc"),
        Case("ghc-pandoc", bash("pandoc -f markdown -t html doc.md && pandoc -f markdown -t rst doc.md | wc -l"),
             copy(doc_md=MARKDOWN), timeout=60, group="ghc"),
        # OCaml (Debian's unison, native code)
        Case("ocaml-unison", bash("mkdir -p a/s b && seq 300 > a/x && seq 9 > a/s/y && echo old > b/z && "
                                  "unison a b -batch -auto -silent -times=false; echo $?; diff -r a b && "
                                  "echo synced"), timeout=60, group="ocaml"),
        # Erlang (escript: BEAM with SMP schedulers, ports)
        Case("erlang-escript", ["escript", "procs.escript"], copy("procs.escript"), timeout=60, group="erlang"),
        # Collected languages that stop threads with signals (SBCL, Guile's Boehm GC, Mono's SGen)
        Case("lisp-sbcl-gc-threads", ["sbcl", "--script", "gc_threads.lisp"], copy("gc_threads.lisp"), timeout=60,
             group="lisp"),
        Case("scheme-guile-par-map", ["guile", "--no-auto-compile", "par_map.scm"], copy("par_map.scm"),
             timeout=60, group="scheme"),
        Case("scheme-chez", ["chezscheme", "--script", "loops.scm"], copy("loops.scm"), group="scheme"),
        Case("mono-csharp-tasks", bash("mcs -out:t.exe Tasks.cs > /dev/null && mono t.exe"), copy("Tasks.cs"),
             timeout=120, group="mono"),
        # Chromium (its zygote, processes, protection keys, a JavaScript engine); as root it needs
        # --no-sandbox, and the sandbox as another user is left to docs/conformance.md
        Case("chromium-headless", bash("chromium --headless --no-sandbox --disable-gpu --no-first-run "
                                       "--user-data-dir=profile --dump-dom file://$PWD/page.html 2>/dev/null"),
             copy(page_html=PAGE), timeout=90, group="chromium"),
        # Interpreters
        Case("php-cli", ["php", "arrays.php"], copy("arrays.php"), group="php"),
        Case("node-zlib-crypto", ["node", "zlib.js"], copy("zlib.js"), timeout=60, group="node"),
        Case("node-epipe", bash("node -e 'for (let i = 0; i < 1e5; i++) process.stdout.write(\"x\\n\")' | "
                                "head -1; echo ${PIPESTATUS[@]}"), timeout=60, group="node"),
        Case("python-executors", ["python3", "executors.py"], copy("executors.py"), timeout=60, group="python"),
        Case("python-sigpipe", bash("python3 -c 'import sys; [print(i) for i in range(10**6)]' | head -1; "
                                    "echo ${PIPESTATUS[@]}; python3 -c 'import signal, os; signal.signal("
                                    "signal.SIGPIPE, signal.SIG_DFL); r, w = os.pipe(); os.close(r); "
                                    "os.write(w, b\"x\")'; echo $?"), group="python"),
        Case("perl-ithreads", ["perl", "ithreads.pl"], copy("ithreads.pl"), group="perl"),
        Case("ruby-threads-fork", ["ruby", "threads.rb"], copy("threads.rb"), group="ruby"),
        Case("tcl-events", ["tclsh", "events.tcl"], copy("events.tcl"), group="tcl"),
        Case("lua-coroutines", ["lua5.4", "corpus.lua"], group="lua", prepare=copy("corpus.lua")),
        Case("gawk-coprocess", ["gawk", "{ print $3 |& \"sort -n\" } END { close(\"sort -n\", \"to\"); "
                                "while ((\"sort -n\" |& getline x) > 0) n++; print n, x; exit 3 }", "text.txt"],
             copy(text=True), group="awk"),
        # Tools
        Case("sqlite3-wal-writers", bash("sqlite3 db 'pragma journal_mode=wal; create table t(p, i);' && "
                                         "for p in 1 2 3; do sqlite3 -cmd '.timeout 20000' db \"with recursive "
                                         "c(x) as (select 1 union all select x + 1 from c where x < 3000) insert into "
                                         "t select $p, x from c;\" & done; wait; sqlite3 db 'select p, count(*), "
                                         "sum(i) from t group by p; pragma integrity_check;'"), group="tools"),
        Case("busybox-applets", ["busybox", "sh", "-c", "busybox seq 300 | busybox xargs -n 50 -P 2 echo | "
                                 "busybox wc -l; busybox tar -czf t.tgz text.txt && busybox tar -tzf t.tgz; "
                                 "busybox awk '{ s += $3 } END { print s }' text.txt; busybox sed -n '$p' "
                                 "text.txt; busybox timeout 1 busybox sleep 5; echo $?"],
             copy(text=True), group="tools"),
        Case("git-bisect-run", bash("export GIT_AUTHOR_DATE=2020-01-01T00:00:00Z GIT_COMMITTER_DATE=2020-01-01T00:00:00Z; "
                                    "git init -q -b main r && cd r && git config user.email c@e.org && "
                                    "git config user.name c && for i in $(seq 12); do echo $i > v; git add v; "
                                    "git commit -q -m c$i; done; git bisect start HEAD HEAD~11 >/dev/null && "
                                    "git bisect run sh -c '[ $(cat v) -lt 8 ]' | grep 'first bad' ; "
                                    "git bisect reset > /dev/null 2>&1; git worktree add -q ../w HEAD~3 && cat ../w/v"),
             timeout=60, group="tools"),
        # The two jobs print in either order, natively too (a, b, c in 4 orders over 30 runs): sorted.
        Case("make-recursive-j2", bash("make -j2 -s | sort; echo ${PIPESTATUS[0]}"),
             copy(Makefile=mk, **{sub_name.replace(".", "_"): sub}), group="tools"),
        Case("tar-xz-threads", bash("mkdir d && for i in 1 2 3; do cp text.txt d/$i; done && tar --mtime=@0 "
                                    "--owner=0 --group=0 -I 'xz -T2' -cf d.txz d && rm -r d && tar -I 'xz -T2' "
                                    "-xf d.txz && sha256sum d/* && xz -T2 -t d.txz && echo ok"), copy(text=True),
             group="tools"),
        Case("openssl-speed-alarm", ["openssl", "speed", "-seconds", "1", "-bytes", "16384", "-multi", "2", "sha256"], timeout=60,
             group="tools"),
        Case("curl-post-loopback", bash(CURL), copy("post_server.py", text=True), timeout=60, group="tools"),
        # Signals seen from the outside: a pipeline's SIGPIPE, and the program itself killed by one
        Case("yes-head-pipestatus", bash("yes | head -c 100000 | wc -c; echo ${PIPESTATUS[@]}"), group="signals"),
        Case("killed-by-sigpipe", bash("kill -PIPE $$"), group="signals"),
    ]


QUICK = ["go-fzf-filter-sigpipe", "go-age", "rust-hexyl-epipe", "perl-ithreads", "ruby-threads-fork",
         "lua-coroutines", "tcl-events", "yes-head-pipestatus", "killed-by-sigpipe"]
CASES = {c.name: c for c in cases()}
SELECTED = list(CASES) if FULL else QUICK


def missing_tool(case: Case) -> str | None:
    """Why the case cannot run here: its program is one `make runtimes` installs, and absent."""
    tool = HEAVY.get(case.name)
    if tool and not shutil.which(tool):
        return f"{tool} is not installed (RUNTIMES_PACKAGES, installed by `make runtimes`)"
    return None


def run(case: Case, work: Path, mode: str | None) -> Run:
    """One run of the case, natively (mode None) or under `coreplane run` in that mode."""
    d = fresh_dir(work, case)
    argv = (DROP if privileged() else []) + case.argv
    if mode is not None:
        options = [a.replace("{profile}", str(work / f"{case.name}.profile.json")) for a in MODES[mode]]
        argv = [CLI, "run", *options, "--"] + argv
    return execute(argv, d, base_env(d, case.env), case.timeout * (1 if mode is None else 3))


@pytest.fixture(scope="module")
def work():
    """Where every run of a case happens, natively or not: the same path (programs print it),
    one that the user `nobody` can reach (pytest's own directories are private to root)."""
    d = Path(tempfile.mkdtemp(prefix="coreplane-runtimes-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def natives(work) -> dict[str, tuple[Run, bool]]:
    """Each selected case's native run, and whether a second native run printed the same bytes."""
    out = {}
    for name in SELECTED:
        if missing_tool(CASES[name]) is None:
            first, second = run(CASES[name], work, None), run(CASES[name], work, None)
            out[name] = (first, (first.stdout, first.stderr) == (second.stdout, second.stderr)
                         and first.status == second.status)
    return out


@pytest.fixture(scope="module")
def table():
    """The verdicts of this session, written as target/conformance/runtimes.md in a full run."""
    rows: dict[str, dict[str, str]] = {}
    yield rows
    if FULL:
        TABLE.parent.mkdir(parents=True, exist_ok=True)
        lines = ["| program | group | native | " + " | ".join(MODES) + " |",
                 "| --- | --- | --- |" + " --- |" * len(MODES)]
        for name, row in rows.items():
            lines.append(f"| {name} | {CASES[name].group} | {row.get('native', '')} | "
                         + " | ".join(row.get(m, "-").replace("|", "\\|") for m in MODES) + " |")
        passed = {m: sum(r.get(m) == "pass" for r in rows.values()) for m in MODES}
        lines += ["", "pass per mode: " + ", ".join(f"{m} {n}/{len(rows)}" for m, n in passed.items())]
        TABLE.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("name", SELECTED)
def test_program_behaves_as_natively(name, mode, natives, table, work):
    case = CASES[name]
    if (why := missing_tool(case)) is not None:
        table.setdefault(name, {})[mode] = "skip"
        pytest.skip(why)
    native, same_output = natives[name]
    assert native.status is not None, f"{name} times out natively"
    table.setdefault(name, {})["native"] = describe(native) + ("" if same_output else " (output varies)")
    got = run(case, work, mode)
    why = mismatch(native, got, same_output)
    table[name][mode] = "pass" if not why else why
    if why and name in KNOWN:
        pytest.xfail(f"{name} under {mode}: {why} (known: {KNOWN[name]})")
    assert not why, f"{name} under {mode}: {why}\nstderr: {got.stderr.decode(errors='replace')[-1500:]}"
    if mode == "profile":
        profile = json.loads((work / f"{name}.profile.json").read_text())
        assert sum(s["count"] for s in profile["syscalls"]) > 0


def test_sigpipe_cases_die_of_sigpipe_natively(natives):
    """The corpus's SIGPIPE cases are only worth something if natively a writer dies of it."""
    for name in ("go-fzf-filter-sigpipe", "yes-head-pipestatus"):
        assert b"141" in natives[name][0].stdout.splitlines()[-1].split(), natives[name][0].stdout
    assert natives["killed-by-sigpipe"][0].status == -13
