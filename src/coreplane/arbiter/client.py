"""A client of the arbiter's socket (one JSON object per line) and a way to start and stop a
private arbiter (tests, benchmarks)."""

import json
import os
import socket
import subprocess
import time
from pathlib import Path

from coreplane.core import binaries
from coreplane.core.errors import CoreplaneError

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
    """A coreplane-arbiter of our own, in `state_dir`, stopped (SIGTERM) on exit."""

    def __init__(self, state_dir: Path, cgroup_name: str, extra: list[str] = ()):
        exe = binaries.locate("coreplane-arbiter")
        if exe is None:
            raise CoreplaneError("coreplane-arbiter is not built (cargo build --release --workspace)")
        self.socket = socket_path(state_dir)
        self.argv = [exe, "--state-dir", str(state_dir), "--cgroup-name", cgroup_name, *extra]
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 5.0) -> "Daemon":
        self.proc = subprocess.Popen(self.argv, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise CoreplaneError(f"coreplane-arbiter exited: {self.proc.stderr.read().strip()}")
            if self.socket.exists():
                try:
                    Client(self.socket).close()
                    return self
                except CoreplaneError:
                    pass
            time.sleep(0.01)
        raise CoreplaneError("coreplane-arbiter did not come up")

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
