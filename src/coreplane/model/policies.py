"""Delegation policies: which calls b(s) = 1 delegates (eq. 6) — by frequency, at random, listed, or a preset."""

import json
import math
import random
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from coreplane.core import vocabulary as v
from coreplane.core.errors import CoreplaneError

PRESETS_FILE = Path(__file__).with_name("presets.json")
SYSCALL_HEADER = Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")

# Policies that pick a share of the profile's calls (paper 002 Fig. 4a–c).
BY_SHARE = ("min-frequency", "max-frequency", "random")
NAMED = ("all", "none", *BY_SHARE)


@cache
def presets() -> dict:
    """The presets file shared with the Rust runtime (docs/formats.md#delegation-presets)."""
    return json.loads(PRESETS_FILE.read_text())


def always_local() -> frozenset[str]:
    """Calls bound to the calling thread: never delegated, whatever the policy."""
    return frozenset(presets()["always_local"])


@cache
def known_syscalls() -> frozenset[str]:
    """x86-64 syscall names, from the kernel's UAPI header (Debian package linux-libc-dev)."""
    try:
        text = SYSCALL_HEADER.read_text()
    except OSError:
        raise CoreplaneError(f"{SYSCALL_HEADER}: missing; install linux-libc-dev to check syscall names") from None
    return frozenset(re.findall(r"#define __NR_(\w+) \d+", text))


@dataclass(frozen=True)
class Policy:
    """A delegation policy. `kind` is all, none, min-frequency, max-frequency, random, explicit or a
    preset name; `share` (0–1) and `seed` apply to the share policies, `names` to explicit lists."""

    kind: str
    share: float = 0.9
    seed: int = 0
    names: frozenset[str] = frozenset()

    def __post_init__(self):
        if not 0.0 <= self.share <= 1.0:
            raise CoreplaneError(f"--share {self.share}: must be between 0 and 1")

    def describe(self) -> str:
        if self.kind in BY_SHARE:
            seed = f", seed {self.seed}" if self.kind == "random" else ""
            return f"{self.kind} at share {self.share:.0%}{seed}"
        if self.kind == "explicit":
            return f"explicit ({', '.join(sorted(self.names))})"
        return self.kind

    def delegated(self, counts: dict[str, int], not_intercepted: frozenset[str] = frozenset()) -> frozenset[str]:
        """The delegated set among the calls in `counts` (name -> n(s)); calls that must stay local
        or that the runtime does not intercept are never in it."""
        candidates = sorted(set(counts) - always_local() - not_intercepted)
        if self.kind == "none":
            return frozenset()
        if self.kind == "all":
            return frozenset(candidates)
        if self.kind == "explicit":
            return frozenset(c for c in candidates if c in self.names)
        if self.kind in presets()["presets"]:
            local = set(presets()["presets"][self.kind]["local"])
            return frozenset(c for c in candidates if c not in local)
        k = math.floor(self.share * len(candidates) + 0.5)
        if self.kind == "random":
            return frozenset(random.Random(self.seed).sample(candidates, k))
        # Ties in n(s) are broken by name so that a policy always picks the same set.
        reverse = self.kind == "max-frequency"
        ranked = sorted(candidates, key=lambda c: (-counts[c] if reverse else counts[c], c))
        return frozenset(ranked[:k])


def parse(text: str, share: float = 0.9, seed: int = 0) -> Policy:
    """Parses the CLI form: all | none | min-frequency | max-frequency | random | mckernel | mos |
    NAME,NAME,... (explicit delegated list) | @FILE (one name per line, # comments)."""
    text = text.strip()
    if text in NAMED or text in presets()["presets"]:
        return Policy(text, share=share, seed=seed)
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise CoreplaneError(f"{v.DELEGATE} {text}: cannot read {path}: {exc.strerror}") from None
        names = {}
        for lineno, line in enumerate(lines, 1):
            name = line.split("#", 1)[0].strip()
            if name:
                names[name] = f"{path}:{lineno}"
    else:
        names = {n.strip(): f"{v.DELEGATE} {text}" for n in text.split(",") if n.strip()}
    if not names:
        raise CoreplaneError(f"{v.DELEGATE} {text!r}: no syscall names given")
    for name, where in names.items():
        if name not in known_syscalls():
            hint = f" (policies: {', '.join((*NAMED, *presets()['presets']))})" if "," not in text else ""
            raise CoreplaneError(f"{where}: {name!r} is not an x86-64 syscall name{hint}")
    return Policy("explicit", share=share, seed=seed, names=frozenset(names))
