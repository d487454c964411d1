"""Over-the-air computation: every device of a round at once, truncated channel inversion, the
server receiving the sum of the updates plus noise. The closed form of a sync round
(:meth:`AirComp.schedule`: one joint transmission) and the event uplink (:class:`JointUplink`: devices
that are ready wait and send together)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import simpy

from ..des import ON_AIR, QUEUED, RANK_DEVICE, priority
from ..fields import option
from ..outcomes import Outcome
from .base import AccessScheme, AddsUplinkNoise, AirtimePrice, SetsTransmitPower, UplinkFacts, UplinkSchedule
from .link import Link, queue

__all__ = ["AirComp", "AirCompOptions", "JointUplink"]


@dataclass(frozen=True)
class AirCompOptions:
    """Options of over-the-air aggregation."""

    truncation_gain: float = option(0.1, gt=0, doc="|h|^2 below which a device stays silent (truncated channel "
                                                   "inversion); the receive power is rho0 = link.p_max x this")
    bits_per_symbol: float = option(32.0, gt=0, doc="upload bits carried by one analog channel use (32: one "
                                                    "float32 parameter per symbol)")


class AirComp(AccessScheme, SetsTransmitPower, AddsUplinkNoise):
    """Over-the-air computation: every selected device sends at once on the whole band, and the
    server receives the sum of their signals (Zhu, Wang & Huang, 2019).

    Truncated channel inversion: a device with |h_k|^2 >= g_th (``truncation_gain``) transmits at
    power rho0 / |h_k|^2 with rho0 = p_max g_th (so no device exceeds link.p_max), and arrives at
    the server with power rho0; a device below g_th stays silent (outcome "silent", no energy).
    The server receives y = sqrt(rho0) sum_k x_k + z, z ~ N(0, N0) per channel use, and estimates
    the mean as y / (sqrt(rho0) K) over the K devices that sent: the aggregate is exact plus noise
    of variance N0 / (rho0 K^2) per entry. The devices normalise their updates to unit mean power
    per entry before sending (the server scales back), so that noise is relative to the updates'
    power: ``UplinkFacts.noise_var`` = 1 / (K^2 rho0 / N0), and the trainer adds it to the
    aggregate (weighted as the algorithm weighs the updates).

    The upload takes (bits / bits_per_symbol) / B seconds, one parameter per channel use, for
    every device at once: it does not grow with K. The transmission starts when the last sending
    device is ready; with a round deadline, devices not ready by deadline - airtime stay out.
    Under the event protocols devices that are ready wait for a joint transmission
    (:class:`JointUplink`).
    """

    Options = AirCompOptions
    concurrent = True
    over_the_air = True

    def __init__(self, link: Link, truncation_gain: float = 0.1, p_max: float = 10 ** 3.5,
                 bits_per_symbol: float = 32.0):
        super().__init__(link)
        self.truncation_gain, self.bits_per_symbol = float(truncation_gain), float(bits_per_symbol)
        self.rho0 = float(p_max) * self.truncation_gain

    @classmethod
    def from_scenario(cls, scenario, options: AirCompOptions) -> "AirComp":
        """The threshold from the options, the power limit from link.p_max."""
        return cls(Link(scenario.link), options.truncation_gain, scenario.link.p_max, options.bits_per_symbol)

    def transmit_power(self, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """rho0 / |h|^2 where |h|^2 >= g_th, else 0 (silent); the scheduler's power is not used."""
        gain = np.asarray(gain, dtype=float)
        with np.errstate(divide="ignore"):
            return np.where(gain >= self.truncation_gain, self.rho0 / gain, 0.0)

    def joint_s(self, bits):
        """The joint upload's length: (bits / bits_per_symbol) / B, one parameter per channel use."""
        return np.asarray(bits, dtype=float) / self.bits_per_symbol / self.link.bandwidth_hz

    def airtime_s(self, bits, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """The joint upload's length for a device that sends (power > 0); 0 for a silent one."""
        return np.where(np.asarray(power, dtype=float) > 0, self.joint_s(bits), 0.0)

    def upload_s(self, bits: float, gain: float, power: float) -> float:
        """Not defined alone: the devices send together."""
        return math.nan

    def event_uplink(self, host) -> "JointUplink":
        """Devices that are ready wait and send together."""
        return JointUplink(host, self)

    def pricing(self, bits: float, k: int) -> AirtimePrice:
        """One joint upload of fixed length, whatever the gain and power (those are the inversion's)."""
        return AirtimePrice(self.link.bandwidth_hz, self.link.noise_power, float(self.joint_s(bits)))

    def schedule(self, ready_s: np.ndarray, airtime_s: np.ndarray, deadline_s: float | None = None) -> UplinkSchedule:
        """One joint transmission of the devices that send (airtime > 0): it starts when the last of
        them is ready (with a deadline: the last of those ready by deadline - airtime) and lasts
        their airtime. A silent device never goes on the air and does not arrive."""
        k = ready_s.size
        sending = airtime_s > 0
        if deadline_s is not None:
            sending &= ready_s + airtime_s <= deadline_s
        tx_start, arrived = np.full(k, np.nan), sending.copy()
        order = np.flatnonzero(sending)[np.argsort(ready_s[sending], kind="stable")]
        if not sending.any():
            end = float(ready_s.max(initial=-math.inf))
        else:
            start = float(ready_s[sending].max())
            tx_start[sending] = start
            end = start + float(airtime_s[sending].max())
        if deadline_s is not None and ((airtime_s > 0) & ~sending).any():
            end = deadline_s  # someone who would have sent missed it: the round runs to the deadline
        return UplinkSchedule(order, tx_start, arrived, end)

    def uplink_facts(self, devices: np.ndarray, gains: np.ndarray, power: np.ndarray,
                     arrived: np.ndarray) -> UplinkFacts:
        """The aggregate's noise: 1 / (K^2 rho0 / N0) relative to the updates' power (K senders)."""
        k = int(np.count_nonzero(arrived))
        noise = self.link.noise_power / (self.rho0 * k * k) if k else 0.0
        return UplinkFacts(devices, gains, power, arrived, noise)


class JointUplink:
    """Over-the-air computation on the event engine (wirelessfl.access.AirComp): the server receives
    the sum of the updates sent at once, so devices that are ready to upload wait and send together.

    A joint transmission starts when ``group`` devices wait (the protocol's ``per_aggregation``:
    FedBuff's buffer K, 1 for FedAsync, semi_sync's first_k), or when no device in flight could still
    join (every other one waits or is on the air), and only when the previous joint transmission has
    ended. Each sender inverts its channel at the gain drawn as the transmission starts (a round's
    gain under semi_sync): power rho0 / |h|^2 above the truncation threshold; below it the device stays
    silent, its update is lost (outcome "silent") and it never goes on the air. The transmission lasts
    the scheme's joint length, (bits / bits_per_symbol) / B, however many send.
    """

    def __init__(self, host, scheme: AirComp):
        self.host, self.scheme = host, scheme
        self.group = float(host.per_aggregation)
        self.waiting: list = []  # ready, in the order they became ready
        self.on_air: list = []   # the joint transmission under way
        self.end_s = math.nan

    def transmit(self, u):
        """The upload of ``u`` (a SimPy generator): wait for a joint transmission, then send in it.
        Returns True when it arrived, "silent" when its channel was below the threshold."""
        if u.done is None:
            u.done = self.host.env.event()
        if u.phase < QUEUED:
            queue(self.host, u)
            self.waiting.append(u)
            self.maybe_start()
        try:
            return (yield u.done)
        except simpy.Interrupt:
            if u in self.waiting:
                self.waiting.remove(u)
            elif u in self.on_air:
                self.on_air.remove(u)
            self.maybe_start()
            raise

    def maybe_start(self) -> None:
        """Start a joint transmission of the waiting devices if the rule above says so."""
        if self.on_air or not self.waiting:
            return
        if len(self.waiting) < self.group and any(u.phase < QUEUED and not u.report
                                                  for u in self.host.in_flight()):
            return
        host = self.host
        now = host.env.now
        group, self.waiting = self.waiting, []
        length = float(self.scheme.joint_s(group[0].bits))
        for u in group:
            if u.gain != u.gain:
                u.gain = host.draw_gain(u.device)
            u.power = float(self.scheme.transmit_power(np.array([u.gain]), np.array([u.power]))[0])
            u.attempts = 1 if u.power > 0 else 0
            if u.power > 0:
                u.phase, u.airtime_s = ON_AIR, length
                host.start_transmission(u)  # on the air now, with its gain and the joint airtime
                self.on_air.append(u)
            else:
                u.airtime_s = 0.0
                u.done.succeed(Outcome.SILENT)
        if self.on_air:
            self._arm(now + length)
        else:
            self.maybe_start()

    def _arm(self, end_s: float) -> None:
        self.end_s = end_s
        event = self.host.env.at(end_s, priority(RANK_DEVICE, min(u.seq for u in self.on_air)))
        event.callbacks.append(self._finish)

    def _finish(self, _=None) -> None:
        group, self.on_air = self.on_air, []
        for u in group:
            u.tx_end_s = self.end_s
            u.done.succeed(True)
        self.end_s = math.nan
        self.maybe_start()

    def state_dict(self) -> dict:
        """Who waits, who is on the air and when that joint transmission ends."""
        return {"waiting": [u.seq for u in self.waiting], "on_air": [u.seq for u in self.on_air],
                "end_s": self.end_s}

    def load_state(self, state: dict) -> None:
        """Restore the waiting devices and the joint transmission (after the engine restored the updates)."""
        host, env = self.host, self.host.env
        self.waiting = [host.update(seq) for seq in state["waiting"]]
        self.on_air = [host.update(seq) for seq in state["on_air"]]
        for u in self.waiting + self.on_air:
            u.done = env.event()
        if self.on_air:
            self._arm(float(state["end_s"]))
