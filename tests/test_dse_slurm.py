"""`coreplane sweep --executor slurm` against a real single-node Slurm started by this module.

munged, MariaDB, slurmdbd, slurmctld and slurmd run from a temporary directory on localhost ports
(Debian's munge, mariadb-server, slurm-wlm, slurmdbd) and are stopped afterwards. Without them
the tests fail: they exist to test real Slurm, and CI installs the packages (Makefile APT_PACKAGES)."""

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import run_cli

DAEMONS = ["munged", "mariadb-install-db", "mariadbd", "slurmdbd", "slurmctld", "slurmd", "sacctmgr"]
MAX_SUBMIT = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _which(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin")
    assert path, f"{name} is missing: install munge, mariadb-server, slurm-wlm, slurmdbd (make apt)"
    return path


class Cluster:
    """A one-node Slurm with accounting, all state in `root`; `stop()` ends every daemon it started."""

    def __init__(self, root: Path):
        assert os.geteuid() == 0, "the Slurm test starts slurmd and munged and needs root"
        self.root = root
        self.procs: list[subprocess.Popen] = []
        self.host = socket.gethostname().split(".")[0]
        self.ports = {k: _free_port() for k in ("db", "dbd", "ctld", "slurmd")}
        self.env = {**os.environ, "SLURM_CONF": str(root / "slurm.conf")}

    def _start(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.root / f"{name}.out", "wb")
        proc = subprocess.Popen([_which(name), *args], stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                stdin=subprocess.DEVNULL)
        self.procs.append(proc)
        return proc

    def _until(self, what: str, check, seconds: float = 30) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and all(p.poll() is None for p in self.procs):
            if check():
                return
            time.sleep(0.2)
        logs = "\n".join(f"--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted(self.root.glob("*.out")))
        raise AssertionError(f"Slurm test cluster: {what} did not come up\n{logs}")

    def _ok(self, *cmd: str) -> bool:
        return subprocess.run([_which(cmd[0]), *cmd[1:]], env=self.env, capture_output=True).returncode == 0

    def start(self) -> None:
        r = self.root
        for d in ("munge", "db", "state", "spool"):
            (r / d).mkdir()
        (r / "munge").chmod(0o755)   # munged wants its socket directory searchable by all
        key = r / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        sock = r / "munge" / "socket"
        self._start("munged", "-F", f"--socket={sock}", f"--key-file={key}", f"--log-file={r}/munged.log",
                    f"--pid-file={r}/munged.pid", f"--seed-file={r}/munged.seed")
        self._until("munged", sock.exists)

        subprocess.run([_which("mariadb-install-db"), "--no-defaults", f"--datadir={r}/db", "--user=root",
                        "--auth-root-authentication-method=normal", "--skip-test-db"],
                       check=True, capture_output=True)
        (r / "init.sql").write_text("CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';\n"
                                    "GRANT ALL ON *.* TO 'slurm'@'127.0.0.1';\n")
        self._start("mariadbd", "--no-defaults", f"--datadir={r}/db", "--user=root", f"--socket={r}/db.sock",
                    f"--port={self.ports['db']}", "--bind-address=127.0.0.1", f"--init-file={r}/init.sql",
                    "--skip-name-resolve", "--innodb-buffer-pool-size=32M", f"--pid-file={r}/db.pid")
        self._until("mariadbd", lambda: (r / "db.pid").exists())

        (r / "slurmdbd.conf").write_text(
            f"AuthType=auth/munge\nAuthInfo=socket={sock}\nDbdHost=localhost\nDbdAddr=127.0.0.1\n"
            f"DbdPort={self.ports['dbd']}\nSlurmUser=root\nStorageType=accounting_storage/mysql\n"
            f"StorageHost=127.0.0.1\nStoragePort={self.ports['db']}\nStorageUser=slurm\nStoragePass=slurm\n"
            f"StorageLoc=slurm_acct\nLogFile={r}/slurmdbd.log\nPidFile={r}/slurmdbd.pid\n")
        (r / "slurmdbd.conf").chmod(0o600)
        (r / "slurm.conf").write_text(
            f"ClusterName=cptest\nSlurmctldHost={self.host}(127.0.0.1)\nSlurmctldPort={self.ports['ctld']}\n"
            f"SlurmdPort={self.ports['slurmd']}\nSlurmUser=root\nSlurmdUser=root\n"
            f"AuthType=auth/munge\nAuthInfo=socket={sock}\nCredType=cred/munge\n"
            f"StateSaveLocation={r}/state\nSlurmdSpoolDir={r}/spool\n"
            f"SlurmctldPidFile={r}/slurmctld.pid\nSlurmdPidFile={r}/slurmd.pid\n"
            f"SlurmctldLogFile={r}/slurmctld.log\nSlurmdLogFile={r}/slurmd.log\n"
            "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSelectType=select/cons_tres\n"
            "SelectTypeParameters=CR_CPU\nSchedulerType=sched/builtin\nJobAcctGatherType=jobacct_gather/none\n"
            f"AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=127.0.0.1\n"
            f"AccountingStoragePort={self.ports['dbd']}\nAccountingStoragePass={sock}\n"
            "AccountingStorageEnforce=associations,limits\nMpiDefault=none\nReturnToService=2\n"
            "KillWait=2\nMaxArraySize=1001\n"
            f"NodeName={self.host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory=1000 State=UNKNOWN\n"
            f"PartitionName=debug Nodes={self.host} Default=YES MaxTime=INFINITE State=UP\n")
        self._start("slurmdbd", "-D")
        self._until("slurmdbd", lambda: self._ok("sacctmgr", "-n", "show", "cluster"))
        assert self._ok("sacctmgr", "-i", "add", "cluster", "cptest")
        assert self._ok("sacctmgr", "-i", "modify", "user", "root", "set", f"MaxSubmitJobs={MAX_SUBMIT}")
        self._start("slurmctld", "-D", "-f", str(r / "slurm.conf"))
        self._start("slurmd", "-D", "-f", str(r / "slurm.conf"))
        self._until("slurmd", lambda: subprocess.run(
            ["sinfo", "-h", "-o", "%t"], env=self.env, capture_output=True, text=True).stdout.strip() == "idle")

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def cluster():
    root = Path(tempfile.mkdtemp(prefix="coreplane-slurm-"))
    root.chmod(0o755)   # munged insists every directory above its socket is searchable by all
    c = Cluster(root)
    try:
        c.start()
        yield c
    finally:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def slurm_env(cluster, monkeypatch):
    """Points the CLI's Slurm commands at the test cluster."""
    monkeypatch.setenv("SLURM_CONF", cluster.env["SLURM_CONF"])


def _sweep(spec: Path, out: Path, *extra: str):
    return run_cli("sweep", str(spec), "--out", str(out), "--executor", "slurm", "--json", *extra, timeout=240)


def test_array_bundles_runs_below_max_submit_and_classifies_timeouts(slurm_env, tmp_path):
    spec = tmp_path / "slurm.toml"
    spec.write_text("""
name = "slurm-e2e"
command = "if [ {x} = 6 ]; then sleep 30; fi; echo value {x} on $SLURM_JOB_ID"
repetitions = 2
warmups = 1
timeout = 1
[parameters]
x = { start = 1, stop = 6 }
[[metrics]]
source = "regex"
name = "value"
pattern = 'value (\\d+)'
""")
    out = tmp_path / "sweep"
    proc = _sweep(spec, out)
    assert proc.returncode == 1, proc.stderr          # the x = 6 point timed out
    doc = json.loads(proc.stdout)
    assert doc["ok"] == 10 and doc["failed"] == {"timeout": 2}, doc
    db = sqlite3.connect(out / "store.sqlite")
    (tasks, runs, state), = db.execute("SELECT tasks, runs, state FROM slurm_jobs").fetchall()
    assert tasks <= MAX_SUBMIT and runs == 6 * 3 > tasks     # bundled: many runs per array task
    assert state.startswith("COMPLETED")                     # from sacct
    executors = {e for (e,) in db.execute("SELECT executor FROM runs")}
    assert all(e.startswith("slurm:") for e in executors) and len(executors) == tasks
    values = db.execute("SELECT p.value, m.value FROM metrics m JOIN runs r USING(run_id) "
                        "JOIN point_params p ON p.point_id = r.point_id WHERE m.name = 'value'").fetchall()
    assert values and all(float(p) == v for p, v in values)
    (message,) = db.execute("SELECT message FROM runs WHERE status = 'timeout' LIMIT 1").fetchone()
    assert "1 s time-out" in message
    # --resume submits only the failed runs again
    again = json.loads(_sweep(spec, out, "--resume").stdout)
    assert again["this_invocation"]["ran"] == 2 and again["this_invocation"]["kept_from_before"] == 10


def test_a_dead_array_task_gets_its_state_from_sacct(slurm_env, tmp_path):
    spec = tmp_path / "dies.toml"
    # The run kills the array task's worker (its parent): no result file, so sacct must say what happened.
    spec.write_text('name = "dies"\ncommand = "kill -9 $PPID; sleep 5"\nrepetitions = 1\n')
    out = tmp_path / "sweep"
    proc = _sweep(spec, out)
    assert proc.returncode == 1
    db = sqlite3.connect(out / "store.sqlite")
    status, signal, message = db.execute("SELECT status, signal, message FROM runs").fetchone()
    assert (status, signal) == ("signal", 9), message
    assert "ended FAILED" in message or "ended CANCELLED" in message


def test_without_slurm_the_error_is_one_clear_line(tmp_path, monkeypatch):
    spec = tmp_path / "s.toml"
    spec.write_text('command = "true"\n')
    monkeypatch.setenv("PATH", "/nonexistent")
    proc = run_cli("sweep", str(spec), "--out", str(tmp_path / "o"), "--executor", "slurm")
    assert proc.returncode == 2
    assert proc.stderr.startswith("coreplane: error: --executor slurm: sbatch, squeue, sacct, scontrol, scancel "
                                  "not found on PATH") and proc.stderr.count("\n") == 1
