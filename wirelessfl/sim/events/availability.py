"""Who can be reached, in continuous time: the availability model (a Markov chain, a trace) steps
every ``devices.availability_period_s`` seconds on the event engine's clock, and a device that is
off after a step while it computes or uploads is lost (:func:`availability_step`)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ...des import RANK_AVAILABILITY, Clock, priority
from ...outcomes import Outcome
from .stalls import check_idle

__all__ = ["AvailabilitySteps", "availability_step"]


class AvailabilitySteps:
    """The availability of every device (``available``: None when everyone always is), stepped
    every ``period_s`` seconds. When a step is due, ``on_step()`` is called; it takes the step
    (``step``), deals with who went offline, and arms the next one (``advance``)."""

    def __init__(self, model, rng: np.random.Generator, period_s: float, on_step: Callable[[], None]):
        self.model, self.rng, self.period_s, self.on_step = model, rng, float(period_s), on_step
        self.available: np.ndarray | None = None
        self.next_step_s: float | None = None
        self.env: Clock | None = None
        self.idle_steps = 0  # steps in a row after which no device was in flight (a stall, when many)

    def begin(self) -> None:
        """A fresh run: the first step, at time 0."""
        if self.model is not None:
            self.available = self.model.step(self.rng)
            self.next_step_s = self.period_s

    def start(self, env: Clock) -> None:
        """Run on ``env`` (the next step armed, for a fresh or a resumed run)."""
        self.env = env
        if self.next_step_s is not None:
            self._arm()

    @property
    def since(self) -> tuple:
        """Names the current availability: this model's (several engines may report to one recorder:
        edge servers), until its next step (the time of the next one)."""
        return id(self), self.next_step_s

    def step(self) -> np.ndarray:
        """The model's next step: who is available from now on."""
        self.available = self.model.step(self.rng)
        return self.available

    def advance(self) -> None:
        """Arm the next step, a period on."""
        self.next_step_s += self.period_s
        self._arm()

    def count_idle(self, idle: bool) -> int:
        """Count a step after which no device was in flight (``idle``), or end the count; the steps in a row."""
        self.idle_steps = self.idle_steps + 1 if idle else 0
        return self.idle_steps

    def _arm(self) -> None:
        self.env.at(self.next_step_s, priority(RANK_AVAILABILITY)).callbacks.append(lambda _: self.on_step())

    def state_dict(self) -> dict:
        """Who is available, and when the next step is."""
        return {"available": None if self.available is None else self.available.copy(),
                "next_tick_s": self.next_step_s, "idle_steps": self.idle_steps}

    def load_state(self, state: dict) -> None:
        """Restore them (the next step is armed on ``start``)."""
        self.available = None if state["available"] is None else np.asarray(state["available"], dtype=bool)
        self.next_step_s = None if state["next_tick_s"] is None else float(state["next_tick_s"])
        self.idle_steps = int(state.get("idle_steps", 0))


def availability_step(engine) -> None:
    """An availability step of the event engine's run: devices in flight that went offline are lost
    (outcome "offline"); waiting slots retried."""
    e = engine
    if e.stopping:
        return
    if e.drain is not None:  # a device at work stays at it until its battery runs out (the drain's timers)
        e.drain.before_step()
        e.availability.step()
        e.drain.after_step()
        gone = []
    else:
        available = e.availability.step()
        gone = [u for u in e.flights.flying.values() if not available[u.device] and u.at_device]
    for u in gone:
        if u.in_flight:
            u.process.interrupt(Outcome.OFFLINE)
            e.tasks.lose(u, Outcome.OFFLINE)
    e.availability.advance()
    e.dispatcher.fill()
    if e.stop.time_budget_s is None:  # only aggregations end the run: stop one that has none to come
        check_idle(e)
