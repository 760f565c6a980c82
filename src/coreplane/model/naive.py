"""The naive model (paper 002 eq. 1–3): every call delegated for free, computation sped up by γ."""

from dataclasses import asdict, dataclass

import numpy as np

from coreplane.profile.records import Profile


def naive_speedup(p, gamma):
    """Eq. 3: S_n = (p + (1 − p)/γ)^−1, for scalars or numpy arrays (p the system share, γ the gain)."""
    return 1.0 / (np.asarray(p, dtype=float) + (1.0 - np.asarray(p, dtype=float)) / np.asarray(gamma, dtype=float))


@dataclass
class NaiveResult:
    """S_n for one profile and γ, and the run time it projects (measured wall time ÷ S_n)."""

    p: float
    gamma: float
    speedup: float
    time_ns: float

    def to_dict(self) -> dict:
        return asdict(self)


def naive(profile: Profile, gamma: float) -> NaiveResult:
    """Eq. 3 applied to a profile, with p = Profile.system_share()."""
    p = profile.system_share()
    s = float(naive_speedup(p, gamma))
    return NaiveResult(p=p, gamma=gamma, speedup=s, time_ns=profile.wall_ns / s)
