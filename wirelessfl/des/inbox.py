"""Items handed one at a time to a taker: what a ``simpy.Store`` read by a server process does for
the event engine (a device's update reaching the server), in the same order of events, without the
store's put and get objects or the server's generator (several microseconds an upload).

The order is SimPy's own: an item joins the line as it is put, and its put is an event at that
instant; when the put fires and the taker is idle, a hand-over event at that instant gives the
taker the first in line; after taking one, the taker is handed the next through another such event
while any wait (items put meanwhile included, even before their puts fire). Where those events
would be the next to fire anyway, the item is handed over at once, without them.
tests/test_clock.py holds :class:`Inbox` to a Store and its reader event for event.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Callable

from .clock import Clock

__all__ = ["Inbox"]


class Inbox:
    """Hands each item put into it to ``take(item)``, one at a time, in the order put."""

    def __init__(self, env: Clock, take: Callable[[Any], None]):
        self.env, self.take = env, take
        self.line: deque = deque()  # items put, not handed over yet
        self.handing = False  # a hand-over is under way

    def put(self, item) -> None:
        """``item`` for the taker: at once if nothing else is due at this instant before its put
        event (Clock.fires_next) and nothing waits in line (the two events would come next, and
        the put's process ends in between, which nothing waits for); else through those events."""
        if not self.handing and not self.line and self.env.fires_next():
            self.handing = True
            try:
                self.take(item)
            finally:
                self.handing = False
            return
        self.line.append(item)
        self.env.call_soon(self._put_fired)

    def _put_fired(self, _) -> None:
        if self.line and not self.handing:
            self._hand_over()

    def _hand_over(self) -> None:
        self.handing = True
        self.env.call_soon(self._handed)

    def _handed(self, _) -> None:
        self.take(self.line.popleft())
        if self.line:
            self._hand_over()
        else:
            self.handing = False
