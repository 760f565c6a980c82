"""Sweep specs: the TOML format, paper 001's INFOFILE, and one-line `file:line:` errors."""

import pytest

from conftest import run_cli
from coreplane.core.errors import CoreplaneError
from coreplane.dse.specfile import load

GOOD_TOML = """\
name = "levels"
command = "gzip -{level} -c {input} > /dev/null"
repetitions = 3
warmups = 1
timeout = { adaptive = true, factor = 2.5, floor = 4, size_class = ["input"] }
retries = { count = 2, backoff = 0.5, on = ["timeout", "exit"] }
tags = { paper = "001" }

[parameters]
level = [1, 5, 9]
input = ["/etc/services", "/etc/protocols"]
threads = { start = 1, stop = 4, factor = 2 }
step = { start = 0.1, stop = 0.3, step = 0.1 }

[expand]
zip = [["threads", "step"]]

[env]
OMP_NUM_THREADS = "{threads}"

[[metrics]]
source = "time"

[[metrics]]
source = "regex"
pattern = 'ratio (?P<ratio>[\\d.]+)'
stream = "stderr"

[statistics]
cv_threshold = 0.05
max_repetitions = 9
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def error_of(path) -> str:
    with pytest.raises(CoreplaneError) as exc:
        load(path)
    return str(exc.value)


def assert_error_at(tmp_path, name, good, old, new, line, message):
    """Breaking `good` (old -> new) gives a one-line error at `file:line:` containing `message`."""
    assert old in good
    path = write(tmp_path, name, good.replace(old, new))
    text = error_of(path)
    assert text.startswith(f"{path}:{line}: "), text
    assert message in text and "\n" not in text, text


def test_toml_spec_reads_every_section(tmp_path):
    spec = load(write(tmp_path, "s.toml", GOOD_TOML))
    assert spec.name == "levels" and spec.repetitions == 3 and spec.warmups == 1
    assert spec.parameters["threads"] == [1, 2, 4]
    assert spec.parameters["step"] == [0.1, 0.2, 0.3]
    assert spec.timeout.adaptive and spec.timeout.factor == 2.5 and spec.timeout.floor == 4
    assert spec.timeout.size_class == ("input",)
    assert (spec.retries.count, spec.retries.backoff, spec.retries.on) == (2, 0.5, ("timeout", "exit"))
    assert [m.source for m in spec.metrics] == ["time", "regex"] and spec.metrics[1].stream == "stderr"
    assert spec.statistics.cv_threshold == 0.05 and spec.statistics.max_repetitions == 9
    assert spec.env == {"OMP_NUM_THREADS": "{threads}"} and spec.tags == {"paper": "001"}
    assert spec.text == GOOD_TOML


@pytest.mark.parametrize("old, new, line, message", [
    ("repetitions = 3", "repetition = 3", 3, "repetition: unknown key (did you mean 'repetitions'?)"),
    ("repetitions = 3", "repetitions = 0", 3, "repetitions: must be > 0, got 0"),
    ('command = "gzip -{level}', 'command = "gzip -{levl}', 2, "command: unknown placeholder {levl}"),
    ("level = [1, 5, 9]", "level = []", 10, "parameters.level: empty list of values"),
    ("level = [1, 5, 9]", "n = [1, 5, 9]", 10, "parameters.n: 'n' is a built-in placeholder or a result column"),
    ('zip = [["threads", "step"]]', 'zip = [["threads", "input"]]', 16,
     "expand.zip: zipped parameters need as many values each: threads has 3, input has 2"),
    ("[\\d.]+)'", "[\\d.+)'", 26, "metrics[1].pattern: bad regular expression"),
    ('source = "time"', 'source = "perf"', 22, "metrics[0].source: expected one of time, profile, json, regex"),
    ("factor = 2.5,", "factor = -1,", 5, "timeout.factor: must be > 0, got -1"),
    ('on = ["timeout", "exit"]', 'on = ["crash"]', 6, "retries.on: expected a list drawn from"),
    ("max_repetitions = 9", "max_repetitions = 9.5", 31, "statistics.max_repetitions: expected an integer"),
    ('level = [1, 5, 9]', 'level = [1, 5, 9', 11, "Unclosed array"),
])
def test_toml_errors_name_file_line_and_field(tmp_path, old, new, line, message):
    assert_error_at(tmp_path, "bad.toml", GOOD_TOML, old, new, line, message)


INFOFILE = """\
# paper 001: OS images x matrix sizes x cores
name=mm
command=echo {os} {size} {cores}
repetitions=5
timeout=adaptive
timeout_floor=10
size_class=size,cores
retries=2
metric.cycles=cycles (\\d+)
env.OMP_NUM_THREADS={cores}
tag.paper=001
os=karmic,tfx,trusty,xenial
size=64..1024:*2
cores=1..4
"""


def test_infofile_maps_keys_to_the_spec(tmp_path):
    spec = load(write(tmp_path, "INFOFILE", INFOFILE))
    assert spec.name == "mm" and spec.repetitions == 5
    assert spec.parameters == {"os": ["karmic", "tfx", "trusty", "xenial"], "size": [64, 128, 256, 512, 1024],
                               "cores": [1, 2, 3, 4]}
    assert spec.timeout.adaptive and spec.timeout.floor == 10 and spec.timeout.size_class == ("size", "cores")
    assert spec.retries.count == 2
    assert spec.metrics[0].source == "regex" and spec.metrics[0].name == "cycles"
    assert spec.env == {"OMP_NUM_THREADS": "{cores}"} and spec.tags == {"paper": "001"}


@pytest.mark.parametrize("old, new, line, message", [
    ("cores=1..4", "cores 1..4", 14, "expected key=value, got 'cores 1..4'"),
    ("cores=1..4", "cores=4..1", 14, "cores: empty range: start 4 > stop 1"),
    ("cores=1..4", "size=1,2", 14, "size: already set on line 13"),
    ("os=karmic,tfx", "os=karmic,,tfx", 12, "os: empty value"),
    ("repetitions=5", "repetitions=five", 4, "repetitions: expected an integer"),
    ("timeout_floor=10", "timeout_floor=-3", 6, "timeout.floor: must be > 0"),
    ("size_class=size,cores", "size_class=size,nodes", 7, "timeout.size_class: 'nodes' is not a parameter"),
    ("metric.cycles=cycles (\\d+)", "metric.cycles=cycles (\\d+", 9, "bad regular expression"),
    ("env.OMP", "environment.OMP", 10, "unknown prefix 'environment.'"),
    ("command=echo {os}", "command=echo {osx}", 3, "command: unknown placeholder {osx}"),
])
def test_infofile_errors_name_the_line(tmp_path, old, new, line, message):
    assert_error_at(tmp_path, "INFOFILE", INFOFILE, old, new, line, message)


def test_infofile_without_command(tmp_path):
    path = write(tmp_path, "INFOFILE", "size=1,2\n")
    assert error_of(path) == f"{path}:1: command: a spec needs command = \"...\" (the command template)"


def test_cli_prints_one_line_and_exits_2(tmp_path):
    path = write(tmp_path, "bad.toml", 'command = "true"\nrepetitions = "many"\n')
    proc = run_cli("sweep", str(path), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr == f"coreplane: error: {path}:2: repetitions: expected an integer, got 'many'\n"
    assert not (tmp_path / "out").exists()


def test_dry_run_lists_points(tmp_path):
    from conftest import cli_json
    doc = cli_json("sweep", str(write(tmp_path, "INFOFILE", INFOFILE)), "--dry-run")
    assert len(doc["points"]) == 4 * 5 * 4
    assert doc["points"][0]["command"] == "echo karmic 64 1"
    assert doc["points"][0]["env"] == {"OMP_NUM_THREADS": "1"}
