"""`coreplane report` (HTML, CSV, Parquet, JSON) and `coreplane compare` on real sweeps."""

import json
import re

import pandas as pd
import pytest

from conftest import cli_json, run_cli
from coreplane import dse
from coreplane.report.cli import report


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """Two sweeps of gzip over levels and sizes; B's `score` is A's + 20 (exact, unlike times)."""
    root = tmp_path_factory.mktemp("report")
    for name, offset in (("a", 0), ("b", 20)):
        spec = dse.spec_from_dict({
            "name": f"gzip-{name}",
            "command": f"head -c {{kib}}000 /dev/urandom | gzip -{{level}} > /dev/null; "
                       f"echo score $(( {{level}} * 100 + {{rep}} + {offset} ))",
            "parameters": {"level": [1, 9], "kib": [100, 400, 800]},
            "repetitions": 3, "tags": {"side": name},
            "metrics": [{"source": "time"}, {"source": "regex", "name": "score", "pattern": r"score (\d+)"}]})
        dse.run_sweep(spec, root / name, progress=False)
    return root


def test_html_report_has_tables_and_figures(sweeps):
    doc = cli_json("report", str(sweeps / "a"))
    html = (sweeps / "a" / "report.html").read_text()
    # line with error bars + heat map (two parameters vary) + user/kernel stacked bars
    assert doc["figures"] == 3 == html.count("data:image/png;base64,")
    assert doc["points"] == 6 and doc["metrics"] == ["wall_s"]
    assert "<h1>Sweep gzip-a</h1>" in html and "side=a" in html
    assert re.search(r"<th>ci_low</th>", html) and html.count("<tr class=''>") >= 6
    assert "Other metrics" in html and "<th>max_rss_kb</th>" in html


def test_summary_exports_agree(sweeps, tmp_path):
    expected = dse.summary(sweeps / "a")
    for fmt, read in (("csv", pd.read_csv), ("parquet", pd.read_parquet),
                      ("json", lambda p: pd.DataFrame(json.loads(p.read_text())))):
        out = tmp_path / f"s.{fmt}"
        if fmt == "csv":
            assert cli_json("report", str(sweeps / "a"), "--format", fmt, "--out", str(out))["rows"] == len(expected)
        else:   # the same command in-process: the CLI's start-up is paid once above
            report(sweeps / "a", fmt, out, None, False, True)
        df = read(out)
        assert len(df) == len(expected) == 6 * expected["metric"].nunique()
        assert list(df.columns) == list(expected.columns)
        assert df["mean"].to_numpy() == pytest.approx(expected["mean"].to_numpy())


def test_raw_export_is_long_format(sweeps, tmp_path):
    out = tmp_path / "runs.parquet"
    run_cli("report", str(sweeps / "a"), "-f", "parquet", "--raw", "--out", str(out), check=True)
    df = pd.read_parquet(out)
    assert set(df.columns) >= {"run_id", "level", "kib", "rep", "metric", "value"}
    assert len(df[df["metric"] == "wall_s"]) == 6 * 3


def test_compare_finds_the_slower_sweep(sweeps):
    doc = cli_json("compare", str(sweeps / "a"), str(sweeps / "b"), "--metric", "score")
    assert doc["keys"] == ["level", "kib"] and len(doc["rows"]) == 6
    for row in doc["rows"]:
        assert (row["n_a"], row["n_b"], row["mean_b"] - row["mean_a"]) == (3, 3, 20)
        assert row["ratio"] == pytest.approx((row["level"] * 100 + 21) / (row["level"] * 100 + 1), rel=1e-12)
        assert row["p"] < 1e-4 and row["significant"]


def test_compare_two_configurations_of_one_sweep(sweeps):
    from coreplane.report.compare import compare
    df = compare(f"{sweeps / 'a'}@level=1", f"{sweeps / 'a'}@level=9", ["wall_s", "score"])
    assert list(df["kib"]) == [100, 100, 400, 400, 800, 800] and (df["n_a"] == 3).all() and (df["n_b"] == 3).all()
    means = dse.summary(sweeps / "a").set_index(["level", "kib", "metric"])["mean"]
    for _, row in df.iterrows():   # matched on kib, sides split by level
        assert (row["mean_a"], row["mean_b"]) == pytest.approx(
            (means[(1, row["kib"], row["metric"])], means[(9, row["kib"], row["metric"])]))
    assert set(df[df["metric"] == "score"]["mean_b"] - df[df["metric"] == "score"]["mean_a"]) == {800}


def test_report_errors_are_one_line(sweeps, tmp_path):
    proc = run_cli("report", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr == f"coreplane: error: {tmp_path}/store.sqlite: no sweep store here (run `coreplane sweep SPEC --out DIR` first)\n"
    proc = run_cli("report", str(sweeps / "a"), "--metric", "nope")
    assert proc.stderr.startswith("coreplane: error: --metric nope: not in") and proc.stderr.count("\n") == 1
    proc = run_cli("compare", f"{sweeps / 'a'}@colour=red", str(sweeps / "b"))
    assert proc.stderr.startswith(f"coreplane: error: {sweeps / 'a'}@colour=red: 'colour' is not a parameter")


def test_report_lists_failed_runs_even_when_none_succeeded(tmp_path):
    dse.run_sweep({"command": "exit {code}", "parameters": {"code": [3, 4]}, "repetitions": 1}, tmp_path / "f",
                  progress=False)
    report(tmp_path / "f", "html", tmp_path / "r.html", None, False, True)
    html = (tmp_path / "r.html").read_text()
    assert "Failed runs (2)" in html and "exit status 3" in html and "exit status 4" in html
    assert str(tmp_path / "f" / "logs") in html
