"""Uploads on the air together at rates that change whenever one of them starts or ends (piecewise
constant): FDMA's and OFDMA's shared band, and cells on one sub-band that interfere
(wirelessfl.network.interference). Each upload keeps the bits it has left; at every change the
rates of those on the air are worked out again and the next end is woken at, an older wake-up being
out of date."""
from __future__ import annotations

import math

import simpy

from ..des import RANK_DEVICE, priority

__all__ = ["RatesOnTheAir"]


class RatesOnTheAir:
    """The uploads on the air (``active``, in the order they went on), their rates since ``t_last``,
    and the wake-up at the next end. Subclasses say what the rates are (``_rates_now``), may count
    the time that passed (``_elapsed``) and may decide that an upload's bits are not all sent yet
    when they ran out (``_sent``: the next packet)."""

    def __init__(self, host):
        self.host = host
        self.active: list = []  # updates on the air, in the order they joined
        self.t_last = host.env.now  # when bits_left was last brought up to date
        self.rates: list[float] = []  # of the active updates, since t_last
        self._generation = 0  # a wake-up of an older generation is out of date

    def _rates_now(self) -> list[float]:
        """The rate of every active upload from now on."""
        raise NotImplementedError

    def _elapsed(self, dt: float) -> None:
        """``dt`` seconds passed at the current rates (a hook: nothing by default)."""

    def _sent(self, u) -> bool:
        """``u``'s bits ran out: whether its upload is over (a hook: yes by default)."""
        return True

    def _join(self, u) -> None:
        """``u`` goes on the air now (its bits_left set): the others' bits are counted to now first."""
        self._advance()
        self.active.append(u)
        self._reschedule()

    def _until_sent(self, u):
        """Wait (a SimPy generator) until ``u``'s upload is over; its result. Interrupted, ``u`` leaves
        the air (the others' rates follow) and the interrupt goes on."""
        try:
            return (yield u.done)
        except simpy.Interrupt:
            self._advance()
            self._leave(u)
            self._reschedule()
            raise

    def _leave(self, u) -> None:
        self.active.remove(u)

    def _advance(self) -> None:
        now = self.host.env.now
        dt = now - self.t_last
        if dt > 0:
            for u, rate in zip(self.active, self.rates):
                u.bits_left -= rate * dt
            self._elapsed(dt)
        self.t_last = now

    def _reschedule(self) -> None:
        """The rates of the uploads on the air now; wake at the next end of one at them."""
        self._generation += 1
        if not self.active:
            self.rates = []
            return
        self.rates = self._rates_now()
        best, when = None, math.inf
        for u, rate in zip(self.active, self.rates):
            end = self.t_last + max(u.bits_left, 0.0) / rate if rate > 0 else math.inf
            if end < when:
                best, when = u, end
        if best is None:
            return
        env = self.host.env
        event = env.at(max(when, env.now), priority(RANK_DEVICE, best.seq))
        generation = self._generation
        event.callbacks.append(lambda _: self._finish(best, generation))

    def _finish(self, u, generation: int) -> None:
        if generation != self._generation:
            return
        self._advance()
        u.bits_left = 0.0
        if not self._sent(u):
            return
        self._leave(u)
        u.tx_end_s = self.host.env.now
        u.airtime_s = u.tx_end_s - u.tx_start_s
        if u.done is None:
            u.done = self.host.env.event()
        u.done.succeed(True)
        self._reschedule()
