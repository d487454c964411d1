"""Checks on what a plug-in part hands the engines: a scheduler's Decision and a channel's gains.

A violation is one line naming the part, the field and the round (``PartError``), where it would
otherwise surface far away: NaN airtimes, a device charged energy it could not spend, an IndexError
naming nothing. The built-in parts are pinned by their own tests and skip the checks, so the usual
run pays nothing for them.
"""
from __future__ import annotations

import numpy as np

from ...plugins import PartError  # a part outside its contract (defined with the parts: learning raises it too)

__all__ = ["PartChecks", "PartError", "check_decision", "check_gains", "is_plugin", "part_name"]


def is_plugin(part) -> bool:
    """Whether ``part`` is the user's (its class is not defined in this package)."""
    return not type(part).__module__.startswith("wirelessfl.")


def part_name(kind: str, part) -> str:
    """How a message names a part: its kind and its class by import path."""
    return f"{kind} {type(part).__module__}:{type(part).__qualname__}"


def check_gains(gains, n: int, where: str) -> np.ndarray:
    """``gains`` as a float array of shape (n,), every entry finite and > 0."""
    g = np.asarray(gains, dtype=float)
    if g.shape != (n,):
        raise PartError(f"{where}: returned gains of shape {g.shape}; need one per device, ({n},)")
    bad = np.flatnonzero(~(np.isfinite(g) & (g > 0)))
    if bad.size:
        raise PartError(f"{where}: gains[{bad[0]}] = {float(g[bad[0]])!r}: must be finite and > 0")
    return g


def check_decision(decision, n: int, available: np.ndarray | None, where: str) -> None:
    """A Decision's arrays have one finite, non-negative entry per device; omega sums to 1 (or is all
    zero); q is at most 1; the devices it selects itself are distinct, in range and available; and no
    unavailable device has a chance of being drawn."""
    arrays = {}
    for name in ("omega", "q", "power", "queue"):
        if name == "queue" and decision.queue is None:  # a scheduler that keeps no queues
            continue
        a = np.asarray(getattr(decision, name), dtype=float)
        if a.shape != (n,):
            raise PartError(f"{where}: Decision.{name} has shape {a.shape}; need one entry per device, ({n},)")
        bad = np.flatnonzero(~(np.isfinite(a) & (a >= 0)))
        if bad.size:
            raise PartError(f"{where}: Decision.{name}[{bad[0]}] = {float(a[bad[0]])!r}: must be finite and >= 0")
        arrays[name] = a
    if decision.frequency is not None:
        f = np.asarray(decision.frequency, dtype=float)
        if f.shape != (n,):
            raise PartError(f"{where}: Decision.frequency has shape {f.shape}; need one entry per device, ({n},)")
        bad = np.flatnonzero(~(np.isfinite(f) & (f > 0)))
        if bad.size:
            raise PartError(f"{where}: Decision.frequency[{bad[0]}] = {float(f[bad[0]])!r}: must be finite and > 0")
    total = float(arrays["omega"].sum())
    if total != 0.0 and abs(total - 1.0) > 1e-6:
        raise PartError(f"{where}: Decision.omega sums to {total!r}: must sum to 1 (or be all zero: nobody)")
    if (arrays["q"] > 1 + 1e-9).any():
        i = int(np.argmax(arrays["q"]))
        raise PartError(f"{where}: Decision.q[{i}] = {float(arrays['q'][i])!r}: a probability, at most 1")
    if int(decision.m) != decision.m or decision.m < 0:
        raise PartError(f"{where}: Decision.m = {decision.m!r}: must be an integer >= 0")
    if available is not None and (arrays["omega"][~available] > 0).any():
        i = int(np.flatnonzero((arrays["omega"] > 0) & ~available)[0])
        raise PartError(f"{where}: Decision.omega[{i}] > 0 for device {i}, which is not available this round")
    if decision.selected is not None:
        chosen = np.asarray(decision.selected)
        if chosen.ndim != 1 or (chosen.size and not np.issubdtype(chosen.dtype, np.integer)):
            raise PartError(f"{where}: Decision.selected must be a list of device indices, got {chosen!r}")
        out = chosen[(chosen < 0) | (chosen >= n)]
        if out.size:
            raise PartError(f"{where}: Decision.selected holds device {out[0]}: devices are 0..{n - 1}")
        if np.unique(chosen).size != chosen.size:
            raise PartError(f"{where}: Decision.selected names a device twice: {chosen.tolist()}")
        if available is not None and chosen.size and not available[chosen].all():
            i = int(chosen[~available[chosen]][0])
            raise PartError(f"{where}: Decision.selected holds device {i}, which is not available this round")


class PartChecks:
    """The checks a run applies to its parts: the user's scheduler and channel are checked every
    round (or upload); the built-ins are not."""

    def __init__(self, parts):
        channel = getattr(parts.channel, "fading", parts.channel)  # path loss wraps the user's fading
        self.channel = part_name("channel", channel) if is_plugin(channel) else None
        self.scheduler = part_name("scheduler", parts.scheduler) if is_plugin(parts.scheduler) else None
        self.n = int(parts.num_devices)

    def gains(self, gains, when: str):
        """A round's gains (checked when the channel is the user's)."""
        return gains if self.channel is None else check_gains(gains, self.n, f"{self.channel}, {when}")

    def gain(self, gain: float, device: int, when: str) -> float:
        """One upload's gain (checked when the channel is the user's)."""
        if self.channel is not None and not (0 < gain < float("inf")):
            raise PartError(f"{self.channel}, {when}: the gain of device {device} is {gain!r}: must be finite and > 0")
        return gain

    def decision(self, decision, available, when: str) -> None:
        """A round's Decision (checked when the scheduler is the user's)."""
        if self.scheduler is not None:
            check_decision(decision, self.n, available, f"{self.scheduler}, {when}")

    def dispatch_power(self, power: float, device: int, when: str) -> None:
        """A dispatched device's power (checked when the scheduler is the user's)."""
        if self.scheduler is not None and not (0 <= power < float("inf")):
            raise PartError(f"{self.scheduler}, {when}: Dispatch.power of device {device} is {power!r}: must be "
                            "finite and >= 0")
