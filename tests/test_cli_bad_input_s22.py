"""Bad input across the CLI (session 22's sweep): one line on stderr naming the file or option,
a non-zero exit, nothing of the user's lost or left behind, and --json output that is JSON."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from coreplane.core.native import WORKLOADS

PROFILE = REPO / "tests" / "fixtures" / "profiles" / "tiny.json"
SPEC = 'name = "t"\ncommand = "echo {a}"\nrepetitions = 1\n[parameters]\na = [1]\n'


def one_line_error(proc, *words: str) -> str:
    """The error line of a failed command; it must be the only line and contain every word."""
    assert proc.returncode != 0, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("coreplane: error: "), proc.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("sweep")
    (base / "t.toml").write_text(SPEC)
    run_cli("sweep", str(base / "t.toml"), "--out", str(base / "sw"), "--json", check=True)
    return base / "sw"


@pytest.mark.parametrize("content", [b"", b"\x00\x01not sqlite at all\n"])
def test_report_on_a_file_that_is_no_store_leaves_it_alone(tmp_path, content):
    # An empty file opened by SQLite is an empty database: the store's schema went into it.
    victim = tmp_path / "notes.json"
    victim.write_bytes(content)
    for args in (["report", str(victim)], ["compare", str(victim), str(victim)]):
        one_line_error(run_cli(*args, "--json"), str(victim), "not a coreplane sweep store")
    assert victim.read_bytes() == content
    assert not (tmp_path / "report.html").exists()


@pytest.mark.parametrize("args", [
    ["report", "{sweep}", "--format", "csv", "--out", "{dir}"],
    ["report", "{sweep}", "--out", "{dir}"],
    ["sweep", "{spec}", "--out", "{file}"],
    ["map", "pattern:ring:4", "-t", "mesh:2x2", "--out", "{dir}"],
    ["project", str(PROFILE), "--no-calibration", "--plot", "{file}"],
    ["doctor", "--capture", "{file}"],
])
def test_an_output_path_of_the_wrong_kind_is_one_line(sweep, tmp_path, args):
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("keep me\n")
    (tmp_path / "t.toml").write_text(SPEC)
    paths = {"sweep": str(sweep), "dir": str(tmp_path / "dir"), "file": str(tmp_path / "file"),
             "spec": str(tmp_path / "t.toml")}
    proc = run_cli(*[a.format(**paths) for a in args], "--json")
    one_line_error(proc, str(tmp_path))
    assert (tmp_path / "file").read_text() == "keep me\n"


@pytest.mark.parametrize("args", [
    ["project", "{binary}", "--no-calibration"],
    ["run", "--json", "--map", "{binary}", "--", "/bin/true"],
    ["sweep", "{binary}", "--dry-run"],
    ["validate", "{binary}"],
    ["bench", "floor", "--from", "{binary}"],
])
def test_a_binary_file_where_text_goes_is_one_line(tmp_path, args):
    binary = tmp_path / "prog"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(128, 256)))
    proc = run_cli(*[a.format(binary=binary) for a in args])
    one_line_error(proc, str(binary), "not a text file")


@pytest.mark.parametrize("content,words", [
    (PROFILE.read_text(), ["cacheline_pingpong_ns: missing"]),
    ("", ["line 1: not JSON"]),
])
def test_bench_floor_from_takes_only_a_floor_result(tmp_path, content, words):
    saved = tmp_path / "floor.json"
    saved.write_text(content)
    for extra in ([], ["--plot", str(tmp_path / "cdf.png")]):
        one_line_error(run_cli("bench", "floor", "--from", str(saved), *extra, "--json"), str(saved), *words)
    assert not (tmp_path / "cdf.png").exists()


@pytest.mark.parametrize("command", ["run", "profile"])
@pytest.mark.parametrize("where,words", [("{dir}", ["is a directory"]), ("{dir}/no/such/x.json", ["no directory"])])
def test_json_out_is_checked_before_the_program_runs(tmp_path, command, where, words):
    (tmp_path / "dir").mkdir()
    marker = tmp_path / "ran"
    json_out = where.format(dir=tmp_path / "dir")
    proc = run_cli(command, "--json-out", json_out, "--", "/bin/touch", str(marker))
    one_line_error(proc, f"--json-out {json_out}", *words)
    assert not marker.exists()


def test_profile_leaves_no_temporary_profile_on_bad_input(tmp_path, monkeypatch):
    env_tmp = tmp_path / "tmp"
    env_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(env_tmp))
    for args in (["--delegate", "no_such_call"], ["--json-out", str(tmp_path)]):
        one_line_error(run_cli("profile", *args, "--", "/bin/true"))
    one_line_error(run_cli("profile", "--", str(tmp_path / "missing")), "No such file")
    assert list(env_tmp.iterdir()) == []


@pytest.mark.parametrize("command,args,words", [
    ("validate", ["--compute-cores", "4095"], ["--compute-cores", "4095"]),
    ("validate", ["--nice", "99"], ["--nice 99"]),
    ("validate", ["--until-noise", "nan"], ["--until-noise nan"]),
    ("study", ["--until-noise", "nan"], ["--until-noise nan"]),
])
def test_validate_rejects_bad_options_before_its_out_directory(tmp_path, command, args, words):
    out = tmp_path / "out"
    one_line_error(run_cli(command, *args, "--out", str(out), "--json"), *words)
    assert not out.exists()


@pytest.mark.parametrize("command", ["validate", "study"])
def test_validate_out_onto_a_file(tmp_path, command):
    victim = tmp_path / "file"
    victim.write_text("keep me\n")
    one_line_error(run_cli(command, "--out", str(victim), "--json"), f"--out {victim}: not a directory")
    assert victim.read_text() == "keep me\n"


@pytest.mark.parametrize("args,words", [
    (["project", str(PROFILE), "--gamma", "nan"], ["--gamma nan"]),
    (["project", str(PROFILE), "--forward-cost", "inf"], ["--forward-cost inf"]),
    (["map", "pattern:ring:0", "-t", "mesh:2x2"], ["pattern:ring:0", "process count 0"]),
    (["map", "pattern:ring:-1", "-t", "mesh:2x2"], ["process count -1"]),
    (["map", "pattern:ring:4", "-t", "mesh:2x2", "--message-bytes", "nan"], ["--message-bytes nan"]),
    (["map", "pattern:ring:4", "-t", "mesh:2x2", "--message-bytes", "-5"], ["--message-bytes -5"]),
    (["map", "pattern:ring:4", "-t", "mesh:2x2", "--capacity", "-1"], ["--capacity"]),
])
def test_numbers_that_are_no_numbers(args, words):
    extra = ["--no-calibration"] if args[0] == "project" else []
    one_line_error(run_cli(*args, *extra, "--json"), *words)


def test_a_pattern_name_is_printed_as_given():
    out = run_cli("map", "pattern:ring:4", "-t", "mesh:2x2", check=True).stdout
    assert "pattern:ring:4" in out and "\N{RING}" not in out


def test_native_usage_errors_name_the_argument():
    # clap's error is its first line; the last ("For more information, try '--help'.") was shown.
    from coreplane.core.native import error_line
    stderr = ("error: unexpected argument '-1' found\n\nUsage: coreplane-partition [OPTIONS] --edges <EDGES>\n\n"
              "For more information, try '--help'.\n")
    assert error_line(stderr, 2) == "error: unexpected argument '-1' found"
    assert error_line("coreplane-bench: --cores: expected two cores\n", 2) == "coreplane-bench: --cores: expected two cores"
    assert error_line("", 3) == "exit status 3"


@pytest.fixture(scope="module")
def graph(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("graph") / "g.cpg"
    run_cli("graph", "build", "-o", str(out), "--windows", "1", "--window", "1000", "--json", "--", "/bin/true",
            check=True)
    return out


@pytest.mark.parametrize("args,words", [
    (["--restarts", "-1"], ["--restarts"]),
    (["--restarts", "0"], ["--restarts"]),
    (["--message-cost", "nan"], ["--message-cost nan"]),
    (["--slack", "nan"], ["--slack nan"]),
])
def test_graph_partition_bad_numbers(graph, args, words):
    one_line_error(run_cli("graph", "partition", str(graph), "--cores", "2", *args, "--json"), *words)


def test_a_figure_named_without_a_suffix_is_reported_where_it_is(tmp_path):
    out = tmp_path / "syscalls"
    proc = run_cli("profile", "--plot", str(out), "--json", "--", "/bin/true", check=True)
    doc = json.loads(proc.stderr.strip().splitlines()[-1])
    assert doc["plot"] == str(out) + ".png" and Path(doc["plot"]).is_file()


@pytest.mark.parametrize("where", ["missing/p.json", "."])
def test_a_profile_that_cannot_be_written_stops_the_run_before_the_program(tmp_path, where):
    # coreplane-exec checked nothing: the program ran, its profile was lost, and the exit was 0.
    marker = tmp_path / "ran"
    out = tmp_path / where
    proc = run_cli("run", "--profile", str(out), "--", "sh", "-c", f"touch {marker}")
    one_line_error(proc, "--profile", str(out))
    assert not marker.exists()


def test_a_delegation_policy_file_that_cannot_be_read_names_the_option(tmp_path):
    one_line_error(run_cli("run", "--delegate", f"@{tmp_path / 'none.txt'}", "--", "true"),
                   "--delegate", "cannot read")


def test_an_unknown_memory_mode_lists_the_modes():
    one_line_error(run_cli("run", "--memory", "bogus", "--", "true"), "bogus", "linux, pool, pool-demand")


@pytest.mark.parametrize("text,words", [
    # metrics as an inline array: there is no [[metrics]] header to count; line 1 was blamed.
    ('name = "t"\ncommand = "echo {a}"\nrepetitions = 1\nmetrics = ["time"]\n[parameters]\na = [1]\n',
     ["t.toml:4: metrics[0]: expected a table"]),
    ('command = "echo {a}"\nmetrics = [\n  { source = "time" },\n\n  { source = "regex", name = "x", stream = "stdin",'
     ' pattern = "y" },\n]\n[parameters]\na = [1]\n', ["t.toml:5: metrics[1].stream: expected stdout, stderr or file"]),
    # a key's name inside a multi-line string is not the key
    ('command = """\nrepetitions = 3\necho {a}"""\nrepetitions = 0\n[parameters]\na = [1]\n',
     ["t.toml:4: repetitions: must be > 0"]),
    # a line of a multi-line array that starts with "[" is not a table header
    ('command = "echo {a} {b}"\n[parameters]\na = [1]\nb = [2]\n[expand]\nzip = [\n  ["a", "b"]\n]\nexclude = 5\n',
     ["t.toml:9: expand.exclude: expected a list of tables"]),
    # dotted keys and inline tables
    ('command = "echo {a}"\ntimeout.adaptive = true\ntimeout.size_class = ["factor"]\ntimeout.factor = -2\n'
     '[parameters]\na = [1]\n', ["t.toml:4: timeout.factor: must be > 0"]),
    ('command = "echo {a}"\n[parameters]\nb = [1]\na = { start = 1, stop = 3, factor = 0.5 }\n',
     ["t.toml:4: parameters.a: a geometric range needs"]),
])
def test_spec_errors_name_the_line_of_the_key(tmp_path, text, words):
    (tmp_path / "t.toml").write_text(text)
    one_line_error(run_cli("sweep", str(tmp_path / "t.toml"), "--dry-run", "--json"), *words)


@pytest.mark.parametrize("value,words", [
    ("1..", ["t.info:2: a: malformed range: '1..'"]),
    ("..4", ["t.info:2: a: malformed range: '..4'"]),
    ("1..4:", ["t.info:2: a: malformed range: '1..4:'"]),
    ("1..8:*", ["t.info:2: a: malformed range: '1..8:*'"]),
    ("1..4,8", ["t.info:2: a: a range stands alone, not in a list: '1..4'"]),
])
def test_an_infofile_range_written_wrong_is_no_value(tmp_path, value, words):
    # `a=1..` ran the command with the value "1..".
    (tmp_path / "t.info").write_text(f"command=echo {{a}}\na={value}\n")
    one_line_error(run_cli("sweep", str(tmp_path / "t.info"), "--dry-run", "--json"), *words)


def test_an_infofile_value_with_dots_that_is_no_range_stays_a_string(tmp_path):
    (tmp_path / "t.info").write_text("command=echo {a}\na=../data,1.2.3,v1..v2\n")
    doc = json.loads(run_cli("sweep", str(tmp_path / "t.info"), "--dry-run", "--json", check=True).stdout)
    assert [p["params"]["a"] for p in doc["points"]] == ["../data", "1.2.3", "v1..v2"]


@pytest.mark.parametrize("where,words", [
    ("file", ["{file}: not a directory"]),
    ("file/sub", ["{file}/sub: cannot be made: {file} is not a directory"]),
])
def test_sweep_out_onto_a_file_says_so(tmp_path, where, words):
    # mkdir's "File exists" was all a user saw.
    victim = tmp_path / "file"
    victim.write_text("keep me\n")
    (tmp_path / "t.toml").write_text(SPEC)
    proc = run_cli("sweep", str(tmp_path / "t.toml"), "--out", str(tmp_path / where), "--json")
    one_line_error(proc, *[w.format(file=victim) for w in words])
    assert victim.read_text() == "keep me\n"


@pytest.mark.parametrize("command", ["validate", "study"])
def test_validate_checks_its_workloads_before_its_out_directory(tmp_path, command):
    # gain_synth not built: OUT/data was made first, and the next try said "exists, use --resume".
    built = tmp_path / "bin"
    built.mkdir()
    for path in WORKLOADS.iterdir():
        if path.name != "gain_synth":
            (built / path.name).symlink_to(path)
    suite = tmp_path / "suite.toml"
    suite.write_text('[[program]]\nname = "t"\ncommand = ["/bin/true"]\n')
    out = tmp_path / "out"
    code = ("import sys; from pathlib import Path; import coreplane.core.native as native; "
            f"native.WORKLOADS = Path({str(built)!r}); from coreplane.entry import main; "
            "sys.argv[0] = 'coreplane'; sys.exit(main())")
    args = [command] + ([str(suite)] if command == "validate" else []) + ["--out", str(out), "--json"]
    for _ in range(2):  # the second try must say the same, not "exists ... --resume"
        proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
        one_line_error(proc, "gain_synth", "make workloads")
        assert not out.exists()
