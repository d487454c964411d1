"""Slotted ALOHA: random access with collisions and random backoff. Both timing models run the
same slot rule (:meth:`Aloha.contend`): the closed form of a sync round (:meth:`Aloha.schedule`, a
loop over the round's slots) and the event uplink (:class:`AlohaUplink`, one event per slot in
which somebody contends).

With k devices that always have bits to send, a slot carries a packet with probability
k p (1 - p)^(k - 1) (p: ``transmit_probability``), at most 1 / e, at p = 1 / k, for large k.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from ..des import ON_AIR, RANK_DEVICE, priority
from ..fields import ConfigError, option
from ..outcomes import Outcome
from ..plugins import PartError
from .base import AccessScheme, UplinkSchedule
from .link import Link
from .slotted import whole_slots

__all__ = ["Aloha", "AlohaOptions", "AlohaUplink"]


@dataclass(frozen=True)
class AlohaOptions:
    """Options of slotted ALOHA."""

    slot_s: float = option(1e-3, gt=0, doc="length of a slot (seconds): one packet's transmission; an upload is "
                                           "ceil(bits / (rate x slot_s)) packets at its rate on the whole band")
    transmit_probability: float = option(0.1, gt=0, lt=1, doc="probability that a device with a packet to send "
                                                              "transmits in a slot (geometric random backoff; "
                                                              "below 1, or two devices would collide forever)")


class Aloha(AccessScheme):
    """Slotted ALOHA on the whole band. Time is cut into slots of ``slot_s``; an upload is
    n = ceil(bits / (rate slot_s)) packets of one slot each (rate = B log2(1 + g P / N0), as if
    alone on the band). A device contends from the first slot boundary at or after it is ready
    (ties: in the order they became ready). In every slot each contending device transmits with
    probability p (``transmit_probability``; independent draws from the scheme's own random stream
    "aloha", in the order the devices began contending): when exactly one transmits, its packet
    gets through; when several do, they collide and every packet is lost (each sender tries again
    in a later slot, with probability p each slot: a geometric backoff). An upload ends with the
    slot that carries its last packet.

    Time on the air (and so transmit energy, P x time) is the slots a device transmitted in,
    collisions included; ``attempts`` counts them. Under a round deadline the slots that end after
    it do not happen. Packets and link errors (link.packet_bits, link.rate_bps, link.errors) are
    refused: a slot is the packet here, and collisions are its errors.
    """

    Options = AlohaOptions
    concurrent = True  # several devices may transmit in one slot (and collide)
    contention = True  # a device's slots on the air are decided as it goes, with backoff between

    def __init__(self, link: Link, slot_s: float = 1e-3, transmit_probability: float = 0.1,
                 rng: np.random.Generator | None = None):
        super().__init__(link)
        self.slot_s, self.p = float(slot_s), float(transmit_probability)
        self.rng = rng if rng is not None else np.random.default_rng(0)

    @classmethod
    def from_scenario(cls, scenario, options: AlohaOptions) -> "Aloha":
        """Slots and the transmit probability from the options; the draws from the "aloha" stream."""
        from ..rng import stream

        return cls(Link(scenario.link), options.slot_s, options.transmit_probability, stream(scenario.seed, "aloha"))

    @classmethod
    def check(cls, scenario, options: AlohaOptions) -> None:
        """No packets of the link's own: ALOHA's slots are the packets."""
        link = scenario.link
        for field, on in (("link.packet_bits", link.packet_bits is not None), ("link.rate_bps", link.rate_bps is not None),
                          ("link.errors", link.errors != "none")):
            if on:
                raise ConfigError(f"{field}: not used with link.access = 'aloha', whose slots are its packets and "
                                  "collisions its errors (leave it unset)")

    def airtime_s(self, bits, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """Each device's slots, n slot_s: its time on the air if it never collided (inf: it cannot send)."""
        return np.asarray(whole_slots(self.link.airtime_s(bits, gain, power), self.slot_s), dtype=float)

    def upload_s(self, bits: float, gain: float, power: float) -> float:
        """Not known when an upload starts: contention decides it."""
        return math.nan

    def packets(self, airtime_s: float) -> float:
        """The packets (slots) of an upload of this collision-free airtime (inf: it cannot send)."""
        return float(max(round(airtime_s / self.slot_s), 1)) if math.isfinite(airtime_s) else math.inf

    def first_slot(self, t: float) -> int:
        """The first slot starting at or after t (a start within a billionth of a slot of t counts)."""
        return max(int(math.ceil(t / self.slot_s - 1e-9)), 0)

    def slot_end(self, j: int) -> float:
        """When slot j ends."""
        return (j + 1) * self.slot_s

    def contend(self, count: int) -> list[int]:
        """One slot among ``count`` contending devices, in the order they began contending: the
        positions of those that transmit (each with probability p)."""
        return np.flatnonzero(self.rng.random(count) < self.p).tolist()

    def resolve(self, received_w: np.ndarray, devices: np.ndarray) -> tuple[list[int], int | None]:
        """One slot, the public contention contract both timing models call: the contenders, in the
        order they began contending, come as their received powers at the site (``received_w``,
        gain x power, watts) and their device ids (``devices``). Returns the positions of those that
        transmit and the position of the one whose packet gets through (None: nobody sent, or they
        collided). Slotted ALOHA: each transmits with probability p (``contend``); a packet gets
        through when it is alone. A capture rule overrides this (docs/extending.md)."""
        sending = self.contend(len(devices))
        return sending, (sending[0] if len(sending) == 1 else None)

    def _slot(self, received_w: np.ndarray, devices: np.ndarray) -> tuple[list[int], int | None]:
        """``resolve``, its answer checked where it enters the engines."""
        sending, winner = self.resolve(received_w, devices)
        sending = [int(s) for s in sending]
        if any(not 0 <= s < len(devices) for s in sending) or len(set(sending)) != len(sending):
            raise PartError(f"{type(self).__name__}.resolve: the transmitters must be distinct positions among the "
                            f"{len(devices)} contenders, got {sending!r}")
        if winner is not None and winner not in sending:
            raise PartError(f"{type(self).__name__}.resolve: the packet that gets through must be one sent in the "
                            f"slot (a position in {sending!r}) or None, got {winner!r}")
        return sending, (None if winner is None else int(winner))

    def event_uplink(self, host) -> "AlohaUplink":
        """One event per slot in which somebody contends."""
        return AlohaUplink(host, self)

    def schedule(self, ready_s: np.ndarray, airtime_s: np.ndarray, deadline_s: float | None = None, *,
                 received_w: np.ndarray | None = None, devices: np.ndarray | None = None) -> UplinkSchedule:
        """The round's slots, one after another, from the first in which somebody contends, until
        every upload is through (or the deadline), each slot settled by ``resolve``. Each device's
        time on the air and transmissions come back in ``on_air_s`` and ``attempts``.
        ``received_w`` and ``devices``: the uploads' received powers (gain x power) and device ids,
        which the sync engine passes (default: 1 W each, devices 0..k-1)."""
        k = ready_s.size
        received_w = np.ones(k) if received_w is None else np.asarray(received_w, dtype=float)
        devices = np.arange(k) if devices is None else np.asarray(devices, dtype=np.int64)
        order = np.argsort(ready_s, kind="stable")  # the order they begin contending in
        need = [self.packets(a) for a in airtime_s.tolist()]
        joining = [i for i in order.tolist() if math.isfinite(need[i])]
        join = {i: self.first_slot(float(ready_s[i])) for i in joining}
        tx_start, tx_end = np.full(k, np.nan), np.full(k, np.nan)
        attempts, arrived = np.zeros(k, dtype=np.int64), np.zeros(k, dtype=bool)
        active: list[int] = []
        nxt, j, cut = 0, 0, False
        while nxt < len(joining) or active:
            if not active:
                j = max(j, join[joining[nxt]])
            while nxt < len(joining) and join[joining[nxt]] <= j:
                i = joining[nxt]
                tx_start[i], nxt = j * self.slot_s, nxt + 1
                active.append(i)
            if deadline_s is not None and self.slot_end(j) > deadline_s:
                cut = True
                break
            sending, winner = self._slot(received_w[active], devices[active])
            for s in sending:
                attempts[active[s]] += 1
            if winner is not None:
                i = active[winner]
                need[i] -= 1
                if need[i] == 0:
                    arrived[i], tx_end[i] = True, self.slot_end(j)
                    active.remove(i)
            j += 1
        started = np.flatnonzero(~np.isnan(tx_start))
        start_order = started[np.argsort(tx_start[started], kind="stable")]
        end = deadline_s if cut or (deadline_s is not None and not arrived.all()) else \
            float(np.nanmax(tx_end, initial=-math.inf)) if k else -math.inf
        return UplinkSchedule(start_order, tx_start, arrived, end, tx_end, on_air_s=attempts * self.slot_s,
                              attempts=attempts)

    def state_dict(self) -> dict[str, Any]:
        """The contention draws' random stream."""
        return {"rng": self.rng.bit_generator.state}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore the random stream."""
        self.rng.bit_generator.state = state["rng"]


class AlohaUplink:
    """Slotted ALOHA on the event engine: the devices ready to upload contend slot by slot by the
    scheme's rule (:meth:`Aloha.contend`), one event at the end of each slot in which somebody
    contends. An update keeps its progress in its own fields (saved by checkpoints): ``packet``,
    the first slot it contends in; ``bits_left``, its packets still to get through; ``attempts``,
    its transmissions."""

    def __init__(self, host, scheme: Aloha):
        self.host, self.scheme = host, scheme
        self.contending: list = []  # in the order they began contending
        self.slot: int | None = None  # the slot whose end is armed
        self._order = 0  # the armed event's tie-break (a dispatch number), saved for a resume

    def transmit(self, u):
        """The upload of ``u`` (a SimPy generator): contend until its last packet is through.
        Returns True, or "silent" for a device that cannot send at all (zero rate)."""
        host, scheme = self.host, self.scheme
        if u.done is None:
            u.done = host.env.event()
        if u.phase != ON_AIR:
            u.phase = ON_AIR
            host.start_transmission(u)
            need = scheme.packets(float(scheme.airtime_s(u.bits, np.array([u.gain]), np.array([u.power]))[0]))
            u.attempts, u.airtime_s = 0, 0.0
            if not math.isfinite(need):
                return Outcome.SILENT
            u.bits_left, u.packet = need, scheme.first_slot(host.env.now)
            self.contending.append(u)
            self._arm()
        try:
            return (yield u.done)
        except simpy.Interrupt:
            if u in self.contending:
                self.contending.remove(u)
            u.airtime_s = u.attempts * scheme.slot_s
            raise

    def on_air_until(self, u, t: float) -> float:
        """The time on the air of an upload stopped at ``t``: the slots it transmitted in."""
        return u.attempts * self.scheme.slot_s

    def _arm(self) -> None:
        """Arm the end of the next slot in which somebody contends (nothing if one is armed)."""
        if self.slot is not None or not self.contending:
            return
        self.slot = min(u.packet for u in self.contending)
        self._order = min(u.seq for u in self.contending)
        self._schedule()

    def _schedule(self) -> None:
        event = self.host.env.at(self.scheme.slot_end(self.slot), priority(RANK_DEVICE, self._order))
        event.callbacks.append(self._resolve)

    def _resolve(self, _=None) -> None:
        j, self.slot = self.slot, None
        scheme = self.scheme
        contenders = [u for u in self.contending if u.packet <= j]
        if contenders:
            sending, winner = scheme._slot(np.array([u.gain * u.power for u in contenders]),
                                           np.array([u.device for u in contenders], dtype=np.int64))
            for s in sending:  # its time on the air so far: the slots it sent in (an in_flight row's too)
                contenders[s].attempts += 1
                contenders[s].airtime_s = contenders[s].attempts * scheme.slot_s
            if winner is not None:
                u = contenders[winner]
                u.bits_left -= 1
                if u.bits_left == 0:
                    self.contending.remove(u)
                    u.tx_end_s, u.airtime_s = scheme.slot_end(j), u.attempts * scheme.slot_s
                    u.done.succeed(True)
        for u in self.contending:  # the next slot: at least j + 1
            u.packet = max(u.packet, j + 1)
        self._arm()

    def state_dict(self) -> dict:
        """Who contends, in order, and the slot whose end is armed."""
        return {"contending": [u.seq for u in self.contending], "slot": self.slot, "order": self._order}

    def load_state(self, state: dict) -> None:
        """Restore the contention (after the engine restored the updates)."""
        host = self.host
        self.contending = [host.update(seq) for seq in state["contending"]]
        for u in self.contending:
            u.done = host.env.event()
        self.slot, self._order = state["slot"], int(state["order"])
        if self.slot is not None:
            self.slot = int(self.slot)
            self._schedule()
