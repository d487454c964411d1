"""What a scheduler sees each round and what it decides."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class RoundState:
    """The server's view at the start of a round: no tensors, only channel and link facts.

    gains: |h_n|^2 for every device this round, shape (N,).
    model_bits: size of one model upload in bits (32 d).
    available: boolean mask of devices that may be scheduled (None: all of them).
    rng: the engine's "selection" stream, for schedulers that choose the devices themselves.
    """

    round: int
    gains: np.ndarray
    model_bits: float
    bandwidth_hz: float
    noise_power: float
    available: np.ndarray | None = None
    rng: np.random.Generator | None = None


@dataclass(frozen=True)
class Decision:
    """A scheduler's decision for one round.

    omega: per-draw probabilities of the m multinomial draws, shape (N,), sums to 1.
    q: marginal inclusion probabilities 1 - (1 - omega)^m, in (0, 1] (used for unbiased weights).
    power: transmit power of each device if selected (linear, same unit as noise_power).
    queue: the virtual queues Z_n the decision was made with (zeros for schedulers without queues).
    m: number of draws with replacement.
    info: solver facts worth recording (method, objective, ...).
    selected: the devices chosen by the scheduler itself (distinct, ascending); the engine then uses
        them instead of drawing m devices from omega. None: the engine draws.
    pre_upload_bits: (N,) bits each device sends after the round's broadcast and before the
        computation starts (bootstrap gradients, loss scalars), through the same uplink; None: nothing.
    piggyback_bits: (N,) bits a selected device adds to its model upload (a refreshed gradient and
        loss); None: nothing.
    replace: True (default): m draws with replacement from omega, the distinct devices take part;
        False: min(m, devices with omega > 0) distinct devices drawn without replacement (only for a
        uniform omega, where q_n = m / N_available; the SAFARI paper's client sampling).
    """

    omega: np.ndarray
    q: np.ndarray
    power: np.ndarray
    queue: np.ndarray
    m: int
    info: dict = field(default_factory=dict)
    selected: np.ndarray | None = None
    pre_upload_bits: np.ndarray | None = None
    piggyback_bits: np.ndarray | None = None
    replace: bool = True


def inclusion_probability(omega: np.ndarray, m: int) -> np.ndarray:
    """q_n = 1 - (1 - omega_n)^m, computed without cancellation for tiny omega."""
    # omega_n = 1 gives log1p(-1) = -inf and q_n = 1 exactly: not an error.
    with np.errstate(divide="ignore"):
        return -np.expm1(m * np.log1p(-np.clip(omega, 0.0, 1.0)))


def draw_devices(omega: np.ndarray, m: int, rng: np.random.Generator, replace: bool = True) -> np.ndarray:
    """m draws with replacement from omega; return the sorted distinct devices (spec 002, sec. 3).

    ``replace=False``: min(m, devices with omega > 0) distinct devices without replacement
    (spec 003 Algorithm 1 line 4, meant for a uniform omega). An all-zero omega (no device
    available this round) draws nothing and consumes no randomness.
    """
    total = omega.sum()
    if not total > 0:
        return np.empty(0, dtype=np.int64)
    if not replace:
        support = int(np.count_nonzero(omega))
        return np.sort(rng.choice(omega.size, size=min(m, support), replace=False, p=omega / total))
    draws = rng.choice(omega.size, size=m, replace=True, p=omega / total)
    return np.unique(draws)
