"""The simulated clock: a SimPy environment that can also wake a process at an absolute time.

``env.timeout(d)`` lands at ``now + d``, which is not always the time a model computed (``start +
airtime``, say) to the last bit. Both engines wait with ``Clock.at(t)`` instead, so that a round's
end is the same float however it was reached, and a run resumed from a checkpoint lands every
pending event at exactly the time the uninterrupted run did.

Ties: SimPy orders events of equal time by priority, then by the order they were scheduled. The
event engine gives each of its events a priority of its own (``priority``: a rank and the update's
dispatch number), so events at one instant happen in an order that a resumed run can rebuild, and
every event SimPy makes itself at that instant (URGENT, NORMAL: resource grants, store hand-overs,
process starts) happens first.
"""
from __future__ import annotations

from heapq import heappush

import simpy
from simpy.core import NORMAL, EmptySchedule, StopSimulation

__all__ = ["CHECKPOINT", "Clock", "RANK_AVAILABILITY", "RANK_DEVICE", "RANK_STOP", "RANK_TIMER", "priority"]

CHECKPOINT = 2
"""Priority of the moment a checkpoint is taken: after SimPy's own events at that instant (nothing
half-done), before any of the engine's."""
RANK_DEVICE, RANK_TIMER, RANK_AVAILABILITY, RANK_STOP = range(4)
"""At one instant: devices' events (by dispatch number), then the protocol's timers (a deadline
after the uploads that end exactly then), then availability changes, then the end of the run."""
_SPAN = 2 ** 62


def priority(rank: int, seq: int = 0) -> int:
    """The heap priority of an engine event: above SimPy's own (0, 1) and the checkpoint (2)."""
    return 3 + rank * _SPAN + seq


class Clock(simpy.Environment):
    """A SimPy environment with :meth:`at`.

    SimPy's public API schedules only relative delays (``schedule(event, priority, delay)`` lands at
    ``now + delay``), so :meth:`at` puts the event on the environment's queue the way ``schedule``
    does, with the absolute time instead. That uses SimPy 4's queue entries (time, priority, event
    id, event) and a triggered event's ``_ok`` and ``_value``, as :meth:`done_now` does a processed
    event's (``callbacks`` None, which a process yielding it goes on from at once): pyproject.toml pins ``simpy<5``, and
    tests/test_clock.py holds this use to what SimPy does with it.
    """

    def at(self, time: float, prio: int = NORMAL) -> simpy.Event:
        """An event that fires at exactly ``time`` (>= now) with heap priority ``prio``."""
        if time < self._now:
            raise ValueError(f"cannot schedule an event at {time!r}, before now ({self._now!r})")
        event = simpy.Event(self)
        event._ok = True  # a Timeout's state: triggered, value None
        event._value = None
        # the environment's own queue, as Environment.schedule fills it, at time rather than now + delay
        heappush(self._queue, (time, prio, next(self._eid), event))
        return event

    def run_until(self, event: simpy.Event) -> bool:
        """Run until ``event`` has fired: True, or False where nothing is left to happen before it
        (SimPy's EmptySchedule: no process waits on anything that will come). ``run(until=event)``
        would say the latter only in a RuntimeError's text; this is the same loop as its own."""
        if event.callbacks is None:  # already processed
            return True
        event.callbacks.append(StopSimulation.callback)
        step = self.step
        try:
            while True:
                step()
        except StopSimulation:
            return True
        except EmptySchedule:
            return False

    def call_soon(self, callback) -> None:
        """Call ``callback(event)`` from an event triggered now (priority NORMAL): after everything
        already due at this instant, as SimPy's own grants and hand-overs are."""
        event = simpy.Event(self)
        event.callbacks.append(callback)
        event.succeed()

    def fires_next(self) -> bool:
        """Whether an event triggered now (priority NORMAL) would be the next to fire: nothing else
        is due at this instant before it. Then what it would do can be done at once, in the same
        order of everything (wirelessfl.des.band, wirelessfl.des.inbox)."""
        queue = self._queue
        return not (queue and queue[0][0] <= self._now and queue[0][1] <= NORMAL)

    def done_now(self, event: simpy.Event, value=None) -> bool:
        """Make ``event`` one that has already fired (with ``value``), if it would be the next to
        fire anyway (``fires_next``). A process that yields it then goes on at once, as it would have
        after that event, and the queue is spared the event. Returns whether it did; if not, trigger
        the event."""
        if not self.fires_next():
            return False
        event._ok, event._value, event.callbacks = True, value, None  # processed: a yield of it goes on
        return True
