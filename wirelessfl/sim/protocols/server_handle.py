"""What a round protocol (wirelessfl.sim.protocols.RoundProtocol) may call on the server it is
handed, declared: :class:`ServerHandle`. The event engine (wirelessfl.sim.events.engine.EventEngine) is the
one implementation; a protocol that programs against this, and nothing else of the engine, keeps
working when the engine's insides change. docs/extending.md shows it at work."""
from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["SERVER_HANDLE_MEMBERS", "ServerHandle"]


@runtime_checkable
class ServerHandle(Protocol):
    """The server as a round protocol sees it: start devices, aggregate or drop what arrives, set
    timers, and (round-based protocols) begin and end rounds; read the version, the clock, the
    device count and whether a model trains.

    An update (wirelessfl.sim.events.flight.Update) is read, never written: ``device``, ``version`` (the
    server version it started from), ``round`` (round-based protocols: the round that dispatched it),
    ``in_flight``."""

    @property
    def version(self) -> int:
        """The server's model version (aggregations so far)."""

    @property
    def now(self) -> float:
        """The simulated clock."""

    num_devices: int
    """How many devices the run has."""

    @property
    def trains(self) -> bool:
        """Whether aggregations train a model (False in a timing-only run: ``apply``'s weights are
        not used, so a protocol may pass None)."""

    def dispatch(self, k: int = 1) -> int:
        """Start up to ``k`` devices through the scheduler's dispatch rule; returns how many started."""

    def apply(self, updates: list, weights, *, mix: bool = False) -> None:
        """One aggregation of ``updates`` with ``weights`` (one each); ``mix``: move toward each
        device's model, as fedasync. The version then increases by one."""

    def discard(self, update, outcome: str) -> None:
        """Drop an update that arrived (e.g. too stale), recorded with ``outcome``."""

    def cancel(self, updates, outcome: str) -> None:
        """Stop updates still in flight, recorded with ``outcome``."""

    def timer(self, name: str, at: float) -> None:
        """Call the protocol's ``on_timer(server, name)`` (it ArmsTimers) at simulated time ``at``
        (replaces a timer of that name; names starting with "_" are the engine's)."""

    def cancel_timer(self, name: str) -> None:
        """Disarm the timer ``name`` (nothing if none)."""

    def begin_round(self) -> None:
        """Round-based protocols (RunsRounds): the next round's decision, draws and dispatch, as sync
        has them; ``on_round(server, round_)`` follows."""

    def end_round(self, round_, on_time: list, carried: list = (), carried_weights=(), *,
                  drop_late: bool = False) -> None:
        """Round-based protocols: aggregate ``round_`` with the updates ``on_time`` and ``carried``
        ones of earlier rounds (their ``carried_weights``); ``drop_late``: stop the round's devices
        still in flight (outcome "late_dropped"), else they keep going."""


SERVER_HANDLE_MEMBERS = ("version", "now", "num_devices", "trains", "dispatch", "apply", "discard", "cancel",
                         "timer", "cancel_timer", "begin_round", "end_round")
"""Every member of :class:`ServerHandle`, by name."""
