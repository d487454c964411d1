"""The scheduler seam: what a scheduler sees each round (or, under the event protocols, whenever a
device may be started), what it decides, and its protocol. What it decides and what devices report
(Decision, Traffic, ReportRequest, Reports) live in ``wirelessfl.decisions``, which the learning side
imports too; they are re-exported here."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from ..capabilities import absent, provides
from ..fields import ConfigError
from ..decisions import NO_TRAFFIC, Decision, ReportRequest, Reports, Traffic  # noqa: F401  (re-exported)


@dataclass(frozen=True)
class RoundState:
    """The server's view at the start of a round: no tensors, only channel and link facts.

    round: the round's index (0, 1, ...). time_s: the simulated clock at its start.
    gains: |h_n|^2 for every device this round, shape (N,).
    model_bits: size of one model upload in bits (32 d, times the vectors the algorithm uploads).
    bandwidth_hz, noise_power: the uplink's B and N0.
    available: boolean mask of devices that may be scheduled (None: all of them).
    rng: the engine's "selection" stream, for schedulers that draw at random themselves.
    access: the access scheme (wirelessfl.access.AccessScheme), for schedulers that price airtime
        (``access.pricing``) or need the power a device really sends at
        (``wirelessfl.access.transmit_power(access, ...)``);
        None: one transmitter on the whole band B.
    """

    round: int
    gains: np.ndarray
    model_bits: float
    bandwidth_hz: float
    noise_power: float
    available: np.ndarray | None = None
    rng: np.random.Generator | None = None
    time_s: float = 0.0
    access: Any = None


@dataclass(slots=True)
class DispatchState:
    """The server's view when devices may be started under an event protocol (fedbuff, fedasync):
    ``slots`` devices are wanted. No tensors, no SimPy. The engine keeps one and brings it up to date
    before each call (a dispatch happens for every upload): read it during ``dispatch``, do not keep
    it or change its arrays.

    time_s: the simulated clock. version: the server's model version (aggregations so far).
    busy: (N,) devices in flight (they cannot be started again); num_busy: how many. waiting: (N,) how
        many of each device's updates arrived and wait to be applied (in fedbuff's buffer: a device
        started again now may be applied twice in one aggregation; None: not given). available: (N,)
        mask of devices that may be scheduled (None: all). last_applied: (N,) the version each device's last applied
        update produced (0: never), so version - last_applied is how many aggregations the model
        has gone without its data (its age).
    mean_gains: (N,) E|h_n|^2, what the server knows of each channel ahead of a transmission whose
        fading is drawn when it starts. model_bits, bandwidth_hz, noise_power: the uplink.
    per_aggregation: updates per aggregation (fedbuff's K, fedasync's 1): a device's expected
        uploads per aggregation are per_aggregation / N_available.
    interval_s: mean time between aggregations so far (NaN before the second aggregation).
    rng: the run's "selection" stream.
    access: the access scheme, as in RoundState.
    """

    time_s: float
    version: int
    slots: int
    busy: np.ndarray
    num_busy: int
    available: np.ndarray | None
    last_applied: np.ndarray
    mean_gains: np.ndarray
    model_bits: float
    bandwidth_hz: float
    noise_power: float
    per_aggregation: float
    interval_s: float
    rng: np.random.Generator
    access: Any = None
    waiting: np.ndarray | None = None


@dataclass(slots=True)
class Dispatch:
    """Devices to start now (distinct, not busy, available) and the power each will transmit at;
    info: numbers worth recording (the latest dispatch's become columns of rounds.csv); frequency:
    the CPU frequency (Hz) each computes at (None: its computation model's own; a scheduler that
    returns one is :class:`ChoosesFrequency`, with a computation model that is FrequencyScaled)."""

    devices: np.ndarray
    power: np.ndarray
    info: dict = field(default_factory=dict)
    frequency: np.ndarray | None = None


class Scheduler(Protocol):
    """A scheduler: which devices transmit in a round and at what power. No torch, no SimPy.

    Required: ``from_scenario`` and ``decide``. Everything else is optional: subclass this protocol
    to inherit the defaults below (no options, no state, no probe, no queues, no dispatch rule).
    Capabilities (wirelessfl.capabilities): :class:`Dispatches` (a dispatch rule, for fedbuff and
    fedasync), :class:`Probes` (reports asked for before deciding) and :class:`ChoosesFrequency`
    (a CPU frequency per device in its decisions).
    """

    Options: ClassVar[type | None] = None
    """A dataclass of the scheduler's own options (validated with the scenario), or None: the
    options table is handed over as a dict."""
    inclusion_probabilities: ClassVar[bool] = True
    """False when Decision.q is nominal (the scheduler picks its devices itself, e.g. fair
    selection): algorithms that weigh updates by 1 / q then refuse it, FedAvg averages instead."""
    fairness_metrics: ClassVar[bool] = False
    """True: runs with this scheduler record per-device accuracies by default."""

    @classmethod
    def from_scenario(cls, scenario, options) -> "Scheduler":
        """Build the scheduler for a run of ``scenario`` with its options (Options instance or dict)."""
        ...

    def decide(self, state: RoundState) -> Decision:
        """The round's decision."""
        ...

    @classmethod
    def check(cls, scenario, options) -> None:
        """Raise wirelessfl.config.ConfigError if the scenario cannot run with this scheduler."""

    @absent
    def probe(self, state: RoundState) -> ReportRequest | None:
        """Reports wanted before ``decide`` (training runs deliver them to ``receive``); None: none.
        Their uplink cost is the decision's ``pre_upload_bits``."""
        return None

    def receive(self, reports: Reports) -> None:
        """Reports asked for by ``probe`` or ``Decision.traffic.report_with_upload``."""

    @absent
    def dispatch(self, state: DispatchState) -> Dispatch:
        """Under the event protocols (fedbuff, fedasync): which idle, available device(s) to start
        now, at most ``state.slots`` of them, and their transmit powers. A scheduler without this
        rule runs under sync and semi_sync only."""
        raise NotImplementedError(f"{type(self).__name__} has no dispatch rule")

    @classmethod
    @absent
    def chooses_frequency(cls, options) -> bool:
        """Whether runs with these options return Decision.frequency (a CPU frequency per device,
        for a computation model that is FrequencyScaled). Default: never."""
        return False

    def skip_round(self, state: RoundState, drain: bool) -> np.ndarray | None:
        """A round that does not consult the scheduler (a server round). Returns the virtual queues
        to record (None: no queues); ``drain``: count it as a slot of zero consumption."""
        return None

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue after a checkpoint (numbers, strings, lists, numpy arrays)."""
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""


def inclusion_probability(omega: np.ndarray, m: int) -> np.ndarray:
    """q_n = 1 - (1 - omega_n)^m, computed without cancellation for tiny omega."""
    # omega_n = 1 gives log1p(-1) = -inf and q_n = 1 exactly: not an error.
    with np.errstate(divide="ignore"):
        return -np.expm1(m * np.log1p(-np.clip(omega, 0.0, 1.0)))


def draw_devices(omega: np.ndarray, m: int, rng: np.random.Generator, replace: bool = True) -> np.ndarray:
    """m draws with replacement from omega; return the sorted distinct devices
    (docs/papers/lyapunov.md, "Sampling with replacement").

    ``replace=False``: min(m, devices with omega > 0) distinct devices without replacement (SAFARI's
    client sampling, docs/papers/safari.md, "Algorithm 1: client rounds and server rounds"; meant for
    a uniform omega). An all-zero omega (no device available this round) draws nothing and consumes
    no randomness.
    """
    total = omega.sum()
    if not total > 0:
        return np.empty(0, dtype=np.int64)
    if not replace:
        support = int(np.count_nonzero(omega))
        return np.sort(rng.choice(omega.size, size=min(m, support), replace=False, p=omega / total))
    if (omega < 0).any():
        raise ValueError("draw_devices: omega has negative entries")
    # Generator.choice(size=m, replace=True, p=...) without its argument checks (three times its
    # cost here): the same cdf and the same uniforms, so the same draws
    cdf = (omega / total).cumsum()
    cdf /= cdf[-1]
    draws = cdf.searchsorted(rng.random(m), side="right")
    return np.array(sorted(set(draws.tolist())), dtype=np.int64)


@runtime_checkable
class Dispatches(Protocol):
    """A scheduler with a dispatch rule: it starts devices one free slot at a time (fedbuff, fedasync)."""

    def dispatch(self, state: DispatchState) -> Dispatch:
        """Which idle, available device(s) to start now, and their powers (see Scheduler)."""


@runtime_checkable
class DispatchesOne(Protocol):
    """A dispatch rule with a shortcut for its usual call under fedbuff and fedasync: one slot freed.
    The engine asks it first whenever slots are wanted and calls ``dispatch`` only when it answers
    None, so the two must agree: the same device and power from the same state and random stream.
    A subclass that overrides ``dispatch`` alone is not shortcut: the engine takes ``dispatch_one``
    only from the class that defines ``dispatch`` or from one below it."""

    def dispatch_one(self, state: DispatchState) -> tuple[int, float, dict] | None:
        """(device, power, info) where ``dispatch(state)`` would start exactly one device, without
        building arrays for it; None: call ``dispatch`` (before drawing anything from ``state.rng``)."""


@runtime_checkable
class Probes(Protocol):
    """A scheduler that asks devices for reports before it decides (fair selection's losses and
    gradients)."""

    def probe(self, state: RoundState) -> ReportRequest | None:
        """Reports wanted before ``decide`` (see Scheduler)."""

    def receive(self, reports: Reports) -> None:
        """The reports asked for (see Scheduler)."""


@runtime_checkable
class ChoosesFrequency(Protocol):
    """A scheduler whose decisions may carry a CPU frequency per device (Decision.frequency), used for
    the selected devices' computation time and energy when the computation model is
    :class:`wirelessfl.devices.FrequencyScaled` (docs/energy.md, "CPU frequency")."""

    @classmethod
    def chooses_frequency(cls, options) -> bool:
        """Whether runs with these options return a frequency (see Scheduler)."""


def chooses_frequency(scenario) -> bool:
    """Whether the scenario's scheduler, with its options, chooses CPU frequencies."""
    part = scenario.part("scheduler")
    return provides(part, ChoosesFrequency) and bool(part.chooses_frequency(scenario.options("scheduler")))


def check_frequency_choice(scenario) -> None:
    """ConfigError (one line) when the scheduler chooses frequencies and the computation model cannot take them."""
    from ..devices import FrequencyScaled

    if chooses_frequency(scenario) and not provides(scenario.part("compute"), FrequencyScaled):
        raise ConfigError(f"scheduler.name = {scenario.scheduler.name!r} chooses CPU frequencies, which "
                          f"devices.compute = {scenario.devices.compute!r} cannot run at; use devices.compute = 'cpu' "
                          "(with f_min_hz and f_max_hz), or turn the scheduler's frequency choice off")


def has_dispatch(cls: type) -> bool:
    """Whether a scheduler (or its class) has a dispatch rule of its own (:class:`Dispatches`)."""
    return provides(cls, Dispatches)
