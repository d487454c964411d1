"""Time division: one device at a time on the whole band, first come first served. The closed form
of a sync round (:meth:`TDMA.schedule`, Lindley's recursion) and the event uplink
(:class:`OneTransmitter`, a :class:`wirelessfl.des.Band`: one holder, first come first served) give
the same starts and ends."""
from __future__ import annotations

import math

import numpy as np

from ..des import ON_AIR, Band
from ..fields import NoOptions
from .base import DEFAULT_UPLINKS, AccessScheme, UplinkSchedule, upload_link
from .link import Link, queue, send_alone

__all__ = ["OneTransmitter", "TDMA"]


class TDMA(AccessScheme):
    """Time division: one device at a time on the whole band, first come first served in order of
    computation completion; airtime = bits / (B log2(1 + g P / N0))."""

    Options = NoOptions
    concurrent = False
    solo_uploads = True
    interferes = True

    @classmethod
    def from_scenario(cls, scenario, options) -> "TDMA":
        """One transmitter on the scenario's link."""
        return cls(Link(scenario.link))

    def upload_s(self, bits: float, gain: float, power: float) -> float:
        """One upload's airtime on the whole band (the scalar form of airtime_s)."""
        rate = math.log1p(gain * power / self.link.noise_power)
        # bits ln2 / (B ln(1 + g P / N0)), with ln2 / B first as the vector form rounds it
        return bits * (math.log(2.0) / self.link.bandwidth_hz) / rate if rate > 0 else math.inf

    def airtime_s(self, bits: float, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """Airtime of each selected device, alone on the band."""
        return self.link.airtime_s(bits, gain, power)

    def event_uplink(self, host) -> "OneTransmitter":
        """One transmitter, first come first served."""
        return OneTransmitter(host, self)

    def schedule(self, ready_s: np.ndarray, airtime_s: np.ndarray, deadline_s: float | None = None) -> UplinkSchedule:
        """The single-transmitter queue: device i is ready at ready_s[i] (its computation ended) and
        holds the band for airtime_s[i]; devices go on the air in order of readiness (ties: index
        order) as soon as the band is free. Uploads not complete by ``deadline_s`` are dropped
        (one that ends exactly then arrives; one that would start then or later never starts).

        Each start and end is the same floating-point sum an event loop with a one-slot resource
        computes (Lindley's recursion, one comparison per device).
        """
        order = np.argsort(ready_s, kind="stable")
        k = ready_s.size
        ready, air = ready_s.tolist(), airtime_s.tolist()
        if deadline_s is None:  # the usual round: everyone goes on the air in turn
            starts, free = [0.0] * k, -math.inf
            for i in order.tolist():
                starts[i] = free = ready[i] if ready[i] > free else free
                free = free + air[i]
            return UplinkSchedule(order, np.array(starts), np.ones(k, dtype=bool), free)
        tx_start, arrived = np.full(k, np.nan), np.zeros(k, dtype=bool)
        free = -math.inf  # when the band is next free
        started = 0
        for i in order.tolist():
            start = ready[i] if ready[i] > free else free
            end = start + air[i]
            if start >= deadline_s:
                break  # later devices start later still
            tx_start[i], started, free = start, started + 1, end
            arrived[i] = end <= deadline_s
            if not arrived[i]:
                break  # it holds the band past the deadline
        if not arrived.all():
            return UplinkSchedule(order[:started], tx_start, arrived, deadline_s)
        return UplinkSchedule(order, tx_start, arrived, free)


class OneTransmitter:
    """The event uplink of one transmitter at a time on the whole band, first come first served:
    devices go on the air in the order they asked (ties in the order the engine's events are
    ordered, i.e. by dispatch number) and hold the band for their time on the air (the scheme's
    ``upload_s``, or their packets' transmissions)."""

    def __init__(self, host, scheme: AccessScheme):
        self.host, self.scheme = host, scheme
        self.link = upload_link(scheme)  # the channel every upload holds, asked once
        self.band = Band(host.env)

    def transmit(self, u):
        """The upload of ``u`` (a SimPy generator): wait for the band, then hold it for the airtime."""
        host = self.host
        if u.phase != ON_AIR:  # a resumed request keeps its place
            queue(host, u)
        with self.band.request() as slot:  # released (or withdrawn) however the process leaves
            yield slot
            return (yield from send_alone(host, self.link, u))

    def state_dict(self) -> dict:
        """Nothing besides the updates' own fields (the queue is rebuilt in their order)."""
        return {}

    def load_state(self, state: dict) -> None:
        pass


DEFAULT_UPLINKS[False] = OneTransmitter
