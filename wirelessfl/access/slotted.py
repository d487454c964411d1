"""Slotted TDMA: one transmitter at a time in whole slots of fixed frames. The closed form of a sync
round (:meth:`SlottedTDMA.schedule`) and the event uplink (:class:`SlottedUplink`) form the same
queue on slot boundaries."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..des import ON_AIR, RANK_DEVICE, priority
from ..fields import ConfigError, option
from .base import AirtimePrice, UplinkSchedule
from .link import Link, queue, send_packets
from .tdma import TDMA, OneTransmitter

__all__ = ["SlottedOptions", "SlottedTDMA", "SlottedUplink", "whole_slots"]


def whole_slots(seconds, slot_s: float):
    """ceil(seconds / slot_s) slot_s, at least one slot (inf where it cannot send); a number or an array."""
    seconds = np.asarray(seconds, dtype=float)
    with np.errstate(invalid="ignore"):
        n = np.maximum(np.ceil(seconds / slot_s - 1e-9), 1.0)
    held = np.where(np.isfinite(seconds), n * slot_s, np.inf)
    return float(held) if held.ndim == 0 else held


@dataclass(frozen=True)
class SlottedOptions:
    """Options of slotted TDMA."""

    slot_s: float = option(1e-3, gt=0, doc="length of a slot (seconds)")
    slots_per_frame: int = option(10, ge=1, doc="slots in a frame")
    guard_s: float = option(0.0, ge=0, doc="time at the start of every frame in which nobody sends")


class SlottedTDMA(TDMA):
    """TDMA in slots. Time is cut into frames of guard_s + S slot_s seconds (S = slots_per_frame):
    slot j is the (j mod S)-th slot of frame j // S and starts at (j // S)(guard_s + S slot_s) +
    guard_s + (j mod S) slot_s. An upload needs n = ceil(bits / (rate slot_s)) slots (rate = B log2(1 +
    g P / N0)); it holds n consecutive slots, from the first free slot boundary at or after the
    moment it is ready, and across frames if it must (pausing over a guard). Its time on the air is
    n slot_s; it ends when its last slot does."""

    Options = SlottedOptions
    interferes = False  # interference timed in slots is not modelled (TDMA's continuous queue would ignore them)

    def __init__(self, link: Link, slot_s: float, slots_per_frame: int, guard_s: float = 0.0):
        super().__init__(link)
        self.slot_s, self.slots_per_frame, self.guard_s = float(slot_s), int(slots_per_frame), float(guard_s)
        self.frame_s = self.guard_s + self.slots_per_frame * self.slot_s

    @classmethod
    def from_scenario(cls, scenario, options: SlottedOptions) -> "SlottedTDMA":
        """Slots and frames from the options, on the scenario's link."""
        return cls(Link(scenario.link), options.slot_s, options.slots_per_frame, options.guard_s)

    @classmethod
    def check(cls, scenario, options: SlottedOptions) -> None:
        """A slot must not be vanishingly short against a frame (slot counts stay exact integers)."""
        if options.slot_s * 1e12 < options.guard_s:
            raise ConfigError(f"link.guard_s = {options.guard_s:g}: more than 1e12 slots of link.slot_s = "
                              f"{options.slot_s:g}")

    def pricing(self, bits: float, k: int) -> AirtimePrice:
        """The whole band less the guards' share of each frame."""
        usable = self.slots_per_frame * self.slot_s / self.frame_s
        return AirtimePrice(self.link.bandwidth_hz * usable, self.link.noise_power)

    def slot_start(self, j: int) -> float:
        """When slot j starts."""
        frame, s = divmod(int(j), self.slots_per_frame)
        return frame * self.frame_s + self.guard_s + s * self.slot_s

    def slot_end(self, j: int, n: int) -> float:
        """When n slots from slot j end (the end of slot j + n - 1)."""
        return self.slot_start(j + n - 1) + self.slot_s

    def next_slot(self, t: float) -> int:
        """The first slot starting at or after t (a start within a billionth of a slot of t counts)."""
        frame = max(int(math.floor(t / self.frame_s)), 0)
        within = t - frame * self.frame_s - self.guard_s
        s = max(int(math.ceil(within / self.slot_s - 1e-9)), 0)
        j = frame * self.slots_per_frame + min(s, self.slots_per_frame)
        tolerance = 1e-9 * self.slot_s
        while self.slot_start(j) < t - tolerance:
            j += 1
        while j > 0 and self.slot_start(j - 1) >= t - tolerance:
            j -= 1
        return j

    def on_air_s(self, seconds):
        """Whole slots: ceil(seconds / slot_s) slot_s, at least one (inf where it cannot send)."""
        return whole_slots(seconds, self.slot_s)

    def slots(self, airtime_s: float) -> int:
        """The slots an upload of this airtime holds (airtime_s returns whole slots)."""
        return max(int(round(airtime_s / self.slot_s)), 1)

    def airtime_s(self, bits, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """n slot_s for each device, n = ceil(bits / (rate slot_s)) (inf where it cannot send)."""
        return np.asarray(self.on_air_s(self.link.airtime_s(bits, gain, power)), dtype=float)

    def upload_s(self, bits: float, gain: float, power: float) -> float:
        """One upload's whole slots."""
        return float(self.on_air_s(super().upload_s(bits, gain, power)))

    def event_uplink(self, host) -> "SlottedUplink":
        """One transmitter whose uploads start on slot boundaries and hold whole slots."""
        return SlottedUplink(host, self)

    def schedule(self, ready_s: np.ndarray, airtime_s: np.ndarray, deadline_s: float | None = None) -> UplinkSchedule:
        """TDMA's queue on slot boundaries: each upload starts at the first free slot at or after it
        is ready and holds its slots; the deadline's rule is TDMA's (an upload that would start at
        or after it never starts; one that ends after it is dropped and holds the band till then)."""
        order = np.argsort(ready_s, kind="stable")
        k = ready_s.size
        ready, air = ready_s.tolist(), airtime_s.tolist()
        tx_start, tx_end, arrived = np.full(k, np.nan), np.full(k, np.nan), np.zeros(k, dtype=bool)
        free, end, started = 0, -math.inf, 0
        for i in order.tolist():
            j = max(self.next_slot(ready[i]), free)
            start = self.slot_start(j)
            if deadline_s is not None and start >= deadline_s:
                break
            n = self.slots(air[i])
            end, free = self.slot_end(j, n), j + n
            tx_start[i], started = start, started + 1
            arrived[i] = deadline_s is None or end <= deadline_s
            if not arrived[i]:
                break
            tx_end[i] = end
        if arrived.all():
            return UplinkSchedule(order, tx_start, arrived, end if k else -math.inf, tx_end)
        return UplinkSchedule(order[:started], tx_start, arrived, deadline_s, tx_end)


class SlottedUplink(OneTransmitter):
    """One transmitter in slots (wirelessfl.access.SlottedTDMA): a device that gets the band waits
    for the first free slot boundary, then holds whole slots; the same queue as the closed form."""

    def __init__(self, host, scheme: "SlottedTDMA"):
        super().__init__(host, scheme)
        self.slots = scheme
        self.free = 0  # the first slot no upload holds

    def transmit(self, u):
        """The upload of ``u`` (a SimPy generator): the band, then the next free slot, then its slots."""
        host, slots = self.host, self.slots
        env = host.env
        if u.phase != ON_AIR:  # a resumed request keeps its place
            queue(host, u)
        with self.band.request() as slot:
            yield slot
            if u.phase != ON_AIR:
                j = max(slots.next_slot(env.now), self.free)
                start = slots.slot_start(j)
                if start > env.now:  # holding the band until its slot begins
                    yield env.at(start, priority(RANK_DEVICE, u.seq))
                u.phase = ON_AIR
                host.start_transmission(u)
                u.tx_start_s = start  # on the slot's boundary, as the closed form has it (now may be a rounding before)
                self.free = j if host.packets_on else j + slots.slots(u.airtime_s)
            if host.packets_on:  # its packets take whole slots as they go
                return (yield from send_packets(host, self.link, u, self))
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
