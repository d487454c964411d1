"""One transmitter at a time, first come first served: what ``simpy.Resource(env, capacity=1)``
does for the event uplinks, in the same order of events, without the resource's machinery (its
request and release objects cost several microseconds an upload, about a tenth of an upload's
whole cost in the event engine).

The order is SimPy's own: a request is granted by an event at the instant it is made (if the band
is free and nobody asked before it), and a holder that leaves hands the band to the next in line
through an event at that instant (so every event already scheduled at the instant comes first).
Two of those events are spared where nothing could tell: a grant that would be the next event to
fire anyway is made at once (Clock.done_now), and a holder that leaves with nobody in line hands
nothing on (a request made before that event fired would have found the band free).
tests/test_clock.py holds :class:`Band` to ``simpy.Resource`` event for event.
"""
from __future__ import annotations

from collections import deque

import simpy

from .clock import Clock

__all__ = ["Band", "Turn"]


class Turn(simpy.Event):
    """A request for the band: an event that fires when the band is the requester's. Use it as
    ``with band.request() as turn: yield turn``, which leaves the band (or the line) however the
    block is left."""

    def __init__(self, band: "Band"):
        super().__init__(band.env)
        self.band = band

    def __enter__(self) -> "Turn":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.band.leave(self, closing=exc_type is GeneratorExit)


class Band:
    """A band one holder at a time, first come first served."""

    def __init__(self, env: Clock):
        self.env = env
        self.holder: Turn | None = None
        self.line: deque[Turn] = deque()  # the requests not granted yet, in order

    def request(self) -> Turn:
        """A request: granted now (by an event at this instant) if the band is free and nobody is in line."""
        turn = Turn(self)
        if self.holder is None and not self.line and self.env.done_now(turn):
            self.holder = turn
            return turn
        self.line.append(turn)
        self._grant()
        return turn

    def leave(self, turn: Turn, closing: bool = False) -> None:
        """``turn`` leaves the band, or the line if it was not granted yet. The next in line gets the
        band through an event at this instant (``closing``: its process is being discarded, as a
        generator closed at the end of a run: nothing is handed on)."""
        if not turn.triggered:
            self.line.remove(turn)
        if closing:
            return
        if self.holder is turn:
            self.holder = None
        if not self.line:
            return
        self.env.call_soon(self._grant)

    def _grant(self, _=None) -> None:
        if self.holder is None and self.line:
            self.holder = turn = self.line.popleft()
            turn.succeed()
