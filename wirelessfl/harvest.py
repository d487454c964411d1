"""How energy reaches the batteries: the ``devices.harvest`` part (docs/energy.md).

At every availability step (the first at t = 0; then once a round under sync, at each round's
start, and every ``devices.availability_period_s`` simulated seconds under the event protocols)
the battery asks its harvest part for the joules arriving at each device, ``harvest(step, time_s,
rng)``, and adds them, cut at the capacity. The built-ins are "none", "bernoulli", "poisson" and
"trace"; a part of one's own is ``"module:Class"`` (options in ``[devices.harvest_options]``).
Knows nothing of SimPy.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from .fields import NoOptions
from .plugins import PartError, Registry

__all__ = ["HARVESTS", "Harvest", "checked_income"]


class Harvest:
    """The contract of a ``devices.harvest`` part. Required: ``from_scenario`` and ``harvest``.

    ``harvest(step, time_s, rng)``: the joules arriving at each of the N devices at availability step
    ``step`` (0, 1, ...; step 0 at t = 0), taken at simulated time ``time_s``: an array of N
    finite numbers >= 0, or None for nothing. Draw only from ``rng`` (the run's "availability"
    stream) so that a run is reproducible and resumes exactly; anything the part remembers between
    steps goes in ``state_dict`` / ``load_state`` (the checkpoint keeps it).
    """

    Options: ClassVar[type | None] = None
    arrives: ClassVar[bool] = True
    """False only for a part under which no energy ever arrives ("none"): a run whose batteries are all
    below the threshold then stops at once, saying so."""

    @classmethod
    def from_scenario(cls, scenario, options) -> "Harvest":
        """Build the part for ``scenario`` (its [devices] table) with its options."""
        raise NotImplementedError(f"{cls.__name__}.from_scenario")

    @classmethod
    def check(cls, scenario, options) -> None:
        """Raise ConfigError if the scenario cannot run with this part."""

    def harvest(self, step: int, time_s: float, rng: np.random.Generator) -> np.ndarray | None:
        raise NotImplementedError(f"{type(self).__name__}.harvest")

    def state_dict(self) -> dict:
        """What the part remembers between steps (default: nothing)."""
        return {}

    def load_state(self, state: dict) -> None:
        """Restore what ``state_dict`` returned."""


class NoHarvest(Harvest):
    """Nothing ever arrives."""

    Options = NoOptions
    arrives = False

    @classmethod
    def from_scenario(cls, scenario, options) -> "NoHarvest":
        return cls()

    def harvest(self, step, time_s, rng):
        return None


class BernoulliHarvest(Harvest):
    """``harvest_j`` with probability ``harvest_p``, independently per device and step."""

    Options = NoOptions

    def __init__(self, num_devices: int, joules: float, p: float):
        self.num_devices, self.joules, self.p = int(num_devices), float(joules), float(p)

    @classmethod
    def from_scenario(cls, scenario, options) -> "BernoulliHarvest":
        dc = scenario.devices
        return cls(dc.count, dc.harvest_j, dc.harvest_p)

    def harvest(self, step, time_s, rng):
        return np.where(rng.random(self.num_devices) < self.p, self.joules, 0.0)


class PoissonHarvest(Harvest):
    """``harvest_j`` times a Poisson number of mean ``harvest_mean``, per device and step."""

    Options = NoOptions

    def __init__(self, num_devices: int, joules: float, mean: float):
        self.num_devices, self.joules, self.mean = int(num_devices), float(joules), float(mean)

    @classmethod
    def from_scenario(cls, scenario, options) -> "PoissonHarvest":
        dc = scenario.devices
        return cls(dc.count, dc.harvest_j, dc.harvest_mean)

    def harvest(self, step, time_s, rng):
        return rng.poisson(self.mean, self.num_devices) * self.joules


class TraceHarvest(Harvest):
    """Row ``step`` of ``harvest_trace`` (steps x devices, joules >= 0)."""

    Options = NoOptions

    def __init__(self, trace):
        self.trace = trace

    @classmethod
    def from_scenario(cls, scenario, options) -> "TraceHarvest":
        from .traces import Trace

        dc = scenario.devices
        return cls(Trace.read(dc.harvest_trace, dc.count, "devices.harvest_trace", dc.harvest_trace_end,
                              nonnegative=True))

    def harvest(self, step, time_s, rng):
        return self.trace.row(step)


def checked_income(part, income, num_devices: int, step: int) -> np.ndarray | None:
    """A harvest part's answer, checked where it enters: None, or N finite joules >= 0 (PartError,
    one line naming the part, otherwise)."""
    if income is None:
        return None
    name = f"{type(part).__name__}.harvest"
    try:
        income = np.asarray(income, dtype=float)
    except (TypeError, ValueError):
        raise PartError(f"{name}: step {step}: must return {num_devices} numbers (joules) or None, got "
                        f"{type(income).__name__}") from None
    if income.shape != (num_devices,):
        raise PartError(f"{name}: step {step}: must return one number of joules per device, shape ({num_devices},), "
                        f"got shape {income.shape}")
    if not np.isfinite(income).all() or (income < 0).any():
        bad = int(np.flatnonzero(~np.isfinite(income) | (income < 0))[0])
        raise PartError(f"{name}: step {step}: joules must be finite and >= 0; device {bad} got {float(income[bad])!r}")
    return income


HARVESTS = Registry("harvest", "wirelessfl.harvest:Harvest", {
    "none": "wirelessfl.harvest:NoHarvest",
    "bernoulli": "wirelessfl.harvest:BernoulliHarvest",
    "poisson": "wirelessfl.harvest:PoissonHarvest",
    "trace": "wirelessfl.harvest:TraceHarvest",
})
"""Built-in harvest laws by the name ``devices.harvest`` gives them."""
