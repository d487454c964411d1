"""The 802.11 DCF (distributed coordination function) as one function of its stations' state: who
contends, each one's backoff counter and stage, and the medium's slot grid. Both timing models of
``link.access = "wifi"`` and the Bianchi benchmark run it (:class:`Dcf`); it draws from the random
generator it is handed and knows nothing of SimPy.

The rule, every station hearing every other (no hidden terminals), no channel errors, no capture:

- The medium's slot boundaries lie at ``epoch_s + j slot_s`` (j = 0, 1, ...), ``epoch_s`` being the
  end of the last busy period and of the interframe space (DIFS, or AIFS) after it.
- A station that starts contending at t draws a backoff counter uniformly in [0, CW - 1]
  (CW = CWmin + 1 at first) and joins at the first boundary at least IFS after t (its DIFS sensed
  on the idle medium); from there, at each boundary, it transmits if its counter is 0, and otherwise
  counts it down by one. (Counting at the boundary that ends DIFS too is EDCA's rule of one action
  per slot boundary, decrement or transmit, in IEEE 802.11-2020's EDCA backoff procedure, and the
  count Bianchi's chain makes: a station's counter drops once per generic slot, idle or busy.)
- One contention round: the smallest join + counter, c, picks the boundary of the next transmission,
  c idle slots after ``epoch_s``; everyone who reaches 0 there transmits. The others count down
  c - join + 1 (frozen from then on while the medium is busy); one whose IFS had not ended by then
  starts over after the busy period, its counter untouched.
- One transmitter: success. Its frame (DATA, or an A-MPDU of as many MPDUs as fit) is acknowledged
  after SIFS; the medium is busy for the exchange and IFS; its stage goes back to 0. Several:
  a collision, busy for the longest of their attempts (DATA, or RTS) and EIFS; each one's stage
  rises by one, and its next counter comes from a window twice as large, up to CWmax + 1. With a
  retry limit R, a frame whose R-th transmission collides is dropped (counted) and the station
  starts the same bits over as a new frame at stage 0.
- After each transmission the station draws a fresh counter (post-backoff) and contends again with
  its next frame, until its bits are through.

One contention round is one call of :meth:`Dcf.step`, whatever the idle slots before it: the
counters are jumped over analytically (their minimum), never slot by slot.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Hashable

import numpy as np

from .wifi_phy import FrameExchange

__all__ = ["Dcf", "Round", "Station"]


@dataclass
class Station:
    """One contending station: what it has left to send (bits; inf: saturated), its frames' MCS
    (an index the frame builder understands), where it joins the current epoch's slot grid, its
    backoff counter, its backoff stage (transmissions of its current frame so far) and its tallies."""

    key: Hashable
    bits_left: float
    mcs: int
    join: int = 0
    counter: int = 0
    stage: int = 0
    attempts: int = 0
    collisions: int = 0
    retries: int = 0
    frames: int = 0
    drops: int = 0
    on_air_s: float = 0.0

    def state(self) -> list:
        """Its numbers, for a checkpoint."""
        return [self.key, self.bits_left, self.mcs, self.join, self.counter, self.stage, self.attempts,
                self.collisions, self.retries, self.frames, self.drops, self.on_air_s]

    @classmethod
    def from_state(cls, row: list) -> "Station":
        key, bits, mcs, join, counter, stage, attempts, collisions, retries, frames, drops, air = row
        return cls(int(key) if isinstance(key, (int, np.integer)) else key, float(bits), int(mcs), int(join),
                   int(counter), int(stage), int(attempts), int(collisions), int(retries), int(frames), int(drops),
                   float(air))


@dataclass
class Round:
    """What one contention round did: when the transmission began (``start_s``), who transmitted
    (their stations, in the order they joined), their frames, whether it succeeded, how long each
    one was on the air, when the medium is free again (``epoch_s``: busy period and IFS over), and,
    on a success, when the ACK ended and whether that was the winner's last frame."""

    start_s: float
    stations: list[Station]
    frames: list[FrameExchange]
    success: bool
    on_air_s: list[float]
    epoch_s: float
    ack_end_s: float = math.nan
    finished: bool = False
    dropped: list[Station] = field(default_factory=list)


class Dcf:
    """The DCF among the stations that join it (see the module docstring).

    slot_s, sifs_s, ifs_s (DIFS or AIFS), eifs_s: the standard's times; cw_min, m: the contention
    window CWmin + 1 doubling m times; retry_limit: transmissions of a frame before it is dropped
    (None: never); frame(station): the exchange of the station's next frame (a
    :class:`~wirelessfl.access.wifi_phy.FrameExchange`); rng: the backoff draws (``integers``).
    """

    def __init__(self, slot_s: float, sifs_s: float, ifs_s: float, eifs_s: float, cw_min: int, m: int,
                 retry_limit: int | None, frame: Callable[[Station], FrameExchange], rng):
        self.slot_s, self.sifs_s, self.ifs_s, self.eifs_s = slot_s, sifs_s, ifs_s, eifs_s
        self.window, self.m, self.retry_limit = cw_min + 1, m, retry_limit
        self.frame, self.rng = frame, rng
        self.epoch_s = -math.inf  # the medium has been idle forever
        self.stations: dict[Hashable, Station] = {}  # in the order they joined

    def draw(self, stage: int) -> int:
        """A backoff counter at ``stage``: uniform in [0, 2^min(stage, m) (CWmin + 1) - 1]."""
        return int(self.rng.integers(0, self.window << min(stage, self.m)))

    def join(self, key: Hashable, t: float, bits: float, mcs: int) -> Station:
        """``key`` starts contending at ``t`` with ``bits`` to send at ``mcs``: a counter drawn, and
        the first boundary at least IFS after t (the medium idle since ``epoch_s``, or busy until then)."""
        earliest = t + self.ifs_s
        if not self.stations and earliest > self.epoch_s:  # nobody counts: move the grid's origin up to t
            if math.isinf(self.epoch_s):
                self.epoch_s = earliest
            else:
                self.epoch_s += self.slot_s * math.floor((earliest - self.epoch_s) / self.slot_s + 1e-9)
        join = max(math.ceil((earliest - self.epoch_s) / self.slot_s - 1e-9), 0)
        station = Station(key, float(bits), int(mcs), join, self.draw(0))
        self.stations[key] = station
        return station

    def leave(self, key: Hashable) -> Station | None:
        """``key`` stops contending (its upload was stopped); its station, or None."""
        return self.stations.pop(key, None)

    def next_boundary(self) -> int | None:
        """The boundary (in slots after ``epoch_s``) of the next transmission; None: nobody contends."""
        if not self.stations:
            return None
        return min(s.join + s.counter for s in self.stations.values())

    def next_start_s(self) -> float | None:
        """When the next transmission begins (None: nobody contends)."""
        c = self.next_boundary()
        return None if c is None else self.epoch_s + c * self.slot_s

    def step(self) -> Round:
        """The next contention round: who transmits, what happens, and everyone's new counters."""
        c = self.next_boundary()
        if c is None:
            raise RuntimeError("no station contends")
        start = self.epoch_s + c * self.slot_s
        sending = [s for s in self.stations.values() if s.join + s.counter == c]
        for s in self.stations.values():  # the others count down to this boundary, then freeze
            if s.join + s.counter != c:
                if s.join <= c:
                    s.counter -= c - s.join + 1
                s.join = 0
        frames = [self.frame(s) for s in sending]
        success = len(sending) == 1
        if success:
            s, f = sending[0], frames[0]
            air = [f.on_air_s()]
            until_ack = f.until_ack_s(self.sifs_s)
            out = Round(start, sending, frames, True, air, start + until_ack + self.ifs_s, start + until_ack)
            self._count(s, air[0])
            s.bits_left -= f.payload_bits
            s.frames, s.stage = s.frames + 1, 0
            if s.bits_left <= 1e-9:
                out.finished = True
                del self.stations[s.key]
            else:
                s.join, s.counter = 0, self.draw(0)
        else:
            air = [f.attempt_s() for f in frames]
            out = Round(start, sending, frames, False, air, start + max(air) + self.eifs_s)
            for s, a in zip(sending, air):
                self._count(s, a)
                s.collisions, s.stage = s.collisions + 1, s.stage + 1
                if self.retry_limit is not None and s.stage >= self.retry_limit:
                    s.drops, s.stage = s.drops + 1, 0  # dropped: the same bits again as a new frame
                    out.dropped.append(s)
                s.join, s.counter = 0, self.draw(s.stage)
        self.epoch_s = out.epoch_s
        return out

    @staticmethod
    def _count(s: Station, air_s: float) -> None:
        s.attempts += 1
        s.retries += s.stage > 0
        s.on_air_s += air_s

    def state_dict(self) -> dict:
        """The grid's origin and the stations (the random generator is its owner's to save)."""
        return {"epoch_s": self.epoch_s, "stations": [s.state() for s in self.stations.values()]}

    def load_state(self, state: dict) -> None:
        """Restore them."""
        self.epoch_s = float(state["epoch_s"])
        stations = [Station.from_state(row) for row in state["stations"]]
        self.stations = {s.key: s for s in stations}
