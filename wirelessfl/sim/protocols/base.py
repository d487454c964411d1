"""The round protocol's contract: the core every protocol has (:class:`RoundProtocol`), the
capabilities only some have, and what the engines and the runner ask of a protocol.

A protocol is event-driven when it says what an update that reached the server does (its own
``on_arrival``): the event engine (wirelessfl.sim.events.engine) runs it. One that does not, sync,
has its rounds computed in closed form (wirelessfl.sim.sync.engine). What only some event protocols
do is a capability (wirelessfl.capabilities), had by writing its members:

- :class:`RunsRounds` (``on_round``): devices drawn per round through ``server.begin_round``, as
  sync draws them (semi_sync), not started one free slot at a time by the scheduler's dispatch rule;
- :class:`ArmsTimers` (``on_timer``): timers armed with ``server.timer`` (semi_sync's deadline);
- :class:`HoldsUpdates` (``state_dict``, ``load_state``): what it keeps between events, saved in
  checkpoints (fedbuff's buffer, semi_sync's round);
- :class:`BatchesUpdates` (``per_aggregation``): more than one update an aggregation (fedbuff's
  buffer, semi_sync's first k);
- :class:`MixesDeviceModels` (``keeps_start_model``): aggregations that move the model toward each
  device's model (fedasync);
- :class:`DecidesStaleUpdates` (``stale_updates``): whether runs apply updates computed from an
  older model, said by the options (semi_sync carrying late uploads). Without it, every
  event-driven protocol without rounds does and no other protocol does.

The scenario's checks (wirelessfl.config), which sit below this package, read the same members by
name (``wirelessfl.capabilities.has_member``) for the scenario's facts.
"""
from __future__ import annotations

from typing import Any, ClassVar, Protocol, runtime_checkable

from ...capabilities import absent, has_member, provides
from ...fields import ConfigError

__all__ = ["ArmsTimers", "BatchesUpdates", "DecidesStaleUpdates", "HoldsUpdates", "MixesDeviceModels", "RoundProtocol",
           "RunsRounds", "event_driven", "mixes_device_models", "round_based", "updates_per_aggregation"]


class RoundProtocol(Protocol):
    """When the server aggregates. Required: ``from_scenario``; an event protocol also writes
    ``start``, ``on_arrival`` and ``on_lost``: four methods in all (subclass this protocol to inherit
    ``Options``, ``check`` and the others' defaults). What only some protocols do is a capability of
    wirelessfl.sim.protocols.base, had by writing its members.
    """

    Options: ClassVar[type | None] = None
    """A dataclass of the protocol's own options, or None (options handed over as a dict)."""

    @classmethod
    def from_scenario(cls, scenario, options) -> "RoundProtocol":
        """Build the protocol for a run of ``scenario`` with its options."""
        ...

    @classmethod
    def check(cls, scenario, options) -> None:
        """Raise ConfigError if the scenario cannot run with this protocol."""

    def start(self, server) -> None:
        """The run begins (not called again when it resumes from a checkpoint)."""

    @absent  # a protocol that does not say what an arrival does has its rounds in closed form (sync)
    def on_arrival(self, server, update) -> None:
        """``update`` reached the server (``update.device``, ``.version``: the version it started
        from, ``.round``); apply it (``server.apply``), keep it, or drop it (``server.discard``)."""

    def on_lost(self, server, update) -> None:
        """``update``'s device went offline before its upload was in (recorded already)."""


@runtime_checkable
class RunsRounds(Protocol):
    """A protocol whose devices are drawn per round (``server.begin_round``: the scheduler decides
    as under sync), not started one free slot at a time by the scheduler's dispatch rule (semi_sync)."""

    def on_round(self, server, round_) -> None:
        """A round begun with ``server.begin_round()`` dispatched its devices (``round_.updates``)."""


@runtime_checkable
class ArmsTimers(Protocol):
    """A protocol that arms timers with ``server.timer(name, at)`` (semi_sync's deadline)."""

    def on_timer(self, server, name: str) -> None:
        """The timer ``name`` fired."""


@runtime_checkable
class HoldsUpdates(Protocol):
    """A protocol that keeps something between events (fedbuff's buffer, semi_sync's round): a
    checkpoint saves it."""

    def state_dict(self) -> dict[str, Any]:
        """What it holds (updates may appear in it: the engine stores them)."""

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""


@runtime_checkable
class BatchesUpdates(Protocol):
    """A protocol whose aggregations apply more than one update each (fedbuff's buffer, semi_sync's
    first k): the dispatch rules' power budget assumes as many, and an over-the-air uplink gathers as
    many into one joint transmission (wirelessfl.access.aircomp.JointUplink)."""

    per_aggregation: float
    """Updates an aggregation applies (inf: a whole round's)."""


@runtime_checkable
class MixesDeviceModels(Protocol):
    """A protocol whose aggregations move the model toward each device's model
    (``server.apply(..., mix=True)``, fedasync): each update keeps the model it started from."""

    keeps_start_model: bool
    """True: updates keep the model they started from."""


@runtime_checkable
class DecidesStaleUpdates(Protocol):
    """A protocol whose options say whether its runs apply updates computed from an older model
    (semi_sync: late uploads carried); the scenario's algorithm must then be able to
    (wirelessfl.learning.algorithms.AppliesStaleUpdates)."""

    @classmethod
    def stale_updates(cls, options) -> bool:
        """Whether runs with these options apply stale updates."""


def event_driven(protocol) -> bool:
    """Whether the event engine runs ``protocol`` (or its class): it says what an arrival does. One
    that does not (sync) has its rounds computed in closed form."""
    return has_member(protocol, "on_arrival")


def round_based(protocol) -> bool:
    """Whether ``protocol`` draws its devices per round (:class:`RunsRounds`)."""
    return provides(protocol, RunsRounds)


def updates_per_aggregation(protocol) -> float:
    """Updates an aggregation of ``protocol`` applies (1 unless :class:`BatchesUpdates`)."""
    return float(protocol.per_aggregation) if provides(protocol, BatchesUpdates) else 1.0


def mixes_device_models(protocol) -> bool:
    """Whether ``protocol``'s updates keep the model they started from (:class:`MixesDeviceModels`)."""
    return provides(protocol, MixesDeviceModels) and bool(protocol.keeps_start_model)


def require_stale_updates(scenario, name: str) -> None:
    """ConfigError unless the scenario's algorithm can apply updates computed from older models."""
    from ...learning.algorithms import can_apply_stale_updates

    if not can_apply_stale_updates(scenario.part("algorithm")):
        raise ConfigError(f"learning.algorithm = {scenario.learning.algorithm!r}: cannot apply updates computed "
                          f"from an older model, which protocol.name = {name!r} does; use fedavg (or another "
                          "algorithm that implements local_updates and apply_updates), or protocol.name = 'sync'")
