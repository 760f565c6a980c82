"""Validation suites: the programs `coreplane validate` and `coreplane study` run, their inputs, suite files."""

from __future__ import annotations

import random
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from coreplane.core.documents import read_text
from coreplane.core.errors import CoreplaneError
from coreplane.dse.spec import Where, check_keys


@dataclass(frozen=True)
class Synthetic:
    """A gain_synth program (paper 002 §4.1): the syscall mix of another program of the suite
    (`mix_from`, from its profile), `calls` per thread over `phases` phases, `compute_ms` of Monte
    Carlo work per thread at γ = 1, `threads` workers."""

    mix_from: str
    calls: int
    phases: int
    compute_ms: float
    threads: int = 1


@dataclass(frozen=True)
class Program:
    """One program of a suite. `command` may use {data} (the suite's generated inputs) and {out}
    (a scratch directory); `gammas` are the gains a synthetic program emulates (1 = none)."""

    name: str
    command: tuple[str, ...] = ()
    description: str = ""
    synthetic: Synthetic | None = None
    gammas: tuple[float, ...] = (1.0,)
    package: str | None = None  # Debian package the program comes from, for the report

    def argv(self, data: Path, out: Path) -> list[str]:
        """The command with {data} and {out} filled in (synthetic programs are built elsewhere)."""
        return [a.replace("{data}", str(data)).replace("{out}", str(out)) for a in self.command]


@dataclass
class Suite:
    name: str
    programs: list[Program]
    source: str = "built-in"
    notes: list[str] = field(default_factory=list)

    def program(self, name: str) -> Program:
        for p in self.programs:
            if p.name == name:
                return p
        raise CoreplaneError(f"suite {self.name}: no program {name!r}")


PY_WORK = ("import json, csv, decimal, email.parser, http.client, statistics\n"
           "rows = [{'k': i, 'v': str(decimal.Decimal(i) / 7)} for i in range(20000)]\n"
           "print(len(json.dumps(rows)), statistics.mean(r['k'] for r in rows))\n")

SYNTH_BZIP2 = Synthetic(mix_from="bzip2", calls=6000, phases=60, compute_ms=150.0)

DEFAULT = [
    Program("synth-bzip2", description="gain_synth: Monte Carlo π phases and bzip2's syscall mix (paper 002 Fig. 11a/b)",
            synthetic=SYNTH_BZIP2, gammas=(1.0, 2.0, 4.0)),
    Program("synth-bzip2-t2", description="the same with 2 worker threads",
            synthetic=Synthetic(mix_from="bzip2", calls=3000, phases=60, compute_ms=75.0, threads=2),
            gammas=(1.0, 2.0)),
    Program("synth-python", description="gain_synth with python3's start-up mix (stat/openat-heavy, many calls)",
            synthetic=Synthetic(mix_from="python3", calls=4000, phases=40, compute_ms=150.0), gammas=(1.0, 2.0)),
    Program("bzip2", ("bzip2", "-9", "-c", "{data}/text-3m.txt"), "compress 3 MB of text", package="bzip2"),
    Program("gzip", ("gzip", "-6", "-c", "{data}/text-3m.txt"), "compress 3 MB of text", package="gzip"),
    Program("xz-T2", ("xz", "-T2", "-3", "--block-size=262144", "-c", "{data}/text-1m.txt"),
            "compress 1 MB with 2 worker threads", package="xz-utils"),
    Program("zstd-T2", ("zstd", "-q", "-T2", "-B262144", "-9", "-c", "{data}/text-3m.txt"),
            "compress 3 MB with 2 worker threads", package="zstd"),
    Program("sqlite3", ("sqlite3", "{out}/db.sqlite", ".read {data}/insert.sql"),
            "3000 single-row inserts into a file database", package="sqlite3"),
    Program("python3", ("/usr/bin/python3", "-c", PY_WORK), "interpreter start-up, imports and some work",
            package="python3"),
    Program("find", ("find", *["{data}/tree"] * 8, "-type", "f", "-name", "*7*"),
            "walk a tree of 3000 files 8 times", package="findutils"),
    Program("tar", ("tar", "-cf", "{out}/tree.tar", "-C", "{data}", *["tree"] * 5), "archive the same tree 5 times",
            package="tar"),
    Program("sort", ("sort", "-S", "64M", "--parallel=1", "-o", "{out}/sorted.txt", "{data}/text-3m.txt",
                     "{data}/text-3m.txt"), "sort 6 MB of text", package="coreutils"),
    Program("cc", ("cc", "-O2", "-c", "-o", "{out}/prog.o", "{data}/prog.c"),
            "compile a C file (cc → cc1 → as: processes one after another)", package="gcc"),
]

QUICK = [
    Program("synth-bzip2", description="gain_synth with bzip2's syscall mix",
            synthetic=Synthetic(mix_from="bzip2", calls=3000, phases=30, compute_ms=60.0), gammas=(1.0, 2.0)),
    Program("synth-bzip2-t2", description="the same with 2 worker threads",
            synthetic=Synthetic(mix_from="bzip2", calls=1500, phases=30, compute_ms=30.0, threads=2)),
    Program("bzip2", ("bzip2", "-9", "-c", "{data}/text-1m.txt"), "compress 1 MB of text", package="bzip2"),
    Program("python3", ("/usr/bin/python3", "-c", PY_WORK), "interpreter start-up, imports and some work",
            package="python3"),
]

SYNTHETIC = [p for p in DEFAULT if p.synthetic] + [p for p in DEFAULT if p.name in ("bzip2", "python3")]

BUILTIN = {"default": DEFAULT, "quick": QUICK, "synthetic": SYNTHETIC}


def load(name_or_path: str) -> Suite:
    """A built-in suite (default, quick, synthetic) or a suite file (TOML, docs/formats.md)."""
    if name_or_path in BUILTIN:
        return _checked(Suite(name_or_path, list(BUILTIN[name_or_path])))
    path = Path(name_or_path)
    if not path.exists():
        raise CoreplaneError(f"suite {name_or_path!r}: neither a built-in suite ({', '.join(BUILTIN)}) nor a file")
    text = read_text(path)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CoreplaneError(f"{path}: not TOML: {exc}") from None
    where = Where(str(path), text)
    check_keys(doc, ("name", "program"), (), where)
    raw = doc.get("program")
    if not isinstance(raw, list) or not raw:
        raise where.fail(("program",), "expected one or more [[program]] tables")
    programs = [_program(item, ("program", i), where) for i, item in enumerate(raw)]
    return _checked(Suite(str(doc.get("name", path.stem)), programs, str(path)), where)


def _program(item, path: tuple, where: Where) -> Program:
    if not isinstance(item, dict):
        raise where.fail(path, "expected a table")
    check_keys(item, ("name", "command", "description", "synthetic", "gammas", "package"), path, where)
    name = item.get("name")
    if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum():
        raise where.fail(path + ("name",), f"expected a name of letters, digits, - and _, got {name!r}")
    command = item.get("command", [])
    if isinstance(command, str):
        command = command.split()
    if not isinstance(command, list) or not all(isinstance(a, str) for a in command):
        raise where.fail(path + ("command",), "expected a list of strings")
    synthetic = None
    if "synthetic" in item:
        synthetic = _synthetic(item["synthetic"], path + ("synthetic",), where)
    elif not command:
        raise where.fail(path, "needs a command (or a synthetic table)")
    gammas = item.get("gammas", [1.0])
    if not isinstance(gammas, list) or not gammas or not all(
            isinstance(g, (int, float)) and not isinstance(g, bool) and g > 0 for g in gammas):
        raise where.fail(path + ("gammas",), "expected a list of positive numbers")
    if synthetic is None and gammas != [1.0] and gammas != [1]:
        raise where.fail(path + ("gammas",), "only a synthetic program can emulate a gain")
    return Program(name, tuple(command), str(item.get("description", "")), synthetic,
                   tuple(float(g) for g in gammas), item.get("package"))


def _synthetic(raw, path: tuple, where: Where) -> Synthetic:
    if not isinstance(raw, dict):
        raise where.fail(path, "expected a table")
    check_keys(raw, ("mix_from", "calls", "phases", "compute_ms", "threads"), path, where)
    for key in ("mix_from", "calls", "phases", "compute_ms"):
        if key not in raw:
            raise where.fail(path + (key,), "missing")
    for key, low in (("calls", 1), ("phases", 1), ("threads", 1)):
        value = raw.get(key, 1)
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise where.fail(path + (key,), f"expected an integer >= {low}, got {value!r}")
    ms = raw["compute_ms"]
    if not isinstance(ms, (int, float)) or isinstance(ms, bool) or ms <= 0:
        raise where.fail(path + ("compute_ms",), f"expected a positive number, got {ms!r}")
    return Synthetic(str(raw["mix_from"]), raw["calls"], raw["phases"], float(ms), raw.get("threads", 1))


def _checked(suite: Suite, where: Where | None = None) -> Suite:
    names = [p.name for p in suite.programs]
    for i, p in enumerate(suite.programs):
        if names.count(p.name) > 1:
            raise _fail(where, ("program", i, "name"), suite, f"{p.name!r} appears twice")
        if p.synthetic and p.synthetic.mix_from not in names:
            raise _fail(where, ("program", i, "synthetic", "mix_from"), suite,
                        f"{p.synthetic.mix_from!r} is not a program of the suite")
        if p.synthetic and suite.program(p.synthetic.mix_from).synthetic:
            raise _fail(where, ("program", i, "synthetic", "mix_from"), suite,
                        f"{p.synthetic.mix_from!r} is synthetic itself; take the mix of a real program")
    return suite


def _fail(where: Where | None, path: tuple, suite: Suite, message: str) -> CoreplaneError:
    return where.fail(path, message) if where else CoreplaneError(f"suite {suite.name}: {message}")


def missing_programs(suite: Suite) -> list[str]:
    """Commands of the suite not found on PATH (install them: `make setup` lists them in APT_PACKAGES)."""
    return sorted({p.command[0] for p in suite.programs if p.command and not shutil.which(p.command[0])})


def prepare_data(directory: Path) -> Path:
    """Writes the suite's inputs once (deterministic: seeded text, a file tree, SQL, a C file)."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = directory / ".complete"
    if stamp.exists():
        return directory
    rng = random.Random(2002)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    lines = [" ".join(rng.choice(words) for _ in range(8)) + "\n" for _ in range(60_000)]
    text = "".join(lines)
    (directory / "text-3m.txt").write_text(text[:3_000_000])
    (directory / "text-1m.txt").write_text(text[:1_000_000])
    tree = directory / "tree"
    for i in range(3000):
        sub = tree / f"d{i % 30:02d}" / f"e{i % 7}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{i}.txt").write_text(lines[i] * (1 + i % 5))
    sql = ["PRAGMA journal_mode=MEMORY;", "PRAGMA synchronous=OFF;",
           "create table if not exists t(a integer primary key, b text);", "delete from t;"]
    sql += [f"insert into t(b) values('row {i} ' || hex(randomblob(24)));" for i in range(3000)]
    sql.append("select count(*), sum(length(b)) from t;")
    (directory / "insert.sql").write_text("\n".join(sql) + "\n")
    funcs = "\n".join(f"static int f{i}(int x) {{ return x * {i} + (x >> {i % 7}); }}" for i in range(200))
    calls = " + ".join(f"f{i}(argc)" for i in range(200))
    (directory / "prog.c").write_text(f"#include <stdio.h>\n{funcs}\nint main(int argc, char **argv) "
                                      f"{{ (void)argv; printf(\"%d\\n\", {calls}); return 0; }}\n")
    stamp.write_text("inputs of the validation suites\n")
    return directory
