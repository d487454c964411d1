"""``semi_sync``: rounds on the event engine. The scheduler decides as under sync and the devices it
draws (m draws, the distinct ones) are dispatched; the server aggregates as soon as ``first_k`` of
their uploads are in (default all), or at the deadline. Uploads still under way are not thrown away:
with ``late = "carry"`` they go on contending for the uplink and are applied in a later aggregation
with their staleness; ``late = "drop"`` stops them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...fields import option
from ...outcomes import Outcome
from .base import RoundProtocol, require_stale_updates
from .staleness import StalenessOptions

__all__ = ["SemiSync", "SemiSyncOptions"]


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
    (m_r: the distinct devices of its round), times the algorithm's server step size. It runs rounds
    (``on_round``), arms the deadline's timer (``on_timer``), holds the round's updates between
    events (``state_dict``), batches them (``per_aggregation``) and says by ``late`` whether it
    applies stale updates (``stale_updates``): capabilities of wirelessfl.sim.protocols.base.
    """

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
            require_stale_updates(scenario, "semi_sync")

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
