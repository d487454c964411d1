"""The shared uplink of the event engine: how updates that are ready to upload get the band.

- :class:`TdmaUplink`: one transmitter, a ``simpy.Resource`` of capacity 1. Devices go on the air in
  the order they asked (first come, first served; ties in the order the engine's events are ordered,
  i.e. by dispatch number) and hold the whole band for their airtime bits / (B log2(1 + g P / N0)).
- :class:`SharedBand` (FDMA, OFDMA): every device that is ready transmits at once, and the band is
  shared among the devices on the air *at each moment*. Under FDMA, with k of them on the air,
  device i sends at (B / k) log2(1 + g_i P_i k / N0) bit/s (its sub-band of B / k carries noise
  N0 / k); under OFDMA at the rate its blocks give it (wirelessfl.access.OFDMA). When a device joins
  or leaves, every rate changes from that instant on and each transmission keeps the bits it has
  left. An upload ends when its last bit is sent. This is processor sharing with rates that depend
  on each device's SNR; a device alone on the band gets all of it.

- :class:`JointUplink` (AirComp): devices ready to upload wait, then send together in one joint
  transmission whose length does not depend on how many join (see the class).

All of them hand an update's phase and times back on the update itself (``tx_start_s``, ``tx_end_s``,
``airtime_s``), so a checkpoint taken between events can rebuild the queue exactly.
"""
from __future__ import annotations

import math

import numpy as np
import simpy

from ..access import Dedicated, SlottedTDMA, share_snr
from .clock import RANK_DEVICE, priority
from .flight import ON_AIR, QUEUED

__all__ = ["IndependentUplink", "JointUplink", "SharedBand", "SlottedUplink", "TdmaUplink", "default_uplink"]



class TdmaUplink:
    """One transmitter at a time on the whole band, first come first served."""

    concurrent = False

    def __init__(self, engine):
        self.engine = engine
        self.band = simpy.Resource(engine.env, capacity=1)

    def transmit(self, u):
        """The upload of ``u`` (a SimPy generator): wait for the band, then hold it for the airtime."""
        engine = self.engine
        env = engine.env
        self._queue(u)
        with self.band.request() as slot:  # released (or withdrawn) however the process leaves
            yield slot
            if u.phase != ON_AIR:  # a resumed upload that was on the air already has its times
                u.phase = ON_AIR
                engine.start_transmission(u)
            if engine.packets_on:
                return (yield from send_packets(engine, u))
            u.attempts = 1
            end = u.tx_start_s + u.airtime_s
            yield env.at(end, priority(RANK_DEVICE, u.seq))
            u.tx_end_s = end
        return True

    def _queue(self, u) -> None:
        """``u`` asks for the band (a resumed request keeps its place)."""
        if u.phase != ON_AIR:
            queue(self.engine, u)

    def state_dict(self) -> dict:
        return {}

    def load_state(self, state: dict) -> None:
        pass


def queue(engine, u) -> None:
    """``u`` waits for the uplink: phase QUEUED and its place in the engine's queue order, which a
    resume rebuilds the processes in (a resumed request keeps its place)."""
    u.phase = QUEUED
    if u.queue_seq < 0:
        engine.queue_seq += 1
        u.queue_seq = engine.queue_seq


def send_packets(engine, u, slotted=None):
    """The upload of ``u`` in packets on a channel it has to itself (the band it holds under TDMA,
    its own sub-band under dedicated; the access scheme's ``upload_link``), a SimPy generator: each
    transmission at the fixed rate or its channel's capacity, a failed packet sent again (each retry
    at the channel of its own moment, or at the round's gain) up to link.max_attempts times. Returns
    whether it got through. ``slotted``: the SlottedUplink whose slots the transmissions take, one
    after another, each in whole slots (default: each from now, for its seconds)."""
    env, rng = engine.env, engine.streams["link"]
    link = engine.parts.access.upload_link()
    sizes = link.packet_sizes(u.bits)
    prio = priority(RANK_DEVICE, u.seq)
    if u.attempts == 0:
        u.airtime_s = 0.0  # the time on the air, summed over the transmissions
    while u.packet < len(sizes):
        if u.attempt_end_s != u.attempt_end_s:  # a transmission begins (a resumed one is under way)
            if u.attempts > 0 and not u.round_gain:
                u.gain = engine.draw_gain(u.device)
            took, ok = link.attempt(sizes[u.packet], u.gain, u.power,
                                    rng.random() if link.errors == "waterfall" else 1.0)
            start, end = (env.now, env.now + took) if slotted is None else slotted.window(env.now, took)
            u.attempt_start_s, u.attempt_end_s, u.attempt_ok = start, end, ok
            u.attempts, u.tries = u.attempts + 1, u.tries + 1
        yield env.at(u.attempt_end_s, prio)
        u.airtime_s += u.attempt_end_s - u.attempt_start_s if slotted is None else \
            slotted.held(u.attempt_start_s, u.attempt_end_s)
        u.attempt_end_s = math.nan
        if u.attempt_ok:
            u.packet, u.tries = u.packet + 1, 0
        elif u.tries >= link.max_attempts:
            return False
    u.tx_end_s = env.now
    return True


class SharedBand:
    """Devices on the air at once, sharing the band (FDMA, OFDMA): the access scheme's rates for the
    devices on the air (``rates_bps``), worked out again whenever one joins or leaves (see the
    module docstring).

    Packets (link.packet_bits, link.rate_bps, link.errors): a device sends its packets one after
    another on its share, each at its rate there (or at the fixed rate); whether a transmission gets
    through is drawn as it begins, at the capacity and the SNR of the device's share at that moment
    (``access.share_snr``: FDMA's g P k / N0), and a failed one is sent again at once, at the channel
    of its own moment, up to link.max_attempts times; an upload whose packet fails every time leaves
    the band, lost."""

    concurrent = True

    def __init__(self, engine):
        self.engine = engine
        self.scheme = engine.parts.access
        self.link = self.scheme.link
        self.packets = engine.packets_on
        self.active: list = []  # updates on the air, in the order they joined
        self.fading: dict[int, np.ndarray] = {}  # an upload's block factors, drawn as it went on the air
        self.t_last = engine.env.now  # when bits_left was last brought up to date
        self.rates: list[float] = []  # of the active updates, since t_last
        self.capacity: list[float] = []  # their shares' capacities (the rates, but at a fixed rate)
        self._generation = 0  # a wake-up of an older generation is out of date

    def transmit(self, u):
        """The upload of ``u`` (a SimPy generator): on the air at once, done when its bits are sent.
        Returns True, or False when a packet failed link.max_attempts times."""
        env = self.engine.env
        if u.done is None:
            u.done = env.event()
        if u.phase != ON_AIR:
            u.phase = ON_AIR
            self.engine.start_transmission(u)
            u.bits_left, u.attempts = float(u.bits), 1
            if self.packets:
                u.attempts, u.packet, u.tries = 0, 0, 0
                u.bits_left = self.link.packet_size(u.bits, 0)
            fading = self.scheme.block_fading(1)
            if fading is not None:
                self.fading[u.seq] = fading[0]
            self._advance()
            self.active.append(u)
            self._reschedule()
            if self.packets:
                self._begin_attempt(u)
        try:
            return (yield u.done)
        except simpy.Interrupt:
            self._advance()
            self._leave(u)
            self._reschedule()
            raise

    def _leave(self, u) -> None:
        self.active.remove(u)
        self.fading.pop(u.seq, None)

    def _advance(self) -> None:
        now = self.engine.env.now
        dt = now - self.t_last
        if dt > 0:
            for u, rate in zip(self.active, self.rates):
                u.bits_left -= rate * dt
        self.t_last = now

    def _reschedule(self) -> None:
        """The rates of the devices on the air now; wake at the next end of an upload at them."""
        self._generation += 1
        active = self.active
        if not active:
            self.rates = []
            return
        fading = np.array([self.fading[u.seq] for u in active]) if self.fading else None
        self.rates = self.capacity = self.scheme.rates_bps(np.array([u.gain for u in active]),
                                                           np.array([u.power for u in active]), fading).tolist()
        if self.packets and self.link.fixed_rate_bps is not None:  # they send at the rate, whatever their share
            self.rates = [self.link.fixed_rate_bps] * len(active)
        best, when = None, math.inf
        for u, rate in zip(active, self.rates):
            end = self.t_last + max(u.bits_left, 0.0) / rate if rate > 0 else math.inf
            if end < when:
                best, when = u, end
        if best is None:
            return
        env = self.engine.env
        event = env.at(max(when, env.now), priority(RANK_DEVICE, best.seq))
        generation = self._generation
        event.callbacks.append(lambda _: self._finish(best, generation))

    def _begin_attempt(self, u) -> None:
        """A transmission of ``u``'s packet begins now: whether it gets through is drawn at its share's
        capacity and SNR at this moment (from the "link" stream, waterfall errors only)."""
        capacity = self.capacity[self.active.index(u)]
        snr = float(share_snr(capacity, self.link.bandwidth_hz / len(self.active)))
        rng = self.engine.streams["link"]
        _, u.attempt_ok = self.link.attempt_at(u.bits_left, capacity, snr,
                                               rng.random() if self.link.errors == "waterfall" else 1.0)
        u.attempts, u.tries, u.attempt_start_s = u.attempts + 1, u.tries + 1, self.engine.env.now

    def _finish(self, u, generation: int) -> None:
        if generation != self._generation:
            return
        self._advance()
        u.bits_left = 0.0
        if self.packets and not self._packet_done(u):
            return
        self._leave(u)
        u.tx_end_s = self.engine.env.now
        u.airtime_s = u.tx_end_s - u.tx_start_s
        u.done.succeed(True)
        self._reschedule()

    def _packet_done(self, u) -> bool:
        """``u``'s transmission ended: True when its last packet is through; otherwise its next
        transmission begins (the next packet, or this one again), or, after link.max_attempts failures,
        it leaves the band lost (False is handed back to the device)."""
        if u.attempt_ok:
            u.packet, u.tries = u.packet + 1, 0
            if u.packet == self.link.packet_count(u.bits):
                return True
        elif u.tries >= self.link.max_attempts:
            self._leave(u)
            u.airtime_s = self.engine.env.now - u.tx_start_s
            u.done.succeed(False)
            self._reschedule()
            return False
        u.bits_left = self.link.packet_size(u.bits, u.packet)
        if not u.round_gain:  # each transmission at the channel of its own moment
            u.gain = self.engine.draw_gain(u.device)
        self._reschedule()
        self._begin_attempt(u)
        return False

    def state_dict(self) -> dict:
        """The order of the uploads on the air, their block factors and when their bits were last counted."""
        return {"active": [u.seq for u in self.active], "t_last": self.t_last,
                "fading": {seq: f.tolist() for seq, f in self.fading.items()}}

    def load_state(self, state: dict) -> None:
        """Restore the uploads on the air (after the engine restored the updates)."""
        flying = self.engine.flying
        self.active = [flying[seq] for seq in state["active"]]
        self.fading = {int(seq): np.array(f) for seq, f in state.get("fading", {}).items()}
        self.t_last = float(state["t_last"])
        self._reschedule()


class SlottedUplink(TdmaUplink):
    """One transmitter in slots (wirelessfl.access.SlottedTDMA): a device that gets the band waits
    for the first free slot boundary, then holds whole slots; the same queue as the closed form."""

    def __init__(self, engine):
        super().__init__(engine)
        self.slots = engine.parts.access
        self.free = 0  # the first slot no upload holds

    def transmit(self, u):
        """The upload of ``u`` (a SimPy generator): the band, then the next free slot, then its slots."""
        engine, slots = self.engine, self.slots
        env = engine.env
        self._queue(u)
        with self.band.request() as slot:
            yield slot
            if u.phase != ON_AIR:
                j = max(slots.next_slot(env.now), self.free)
                start = slots.slot_start(j)
                if start > env.now:  # holding the band until its slot begins
                    yield env.at(start, priority(RANK_DEVICE, u.seq))
                u.phase = ON_AIR
                engine.start_transmission(u)
                self.free = j if engine.packets_on else j + slots.slots(u.airtime_s)
            if engine.packets_on:  # its packets take whole slots as they go
                return (yield from send_packets(engine, u, self))
            u.attempts = 1
            end = slots.slot_end(self.free - slots.slots(u.airtime_s), slots.slots(u.airtime_s))
            yield env.at(end, priority(RANK_DEVICE, u.seq))
            u.tx_end_s = end
        return True

    def window(self, now: float, seconds: float) -> tuple[float, float]:
        """A packet's transmission of ``seconds`` in whole slots from the first free one: (start, end)."""
        slots = self.slots
        j = max(slots.next_slot(now), self.free)
        n = slots.slots(slots.on_air_s(seconds))
        self.free = j + n
        return slots.slot_start(j), slots.slot_end(j, n)

    def held(self, start: float, end: float) -> float:
        """The slots' time between a transmission's start and end (frame guards not counted)."""
        slots = self.slots
        return (slots.next_slot(end) - slots.next_slot(start)) * slots.slot_s

    def state_dict(self) -> dict:
        return {"free": self.free}

    def load_state(self, state: dict) -> None:
        self.free = int(state["free"])


class IndependentUplink:
    """Every upload on its own sub-band (``access.Dedicated``): it starts at once and lasts its airtime,
    whoever else is sending."""

    concurrent = False

    def __init__(self, engine):
        self.engine = engine

    def transmit(self, u):
        """The upload of ``u`` (a SimPy generator): on the air at once for its airtime."""
        engine = self.engine
        if u.phase != ON_AIR:  # a resumed upload that was on the air already has its times
            u.phase = ON_AIR
            engine.start_transmission(u)
        if engine.packets_on:  # on its own sub-band
            return (yield from send_packets(engine, u))
        u.attempts = 1
        end = u.tx_start_s + u.airtime_s
        yield engine.env.at(end, priority(RANK_DEVICE, u.seq))
        u.tx_end_s = end
        return True

    def state_dict(self) -> dict:
        return {}

    def load_state(self, state: dict) -> None:
        pass


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

    concurrent = True

    def __init__(self, engine):
        self.engine = engine
        self.scheme = engine.parts.access
        self.group = float(engine.protocol.per_aggregation)
        self.waiting: list = []  # ready, in the order they became ready
        self.on_air: list = []   # the joint transmission under way
        self.end_s = math.nan

    def transmit(self, u):
        """The upload of ``u`` (a SimPy generator): wait for a joint transmission, then send in it.
        Returns True when it arrived, "silent" when its channel was below the threshold."""
        if u.done is None:
            u.done = self.engine.env.event()
        if u.phase < QUEUED:
            queue(self.engine, u)
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
                                                  for u in self.engine.flying.values()):
            return
        engine = self.engine
        now = engine.env.now
        group, self.waiting = self.waiting, []
        length = float(self.scheme.joint_s(group[0].bits))
        for u in group:
            if u.gain != u.gain:
                u.gain = engine.draw_gain(u.device)
            u.power = float(self.scheme.transmit_power(np.array([u.gain]), np.array([u.power]))[0])
            u.attempts = 1 if u.power > 0 else 0
            if u.power > 0:
                u.phase, u.tx_start_s, u.airtime_s = ON_AIR, now, length
                self.on_air.append(u)
            else:
                u.airtime_s = 0.0
                u.done.succeed("silent")
        if self.on_air:
            self._arm(now + length)
        else:
            self.maybe_start()

    def _arm(self, end_s: float) -> None:
        self.end_s = end_s
        event = self.engine.env.at(end_s, priority(RANK_DEVICE, min(u.seq for u in self.on_air)))
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
        flying, env = self.engine.flying, self.engine.env
        self.waiting = [flying[seq] for seq in state["waiting"]]
        self.on_air = [flying[seq] for seq in state["on_air"]]
        for u in self.waiting + self.on_air:
            u.done = env.event()
        if self.on_air:
            self._arm(float(state["end_s"]))


def default_uplink(access, engine):
    """The uplink of an access scheme that brings none (``AccessScheme.event_uplink`` is None): one
    transmitter whose uploads start on slot boundaries for slotted TDMA, every upload on its own for
    dedicated sub-bands, joint transmissions over the air, the shared band for concurrent schemes,
    else one transmitter."""
    if access.over_the_air:
        return JointUplink(engine)
    if isinstance(access, SlottedTDMA):
        return SlottedUplink(engine)
    if isinstance(access, Dedicated):
        return IndependentUplink(engine)
    return SharedBand(engine) if access.concurrent else TdmaUplink(engine)
