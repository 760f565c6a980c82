"""A client of the arbiter's socket (one JSON object per line) and a way to start and stop a
private arbiter (tests, benchmarks)."""

import json
import os
import socket
import subprocess
import time
from pathlib import Path

from coreplane.core.errors import CoreplaneError
from coreplane.core.native import binary

DEFAULT_STATE_DIR = Path("/run/coreplane")
SOCKET_NAME = "arbiter.sock"
SOCKET_VARIABLE = "COREPLANE_ARBITER_SOCKET"


def socket_path(state_dir: Path = DEFAULT_STATE_DIR) -> Path:
    return Path(state_dir) / SOCKET_NAME


class Client:
    """One connection to the arbiter; `call` sends a request and returns its reply."""

    def __init__(self, path: Path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.connect(str(path))
        except OSError as exc:
            self.sock.close()
            raise CoreplaneError(f"{path}: cannot reach the arbiter: {exc.strerror}") from None
        self.reader = self.sock.makefile("rb")

    def send_raw(self, data: bytes) -> dict:
        """Sends bytes as they are and reads one reply line (malformed-input tests use this)."""
        self.sock.sendall(data)
        line = self.reader.readline()
        if not line:
            raise CoreplaneError("the arbiter closed the connection")
        return json.loads(line)

    def call(self, op: str, **fields) -> dict:
        return self.send_raw((json.dumps({"op": op, **fields}) + "\n").encode())

    def checked(self, op: str, **fields) -> dict:
        """`call`, with a refusal raised as a one-line error."""
        reply = self.call(op, **fields)
        if not reply.get("ok"):
            raise CoreplaneError(f"arbiter: {reply.get('error')}")
        return reply

    def close(self) -> None:
        self.reader.close()
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Daemon:
    """A coreplane-arbiter started from here: `argv` are its options (see `coreplane arbiter`).
    As a context manager it is stopped (SIGTERM) on exit; `detach` leaves it running on its own
    (its own session, no pipes), as `coreplane arbiter --daemon` does."""

    def __init__(self, state_dir: Path, options: list[str] = (), cgroup_name: str | None = None):
        self.socket = socket_path(state_dir)
        self.argv = [str(binary("coreplane-arbiter")), "--state-dir", str(state_dir), *options]
        self.argv += ["--cgroup-name", cgroup_name] if cgroup_name else []
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 5.0, detach: bool = False) -> "Daemon":
        """Starts it and returns once its socket answers; its last words become the error if it
        exits. Detached, it writes them to arbiter.log beside its socket (a pipe nobody reads
        would block it, or kill it once closed)."""
        try:
            Client(self.socket).close()
        except CoreplaneError:
            pass  # nobody answers there: ours will
        else:
            raise CoreplaneError(f"{self.socket}: an arbiter already answers there (coreplane arbiter status)")
        if detach:
            self.socket.parent.mkdir(parents=True, exist_ok=True)
            log = open(self.socket.parent / "arbiter.log", "w+")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL if detach else None,
                                     stdout=subprocess.DEVNULL if detach else None,
                                     stderr=log if detach else subprocess.PIPE, text=True, start_new_session=detach)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                if detach:
                    log.seek(0)
                said = (log.read() if detach else self.proc.stderr.read()).strip()
                raise CoreplaneError(said.splitlines()[-1] if said else f"coreplane-arbiter exited {self.proc.returncode}")
            if self.socket.exists():
                try:
                    Client(self.socket).close()
                    return self
                except CoreplaneError:
                    pass
            time.sleep(0.01)
        self.stop()
        raise CoreplaneError(f"coreplane-arbiter did not come up within {timeout:g} s")

    def client(self) -> Client:
        return Client(self.socket)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def env_for(state_dir: Path) -> dict:
    """The environment a program needs to find this arbiter through the vcore library."""
    return {**os.environ, SOCKET_VARIABLE: str(socket_path(state_dir))}
