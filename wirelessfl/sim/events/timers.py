"""The event engine's named timers: one per name, at an absolute simulated time, fired in the
order they were armed when several fall on one instant (after the devices' events of that instant).
The protocol's timers (``server.timer``) and the engine's own (names starting with "_") are kept
here; a checkpoint saves them and a resume arms them again at the same times and in the same order."""
from __future__ import annotations

from typing import Callable

import simpy

from ...des import RANK_TIMER, Clock, priority

__all__ = ["Timers"]


class Timers:
    """Named timers on a clock; ``fire(name)`` is called when one is due (not when it was replaced
    or cancelled first)."""

    def __init__(self, fire: Callable[[str], None]):
        self.fire = fire
        self.armed: dict[str, tuple[float, int]] = {}  # name: (time, the order it was armed in)
        self.next_order = 0
        self.env: Clock | None = None
        self._events: dict[str, simpy.Event] = {}

    def start(self, env: Clock) -> None:
        """Run on ``env``; the timers restored by ``load_state`` are armed again."""
        self.env = env
        for name in self.armed:
            self._arm(name)

    def set(self, name: str, at: float) -> None:
        """Fire ``name`` at simulated time ``at`` (replacing a timer of that name)."""
        self.cancel(name)
        self.armed[name] = (float(at), self.next_order)
        self.next_order += 1
        self._arm(name)

    def cancel(self, name: str) -> None:
        """Disarm ``name`` (nothing if it is not armed)."""
        self.armed.pop(name, None)
        self._events.pop(name, None)

    def _arm(self, name: str) -> None:
        at, order = self.armed[name]
        event = self.env.at(max(at, self.env.now), priority(RANK_TIMER, order))
        self._events[name] = event
        event.callbacks.append(lambda ev, name=name: self._due(name, ev))

    def _due(self, name: str, event) -> None:
        if self._events.get(name) is not event:
            return  # cancelled or replaced
        del self._events[name]
        del self.armed[name]
        self.fire(name)

    def state_dict(self) -> dict:
        """The armed timers (name, time, order) and the next order."""
        return {"timers": [[name, at, order] for name, (at, order) in self.armed.items()],
                "timer_seq": self.next_order}

    def load_state(self, state: dict) -> None:
        """Restore the timers (armed on ``start``)."""
        self.armed = {name: (float(at), int(order)) for name, at, order in state["timers"]}
        self.next_order = int(state["timer_seq"])
