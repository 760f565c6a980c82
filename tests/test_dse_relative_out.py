"""A sweep whose --out is relative and whose spec lives elsewhere (commands run in the spec's
directory) still finds its run logs, e.g. the /usr/bin/time file (make demo does this)."""

import json

from conftest import run_cli


def test_relative_out_with_time_metrics(tmp_path):
    spec_dir = tmp_path / "specs"
    spec_dir.mkdir()
    spec = spec_dir / "echo.info"
    spec.write_text("name=echo\ncommand=echo {k}\nk=1,2\nrepetitions=1\ntimeout=20\nmetrics=time\n")
    work = tmp_path / "work"
    work.mkdir()
    proc = run_cli("sweep", str(spec), "--out", "rel/sweep", cwd=work)
    assert proc.returncode == 0, proc.stderr
    report = run_cli("report", "rel/sweep", "--format", "json", cwd=work)
    assert report.returncode == 0, report.stderr
    rows = json.loads((work / "rel" / "sweep" / "summary.json").read_text())
    rss = [r for r in rows if r["metric"] == "max_rss_kb"]
    assert sorted(r["k"] for r in rss) == [1, 2] and all(r["n"] == 1 and r["mean"] > 0 for r in rss)
