"""The sweep store: one SQLite file (WAL) with points, runs and metrics in long format."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from coreplane.core.errors import CoreplaneError

FORMAT = "coreplane-sweep/1"
STORE_NAME = "store.sqlite"
# The first bytes of every SQLite database file.
SQLITE_HEADER = b"SQLite format 3\x00"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS points(
    point_id TEXT PRIMARY KEY, ordinal INTEGER NOT NULL, params TEXT NOT NULL,
    command TEXT NOT NULL, env TEXT NOT NULL, target_reps INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS point_params(
    point_id TEXT NOT NULL REFERENCES points, name TEXT NOT NULL, value,
    PRIMARY KEY(point_id, name));
CREATE TABLE IF NOT EXISTS runs(
    run_id TEXT PRIMARY KEY, point_id TEXT NOT NULL REFERENCES points, rep INTEGER NOT NULL,
    warmup INTEGER NOT NULL, status TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
    exit_code INTEGER, signal INTEGER, message TEXT, started_at REAL, wall_s REAL, timeout_s REAL,
    cpus TEXT, host TEXT, executor TEXT, pid INTEGER, pid_start INTEGER, log_dir TEXT);
CREATE INDEX IF NOT EXISTS runs_by_point ON runs(point_id, status);
CREATE TABLE IF NOT EXISTS metrics(
    run_id TEXT NOT NULL REFERENCES runs, name TEXT NOT NULL, value REAL NOT NULL,
    PRIMARY KEY(run_id, name));
CREATE TABLE IF NOT EXISTS attempts(
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, status TEXT NOT NULL, exit_code INTEGER,
    signal INTEGER, message TEXT, wall_s REAL, timeout_s REAL, finished_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS slurm_jobs(
    job_id TEXT PRIMARY KEY, submitted_at REAL NOT NULL, tasks INTEGER NOT NULL,
    runs INTEGER NOT NULL, dir TEXT NOT NULL, state TEXT NOT NULL);
"""


@dataclass
class Attempt:
    """One try of a run; a run's last attempt is its outcome."""
    status: str                      # ok | timeout | exit | signal | parse
    wall_s: float | None = None
    timeout_s: float | None = None
    exit_code: int | None = None
    signal: int | None = None
    message: str | None = None


@dataclass
class RunResult:
    """A finished run: its final status, its attempts and the metrics of its last attempt."""
    run_id: str
    point_id: str
    rep: int
    warmup: bool
    attempts: list[Attempt]
    metrics: dict[str, float] = field(default_factory=dict)
    started_at: float | None = None
    cpus: str | None = None
    host: str | None = None
    executor: str = "local"
    log_dir: str | None = None

    @property
    def final(self) -> Attempt:
        return self.attempts[-1]

    def to_json(self) -> dict:
        return {**{k: v for k, v in self.__dict__.items() if k != "attempts"},
                "attempts": [a.__dict__ for a in self.attempts]}

    @classmethod
    def from_json(cls, doc: dict) -> "RunResult":
        return cls(**{**doc, "attempts": [Attempt(**a) for a in doc["attempts"]]})


def store_path(sweep: str | Path) -> Path:
    """The store of a sweep given as its directory or as the store file itself."""
    sweep = Path(sweep)
    return sweep / STORE_NAME if sweep.is_dir() or not sweep.suffix else sweep


class Store:
    """Thread-safe access to one sweep store; every write is one transaction, so a kill -9 loses nothing committed."""

    def __init__(self, path: str | Path, create: bool = True):
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise CoreplaneError(f"{self.path}: no sweep store here (run `coreplane sweep SPEC --out DIR` first)")
        if not create:
            # SQLite takes an empty file (or another program's database) as a database of its own
            # and the schema below would be written into it: a file given by mistake to `report`
            # or `compare` must be left as it was.
            with open(self.path, "rb") as head:
                if head.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
                    raise CoreplaneError(f"{self.path}: not a coreplane sweep store (not an SQLite database)")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
            if not create and not self.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
                self.db.close()
                raise CoreplaneError(f"{self.path}: not a coreplane sweep store (no meta table)")
            self.db.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL: a committed transaction survives the death of this process (not a power cut).
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(SCHEMA)
            found = self.meta().get("format")
        except sqlite3.DatabaseError as exc:
            raise CoreplaneError(f"{self.path}: not a coreplane sweep store ({exc})") from None
        if found is None and create:
            self.set_meta(format=FORMAT)
        elif found not in (None, FORMAT):
            raise CoreplaneError(f"{self.path}: store format {found}, this coreplane reads {FORMAT}")

    def close(self) -> None:
        self.db.close()

    def _write(self, statements: list[tuple[str, tuple]] | None = None, many: list[tuple[str, list]] | None = None) -> None:
        with self._lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                for sql, args in statements or []:
                    self.db.execute(sql, args)
                for sql, rows in many or []:
                    self.db.executemany(sql, rows)
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def query(self, sql: str, args: tuple = ()) -> list[sqlite3.Row]:
        with self._lock:
            cur = self.db.execute(sql, args)
            cur.row_factory = sqlite3.Row
            return cur.fetchall()

    # --- meta -------------------------------------------------------------------------------
    def meta(self) -> dict[str, str]:
        with self._lock:
            return dict(self.db.execute("SELECT key, value FROM meta").fetchall())

    def set_meta(self, **values: object) -> None:
        self._write(many=[("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                           [(k, v if isinstance(v, str) else json.dumps(v)) for k, v in values.items()])])

    # --- points -----------------------------------------------------------------------------
    def add_points(self, points: list, repetitions: int) -> None:
        """Adds new points; a known point keeps its runs and its target only grows."""
        self._write(many=[
            ("INSERT INTO points(point_id, ordinal, params, command, env, target_reps) VALUES (?, ?, ?, ?, ?, ?) "
             "ON CONFLICT(point_id) DO UPDATE SET target_reps = max(target_reps, excluded.target_reps), "
             "ordinal = excluded.ordinal",
             [(p.point_id, p.ordinal, json.dumps(p.params), p.command, json.dumps(p.env), repetitions) for p in points]),
            ("INSERT OR IGNORE INTO point_params(point_id, name, value) VALUES (?, ?, ?)",
             [(p.point_id, k, v) for p in points for k, v in p.params.items()]),
        ])

    def raise_target(self, point_id: str, target: int) -> None:
        self._write([("UPDATE points SET target_reps = max(target_reps, ?) WHERE point_id = ?", (target, point_id))])

    def targets(self) -> dict[str, int]:
        return {r["point_id"]: r["target_reps"] for r in self.query("SELECT point_id, target_reps FROM points")}

    # --- runs -------------------------------------------------------------------------------
    def ok_runs(self) -> set[str]:
        return {r["run_id"] for r in self.query("SELECT run_id FROM runs WHERE status = 'ok'")}

    def mark_running(self, run_id: str, point_id: str, rep: int, warmup: bool, executor: str,
                     pid: int | None = None, pid_start: int | None = None, host: str | None = None,
                     cpus: str | None = None, log_dir: str | None = None) -> None:
        """Marks a run as in flight (a crash leaves it so, and `--resume` runs it again)."""
        self._write([(
            "INSERT INTO runs(run_id, point_id, rep, warmup, status, executor, pid, pid_start, host, cpus, "
            "log_dir, started_at) VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(run_id) DO UPDATE SET status = 'running', executor = excluded.executor, "
            "pid = excluded.pid, pid_start = excluded.pid_start, host = excluded.host, cpus = excluded.cpus, "
            "log_dir = excluded.log_dir, started_at = excluded.started_at",
            (run_id, point_id, rep, int(warmup), executor, pid, pid_start, host, cpus, log_dir, time.time()))])

    def mark_many_running(self, tasks: list, executor: str) -> None:
        """`mark_running` for a batch handed to another machine (one transaction)."""
        now = time.time()
        self._write(many=[(
            "INSERT INTO runs(run_id, point_id, rep, warmup, status, executor, log_dir, started_at) "
            "VALUES (?, ?, ?, ?, 'running', ?, ?, ?) ON CONFLICT(run_id) DO UPDATE SET status = 'running', "
            "executor = excluded.executor, started_at = excluded.started_at",
            [(t.run_id, t.point_id, t.rep, int(t.warmup), executor, t.log_dir, now) for t in tasks])])

    def in_flight(self) -> list[sqlite3.Row]:
        return self.query("SELECT run_id, pid, pid_start, host, executor FROM runs WHERE status = 'running'")

    def record(self, result: RunResult) -> None:
        """Stores a finished run, its metrics and its attempts in one transaction."""
        a = result.final
        prior = self.query("SELECT attempts FROM runs WHERE run_id = ?", (result.run_id,))
        before = prior[0]["attempts"] if prior else 0
        now = time.time()
        self._write(
            [("DELETE FROM metrics WHERE run_id = ?", (result.run_id,)),
             ("INSERT INTO runs(run_id, point_id, rep, warmup, status, attempts, exit_code, signal, message, "
              "started_at, wall_s, timeout_s, cpus, host, executor, log_dir) "
              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(run_id) DO UPDATE SET "
              "status = excluded.status, attempts = excluded.attempts, exit_code = excluded.exit_code, "
              "signal = excluded.signal, message = excluded.message, started_at = excluded.started_at, "
              "wall_s = excluded.wall_s, timeout_s = excluded.timeout_s, cpus = excluded.cpus, "
              "host = excluded.host, executor = excluded.executor, log_dir = excluded.log_dir, "
              "pid = NULL, pid_start = NULL",
              (result.run_id, result.point_id, result.rep, int(result.warmup), a.status,
               before + len(result.attempts), a.exit_code, a.signal, a.message, result.started_at, a.wall_s,
               a.timeout_s, result.cpus, result.host, result.executor, result.log_dir))],
            many=[("INSERT INTO metrics(run_id, name, value) VALUES (?, ?, ?)",
                   [(result.run_id, k, float(v)) for k, v in result.metrics.items()]),
                  ("INSERT INTO attempts(run_id, status, exit_code, signal, message, wall_s, timeout_s, finished_at) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                   [(result.run_id, t.status, t.exit_code, t.signal, t.message, t.wall_s, t.timeout_s, now)
                    for t in result.attempts])])

    def values(self, point_id: str, metric: str) -> list[float]:
        """The metric's values over the point's measured, successful runs."""
        return [r["value"] for r in self.query(
            "SELECT m.value FROM metrics m JOIN runs r USING(run_id) "
            "WHERE r.point_id = ? AND r.warmup = 0 AND r.status = 'ok' AND m.name = ?", (point_id, metric))]

    def completed_walls(self) -> list[tuple[str, float]]:
        """(point_id, wall_s) of every successful run: what adaptive time-outs learn from."""
        return [(r["point_id"], r["wall_s"]) for r in self.query(
            "SELECT point_id, wall_s FROM runs WHERE status = 'ok' AND wall_s IS NOT NULL")]

    # --- Slurm submissions ------------------------------------------------------------------
    def add_slurm_job(self, job_id: str, tasks: int, runs: int, directory: str) -> None:
        self._write([("INSERT OR REPLACE INTO slurm_jobs(job_id, submitted_at, tasks, runs, dir, state) "
                      "VALUES (?, ?, ?, ?, ?, 'active')", (job_id, time.time(), tasks, runs, directory))])

    def finish_slurm_job(self, job_id: str, state: str) -> None:
        self._write([("UPDATE slurm_jobs SET state = ? WHERE job_id = ?", (state, job_id))])

    def active_slurm_jobs(self) -> list[sqlite3.Row]:
        return self.query("SELECT job_id, dir FROM slurm_jobs WHERE state = 'active'")
