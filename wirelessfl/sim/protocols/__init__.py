"""Round protocols: when the server aggregates. A part, named by ``protocol.name``, like the scheduler.

- ``sync`` (the default): rounds in closed form (wirelessfl.sim.sync.engine). Every selected device starts
  at the round's start; the round ends when every upload is in, or at ``run.round_deadline_s``.
- ``semi_sync``: rounds on the event engine. The scheduler decides as under sync and the devices it
  draws (m draws, the distinct ones) are dispatched; the server aggregates as soon as ``first_k`` of
  their uploads are in (default all), or at the deadline. Uploads still under way are not thrown
  away: with ``late = "carry"`` they go on contending for the uplink and are applied in a later
  aggregation with their staleness; ``late = "drop"`` stops them.
- ``fedbuff`` (Nguyen et al. 2022): at most ``concurrency`` devices train at any time; each finished
  device uploads over the shared uplink; after ``buffer`` (K) updates the server applies
  ``server_lr x (1 / K) sum_i s(tau_i) delta_i``; every slot that frees starts a device the
  scheduler's ``dispatch`` rule picks.
- ``fedasync`` (Xie et al. 2019): every arrival is mixed in at once,
  x <- (1 - a) x + a y with a = alpha s(tau) and y the device's model.

Staleness tau of an update = the server version it is applied to minus the version it started
from (versions count aggregations from 0). The staleness function s is shared, a part named by
``protocol.staleness`` (wirelessfl.sim.protocols.staleness): ``constant`` (1), ``polynomial`` ((1 + tau)^-a:
FedBuff's 1 / sqrt(1 + tau) at a = 1/2), ``hinge`` (1 for tau <= b, else 1 / (a (tau - b) + 1)), an
installed plugin's name or an import path. Updates staler than ``max_staleness`` are dropped
(outcome "stale").

A protocol of your own fits :class:`RoundProtocol`: the event engine (wirelessfl.sim.events.engine)
calls ``start`` once, ``on_arrival`` for every update that reaches the server, ``on_lost`` for one
whose device went offline, ``on_timer`` for a timer it armed, and ``on_round`` when a round it
began has dispatched its devices; it acts through the engine's methods (``dispatch``, ``apply``,
``discard``, ``timer``, ``begin_round``, ``end_round``; see docs/extending.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Sequence

import numpy as np

from ...fields import ConfigError, NoOptions, option
from ...outcomes import Outcome
from ...plugins import Registry
from .staleness import STALENESS, Staleness

__all__ = ["FedAsync", "FedBuff", "PROTOCOLS", "RoundProtocol", "STALENESS", "SemiSync", "Sync", "staleness_weight"]


def staleness_weight(name: str, staleness, a: float, b: float) -> np.ndarray:
    """s(tau) of each staleness, by the staleness function ``name`` (a built-in, an installed plugin's
    name or an import path: wirelessfl.sim.protocols.staleness) with parameters a and b."""
    return STALENESS.load(name).from_options(a, b)(np.asarray(staleness, dtype=float))


class RoundProtocol(Protocol):
    """When the server aggregates. Required: ``from_scenario``; an event protocol also overrides
    ``start``, ``on_arrival`` and ``on_lost``: its core, four methods in all (subclass this protocol to
    inherit the rest: ``state_dict`` and ``load_state`` for one that holds updates between events,
    ``on_round`` and ``on_timer`` for a round-based one).

    Class attributes: ``event_driven`` (False only for the closed-form sync rounds), ``round_based``
    (the scheduler decides per round, through ``begin_round``; otherwise devices are started one
    free slot at a time through the scheduler's ``dispatch``), ``per_aggregation`` (updates an
    aggregation applies, as the dispatch rule's power budget assumes and as many as an over-the-air
    uplink gathers into one joint transmission: wirelessfl.access.aircomp.JointUplink).
    """

    Options: ClassVar[type | None] = None
    """A dataclass of the protocol's own options, or None (options handed over as a dict)."""
    event_driven: ClassVar[bool] = True
    round_based: ClassVar[bool] = False
    per_aggregation: float = 1.0
    keeps_start_model: ClassVar[bool] = False
    """True: each update keeps the model it started from, for an application that mixes toward the
    device's model (``server.apply(..., mix=True)``, FedAsync)."""

    @classmethod
    def from_scenario(cls, scenario, options) -> "RoundProtocol":
        """Build the protocol for a run of ``scenario`` with its options."""
        ...

    @classmethod
    def check(cls, scenario, options) -> None:
        """Raise ConfigError if the scenario cannot run with this protocol."""

    @classmethod
    def stale_updates(cls, options) -> bool:
        """Whether runs apply updates computed from an older model (the algorithm must then be
        able to: wirelessfl.learning.algorithms.AppliesStaleUpdates)."""
        return cls.event_driven and not cls.round_based

    def start(self, server) -> None:
        """The run begins (not called again when it resumes from a checkpoint)."""

    def on_arrival(self, server, update) -> None:
        """``update`` reached the server (``update.device``, ``.version``: the version it started
        from, ``.round``); apply it (``server.apply``), keep it, or drop it (``server.discard``)."""

    def on_lost(self, server, update) -> None:
        """``update``'s device went offline before its upload was in (recorded already)."""

    def on_timer(self, server, name: str) -> None:
        """A timer armed with ``server.timer(name, at)`` fired."""

    def on_round(self, server, round_) -> None:
        """A round begun with ``server.begin_round()`` dispatched its devices (``round_.updates``)."""

    def state_dict(self) -> dict[str, Any]:
        """What the protocol holds between events (updates may appear in it: the engine stores
        them), for checkpoints."""
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""


def _require_stale_updates(scenario, name: str) -> None:
    """ConfigError unless the scenario's algorithm can apply updates computed from older models."""
    from ...learning.algorithms import can_apply_stale_updates

    if not can_apply_stale_updates(scenario.part("algorithm")):
        raise ConfigError(f"learning.algorithm = {scenario.learning.algorithm!r}: cannot apply updates computed "
                          f"from an older model, which protocol.name = {name!r} does; use fedavg (or another "
                          "algorithm that implements local_updates and apply_updates), or protocol.name = 'sync'")


def _require_dispatch(scenario, name: str) -> None:
    from ...scheduling.base import has_dispatch

    if not has_dispatch(scenario.part("scheduler")):
        raise ConfigError(f"scheduler.name = {scenario.scheduler.name!r}: has no dispatch rule, which "
                          f"protocol.name = {name!r} needs to start a device whenever a slot frees; use 'uniform' or "
                          "'lyapunov', or protocol.name = 'sync' or 'semi_sync'")


def _no_rounds(scenario, name: str) -> None:
    """The dispatch protocols have no rounds: a round deadline would be ignored, so it is refused."""
    if scenario.run.round_deadline_s is not None:
        raise ConfigError(f"run.round_deadline_s = {scenario.run.round_deadline_s:g}: protocol.name = {name!r} has "
                          "no rounds to end; drop it (protocol.max_staleness bounds how old an applied update may "
                          "be), or use protocol.name = 'sync' or 'semi_sync'")


def _require_concurrency(scenario, concurrency: int) -> None:
    n = scenario.devices.count
    if concurrency > n:
        raise ConfigError(f"protocol.concurrency = {concurrency}: at most devices.count = {n} devices can be "
                          "in flight at once")


@dataclass(frozen=True)
class StalenessOptions:
    """The staleness function and the oldest update applied (shared by the event protocols)."""

    staleness: str = option("polynomial", kind="staleness", doc="s(tau): constant 1, polynomial (1 + tau)^-a, "
                            "hinge 1 for tau <= b else 1 / (a (tau - b) + 1), an installed plugin's name or "
                            "an import path 'module:Class' (wirelessfl.sim.protocols.staleness)")
    staleness_a: float = option(0.5, ge=0, doc="a of the staleness function (0.5: FedBuff's 1 / sqrt(1 + tau))")
    staleness_b: float = option(4.0, ge=0, doc="b of the hinge staleness function")
    max_staleness: int | None = option(None, ge=0, doc="updates staler than this are dropped (outcome 'stale'); "
                                       "default: none")

    def function(self, plugin_path: Sequence[str] = ()) -> Staleness:
        """The staleness function s these options name, built with staleness_a and staleness_b
        (``plugin_path``: folders to look in first for an import path)."""
        return STALENESS.load(self.staleness, plugin_path).from_options(self.staleness_a, self.staleness_b)

    def weight(self, staleness) -> np.ndarray:
        """s(tau) of each staleness."""
        return self.function()(np.asarray(staleness, dtype=float))


class Sync(RoundProtocol):
    """Synchronous rounds, computed in closed form (wirelessfl.sim.sync.engine)."""

    event_driven = False
    Options = NoOptions

    @classmethod
    def from_scenario(cls, scenario, options) -> "Sync":
        """Nothing to build: the sync engine runs the rounds."""
        return cls()


@dataclass(frozen=True)
class SemiSyncOptions(StalenessOptions):
    """Options of the semi-synchronous protocol."""

    first_k: int | None = option(None, ge=1, doc="aggregate when this many of the round's uploads are in "
                                 "(default: all of them, or at run.round_deadline_s)")
    late: str = option("carry", choices=("carry", "drop"), doc="uploads still under way at the aggregation: "
                       "carry (applied in a later aggregation with their staleness) or drop (stopped)")


class SemiSync(RoundProtocol):
    """First k of the round's uploads, then aggregate; late uploads carried over or dropped.

    A carried update is applied after its aggregation's own updates, with weight s(tau) / m_r
    (m_r: the distinct devices of its round), times the algorithm's server step size.
    """

    round_based = True
    Options = SemiSyncOptions

    def __init__(self, options: SemiSyncOptions, deadline_s: float | None, plugin_path: Sequence[str] = ()):
        self.options, self.deadline_s = options, deadline_s
        self.staleness = options.function(plugin_path)
        # first_k updates close a round (None: all of them, however many the scheduler drew)
        self.per_aggregation = float("inf") if options.first_k is None else float(options.first_k)
        self.current = None   # the round under way
        self.on_time: list = []
        self.carried: list = []

    @classmethod
    def from_scenario(cls, scenario, options: SemiSyncOptions) -> "SemiSync":
        """first_k, late, the staleness function and run.round_deadline_s."""
        return cls(options, scenario.run.round_deadline_s, scenario.plugin_path)

    @classmethod
    def stale_updates(cls, options: SemiSyncOptions) -> bool:
        """Carried uploads are applied to a newer model."""
        return options.late == "carry"

    @classmethod
    def check(cls, scenario, options: SemiSyncOptions) -> None:
        """Carrying late uploads needs an algorithm that can apply stale updates."""
        if options.late == "carry":
            _require_stale_updates(scenario, "semi_sync")

    def start(self, server) -> None:
        server.begin_round()

    def on_round(self, server, round_) -> None:
        self.current = round_
        if not round_.updates or self._nobody_left():  # nobody to wait for (an empty round took its time;
            self._close(server)                          # devices that went offline during the reports)
        elif self.deadline_s is not None:
            # as under sync: measured from the round's start, but not before the computations begin
            server.timer("deadline", max(round_.t_start + self.deadline_s, round_.compute_start_s))

    def on_arrival(self, server, update) -> None:
        if self.current is not None and update.round == self.current.index:
            self.on_time.append(update)
            need = len(self.current.updates) if self.options.first_k is None \
                else min(self.options.first_k, len(self.current.updates))
            if len(self.on_time) >= need or self._nobody_left():
                self._close(server)
        elif self.options.max_staleness is not None and server.version - update.version > self.options.max_staleness:
            server.discard(update, Outcome.STALE)
        else:  # late, and carried (dropped uploads were stopped at their round's end)
            self.carried.append(update)

    def on_lost(self, server, update) -> None:
        if self.current is not None and update.round == self.current.index and self._nobody_left():
            self._close(server)  # the round's other devices went offline: nothing more to wait for

    def _nobody_left(self) -> bool:
        return not any(u.in_flight for u in self.current.updates)

    def on_timer(self, server, name: str) -> None:
        if name == "deadline":
            self._close(server)

    def _close(self, server) -> None:
        server.cancel_timer("deadline")
        round_, on_time, carried = self.current, self.on_time, self.carried
        self.current, self.on_time, self.carried = None, [], []
        staleness = np.array([server.version - u.version for u in carried], dtype=float)
        weights = self.staleness(staleness) * np.array([u.share for u in carried])
        server.end_round(round_, on_time, carried, weights, drop_late=self.options.late == "drop")
        server.begin_round()

    def state_dict(self) -> dict:
        return {"current": self.current, "on_time": list(self.on_time), "carried": list(self.carried)}

    def load_state(self, state: dict) -> None:
        self.current, self.on_time, self.carried = state["current"], list(state["on_time"]), list(state["carried"])


@dataclass(frozen=True)
class DispatchOptions(StalenessOptions):
    """Options shared by the protocols that start a device whenever a slot frees."""

    concurrency: int = option(10, ge=1, doc="devices training at any time")


class _Dispatching(RoundProtocol):
    """``concurrency`` devices in flight, a new one whenever a slot frees; updates staler than
    ``max_staleness`` dropped on arrival. Subclasses say what an arrival does (``_take``)."""

    name: ClassVar[str] = ""

    def __init__(self, options, plugin_path: Sequence[str] = ()):
        self.options = options
        self.staleness = options.function(plugin_path)
        self._weights: dict[tuple, np.ndarray] = {}

    def weights(self, staleness: tuple) -> np.ndarray:
        """The weight of each update of an aggregation, by their staleness (``_weigh``). Aggregations
        of a few updates repeat the same staleness values, so their weights are kept: s is a
        function of tau alone (wirelessfl.sim.protocols.staleness). Up to 8,192 are kept (about a megabyte):
        one update an aggregation with a thousand devices in flight sees some 5,000 staleness values."""
        weights = self._weights.get(staleness)
        if weights is None:
            weights = self._weigh(np.array(staleness, dtype=float))
            if len(staleness) <= 4:
                if len(self._weights) >= 8192:
                    self._weights.clear()
                self._weights[staleness] = weights
        return weights

    def _weigh(self, staleness: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @classmethod
    def from_scenario(cls, scenario, options):
        """The protocol with its options (and the scenario's plugin_path, for its staleness function)."""
        return cls(options, scenario.plugin_path)

    @classmethod
    def check(cls, scenario, options) -> None:
        """Stale updates, a dispatch rule, no more devices in flight than there are, no rounds."""
        _require_stale_updates(scenario, cls.name)
        _require_dispatch(scenario, cls.name)
        _require_concurrency(scenario, options.concurrency)
        _no_rounds(scenario, cls.name)

    def start(self, server) -> None:
        server.dispatch(self.options.concurrency)

    def on_arrival(self, server, update) -> None:
        max_staleness = self.options.max_staleness
        if max_staleness is not None and server.version - update.version > max_staleness:
            server.discard(update, Outcome.STALE)
        else:
            self._take(server, update)
        server.dispatch(1)  # the slot this device held

    def _take(self, server, update) -> None:
        raise NotImplementedError

    def on_lost(self, server, update) -> None:
        server.dispatch(1)


@dataclass(frozen=True)
class FedBuffOptions(DispatchOptions):
    """Options of FedBuff."""

    buffer: int = option(10, ge=1, doc="K: updates per aggregation")
    server_lr: float = option(1.0, gt=0, doc="server step size on the buffer's staleness-weighted mean")


class FedBuff(_Dispatching):
    """Buffered asynchronous aggregation: x <- x + server_lr (1 / K) sum_i s(tau_i) delta_i."""

    Options = FedBuffOptions
    name = "fedbuff"

    @classmethod
    def check(cls, scenario, options) -> None:
        """As every dispatching protocol, and a buffer no larger than the devices in flight: the
        buffer holds the updates that arrived since the last aggregation (a model-sized delta each)."""
        super().check(scenario, options)
        if options.buffer > options.concurrency:
            raise ConfigError(f"protocol.buffer = {options.buffer}: at most protocol.concurrency = "
                              f"{options.concurrency}: the buffer holds every arrived update until it is full, so it "
                              "must not outgrow the devices in flight")

    def __init__(self, options: FedBuffOptions, plugin_path: Sequence[str] = ()):
        super().__init__(options, plugin_path)
        self.per_aggregation = float(options.buffer)
        self.buffer: list = []

    def _take(self, server, update) -> None:
        o = self.options
        self.buffer.append(update)
        if len(self.buffer) >= o.buffer:
            buffer, self.buffer = self.buffer, []
            version = server.version
            server.apply(buffer, self.weights(tuple([version - u.version for u in buffer])) if server.trains else None)

    def _weigh(self, staleness: np.ndarray) -> np.ndarray:
        o = self.options
        return o.server_lr * self.staleness(staleness) / o.buffer

    def state_dict(self) -> dict:
        return {"buffer": list(self.buffer)}

    def load_state(self, state: dict) -> None:
        self.buffer = list(state["buffer"])


@dataclass(frozen=True)
class FedAsyncOptions(DispatchOptions):
    """Options of FedAsync."""

    alpha: float = option(0.6, gt=0, le=1, doc="mixing weight: a = alpha s(tau)")


class FedAsync(_Dispatching):
    """Every arrival mixed in at once: x <- (1 - a) x + a y, a = alpha s(tau)."""

    Options = FedAsyncOptions
    name = "fedasync"
    keeps_start_model = True  # the mix needs the model the device started from

    def _take(self, server, update) -> None:
        server.apply([update], self.weights((server.version - update.version,)) if server.trains else None, mix=True)

    def _weigh(self, staleness: np.ndarray) -> np.ndarray:
        return self.options.alpha * self.staleness(staleness)


PROTOCOLS = Registry("protocol", "wirelessfl.sim.protocols:RoundProtocol", {
    "sync": "wirelessfl.sim.protocols:Sync",
    "semi_sync": "wirelessfl.sim.protocols:SemiSync",
    "fedbuff": "wirelessfl.sim.protocols:FedBuff",
    "fedasync": "wirelessfl.sim.protocols:FedAsync",
})
"""Built-in round protocols by the name ``protocol.name`` gives them."""
