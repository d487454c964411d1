"""Frequency division: the band split among the devices sending. The closed form of a sync round
(:meth:`FDMA.schedule`: the split fixed for the round) and the event uplink (:class:`SharedBand`:
the band split again whenever a device joins or leaves it), which OFDMA shares with its own rates.

On the shared band every device that is ready transmits at once, and the band is shared among the
devices on the air *at each moment*. Under FDMA, with k of them on the air, device i sends at
(B / k) log2(1 + g_i P_i k / N0) bit/s (its sub-band of B / k carries noise N0 / k); under OFDMA
at the rate its blocks give it (wirelessfl.access.ofdma). When a device joins or leaves, every rate
changes from that instant on and each transmission keeps the bits it has left. An upload ends when
its last bit is sent. This is processor sharing with rates that depend on each device's SNR; a
device alone on the band gets all of it."""
from __future__ import annotations

import math

import numpy as np

from ..capabilities import provides
from ..des import ON_AIR
from ..fields import NoOptions
from .base import DEFAULT_UPLINKS, AccessScheme, AirtimePrice, DrawsBlockFading, UplinkSchedule, block_fading
from .link import Link, share_snr
from .on_air import RatesOnTheAir

__all__ = ["FDMA", "SharedBand"]


class FDMA(AccessScheme):
    """Frequency division: the k selected devices each get B / k and transmit at once.

    Thermal noise has a flat spectral density, so a sub-band of B / k carries noise N0 / k:
    rate = (B / k) log2(1 + g P k / N0) and airtime = bits / rate. Under sync the split is fixed for
    the round (a device that finishes early does not hand its sub-band to the others); each device
    starts as soon as its computation ends. Under the event protocols the band is re-split among the
    devices on the air as they come and go (:class:`SharedBand`).
    """

    Options = NoOptions
    concurrent = True
    interferes = True

    @classmethod
    def from_scenario(cls, scenario, options) -> "FDMA":
        """The scenario's band, split among the devices sending."""
        return cls(Link(scenario.link))

    def upload_s(self, bits: float, gain: float, power: float) -> float:
        """Not known when an upload starts: the band's share changes as others come and go."""
        return math.nan

    def pricing(self, bits: float, k: int) -> AirtimePrice:
        """A share B / k of the band with its noise N0 / k (on average, ofdma's equal shares too)."""
        k = max(int(k), 1)
        return AirtimePrice(self.link.bandwidth_hz / k, self.link.noise_power / k)

    def rates_bps(self, gain: np.ndarray, power: np.ndarray, fading: np.ndarray | None = None,
                  interference: np.ndarray | None = None) -> np.ndarray:
        """The rate of each of the k = len(gain) devices sending at once, on B / k each;
        ``interference``: the power other cells' uploads put into the band at the site ((1,): spread
        over the band, as ``emitted`` gives it), which adds to the noise: SINR = g P k / (N0 + I)."""
        gain, power = np.broadcast_arrays(np.asarray(gain, dtype=float), np.asarray(power, dtype=float))
        k = max(gain.size, 1)
        noise = self.link.noise_power if interference is None else self.link.noise_power + float(interference[0])
        snr = gain * power * k / noise
        return self.link.rate_at(snr, self.link.bandwidth_hz / k)  # log1p: exact also for snr < 1e-16

    def share_snrs(self, gain: np.ndarray, power: np.ndarray, fading: np.ndarray | None = None) -> np.ndarray:
        """The SINR of each of the k devices sending at once on its share B / k: g P k / N0 (an MCS
        rate chooses its MCS and draws its block errors at it)."""
        gain, power = np.broadcast_arrays(np.asarray(gain, dtype=float), np.asarray(power, dtype=float))
        return gain * power * max(gain.size, 1) / self.link.noise_power

    def emitted(self, gain: np.ndarray, power: np.ndarray, fading: np.ndarray | None = None) -> np.ndarray:
        """What each of the k devices sending at once puts into the band, as other cells' sites hear
        it ((k, 1)): its power, spread over the band (its sub-band of B / k lies anywhere in it, so on
        average every part of the band carries 1 / k of each device's power per B / k)."""
        return np.asarray(power, dtype=float).reshape(-1, 1) * np.ones((np.size(gain), 1))

    def airtime_s(self, bits: float, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """Airtime of each of the k = len(gain) selected devices at its rate on its share of the band."""
        rate = self.rates_bps(gain, power, block_fading(self, np.size(gain)))
        with np.errstate(divide="ignore"):
            return bits / rate

    def schedule(self, ready_s: np.ndarray, airtime_s: np.ndarray, deadline_s: float | None = None) -> UplinkSchedule:
        """Every device on its own sub-band from the moment it is ready; see TDMA.schedule for the
        deadline's rule."""
        order = np.argsort(ready_s, kind="stable")
        end = ready_s + airtime_s
        if deadline_s is None:
            return UplinkSchedule(order, ready_s.copy(), np.ones(ready_s.size, dtype=bool),
                                  float(end.max(initial=-math.inf)))
        started = ready_s < deadline_s
        arrived = started & (end <= deadline_s)
        if arrived.all():
            return UplinkSchedule(order, ready_s.copy(), arrived, float(end.max(initial=-math.inf)))
        return UplinkSchedule(order[started[order]], np.where(started, ready_s, np.nan), arrived, deadline_s)

    def event_uplink(self, host) -> "SharedBand":
        """The band shared among the devices on the air at each moment."""
        return SharedBand(host, self)


class SharedBand(RatesOnTheAir):
    """Devices on the air at once, sharing the band (FDMA, OFDMA): the access scheme's rates for the
    devices on the air (``rates_bps``), worked out again whenever one joins or leaves (see the
    module docstring).

    Packets (link.packet_bits, link.rate_bps, link.errors): a device sends its packets one after
    another on its share, each at its rate there (or at the fixed rate); whether a transmission gets
    through is drawn as it begins, at the capacity and the SNR of the device's share at that moment
    (``access.share_snr``: FDMA's g P k / N0), and a failed one is sent again at once, at the channel
    of its own moment, up to link.max_attempts times; an upload whose packet fails every time leaves
    the band, lost."""

    def __init__(self, host, scheme: AccessScheme):
        super().__init__(host)
        self.scheme, self.link = scheme, scheme.link
        self.packets = host.packets_on
        self.draws = provides(scheme, DrawsBlockFading)  # asked once: an upload goes on the air many times a run
        self.fading: dict[int, np.ndarray] = {}  # an upload's block factors, drawn as it went on the air
        self.capacity: list[float] = []  # the active shares' capacities (the rates, but at a fixed rate)

    def transmit(self, u):
        """The upload of ``u`` (a SimPy generator): on the air at once, done when its bits are sent.
        Returns True, or False when a packet failed link.max_attempts times."""
        env = self.host.env
        if u.done is None:
            u.done = env.event()
        if u.phase != ON_AIR:
            u.phase = ON_AIR
            self.host.start_transmission(u)
            u.bits_left, u.attempts = float(u.bits), 1
            if self.packets:
                u.attempts, u.packet, u.tries = 0, 0, 0
                u.bits_left = self.link.packet_size(u.bits, 0)
            fading = self.scheme.block_fading(1) if self.draws else None
            if fading is not None:
                self.fading[u.seq] = fading[0]
            self._join(u)
            if self.packets:
                self._begin_attempt(u)
        return (yield from self._until_sent(u))

    def _leave(self, u) -> None:
        super()._leave(u)
        self.fading.pop(u.seq, None)

    def _rates_now(self) -> list[float]:
        """The scheme's rates of the devices on the air (at the fixed rate with fixed-rate packets)."""
        active = self.active
        fading = np.array([self.fading[u.seq] for u in active]) if self.fading else None
        self.capacity = self.scheme.rates_bps(np.array([u.gain for u in active]),
                                              np.array([u.power for u in active]), fading).tolist()
        if self.packets and self.link.fixed_rate_bps is not None:  # they send at the rate, whatever their share
            return [self.link.fixed_rate_bps] * len(active)
        return self.capacity

    def _begin_attempt(self, u) -> None:
        """A transmission of ``u``'s packet begins now: whether it gets through is drawn at its share's
        capacity and SNR at this moment (from the "link" stream, waterfall errors only)."""
        i, k = self.active.index(u), len(self.active)
        capacity, rng = self.capacity[i], self.host.link_rng
        if self.link.rate is not None:  # an MCS rate: its blocks at the share's own SINR, their air in bits to send
            active = self.active
            fading = np.array([self.fading[a.seq] for a in active]) if self.fading else None
            snr = float(self.scheme.share_snrs(np.array([a.gain for a in active]), np.array([a.power for a in active]),
                                               fading)[i])
            _, u.attempt_ok = self.link.attempt_at(u.bits_left, capacity, snr, 1.0, rng, self.link.bandwidth_hz / k)
            sent = self.link.last_sent
            u.bits_left, u.mcs, u.harq_tx = sent.on_air_bits, sent.mcs, u.harq_tx + sent.transmissions
        else:
            snr = float(share_snr(capacity, self.link.bandwidth_hz / k))
            _, u.attempt_ok = self.link.attempt_at(u.bits_left, capacity, snr,
                                                   rng.random() if self.link.errors == "waterfall" else 1.0)
        u.attempts, u.tries, u.attempt_start_s = u.attempts + 1, u.tries + 1, self.host.env.now

    def _sent(self, u) -> bool:
        """Its upload is over unless it goes in packets and this was not its last one (_packet_done)."""
        return not self.packets or self._packet_done(u)

    def _packet_done(self, u) -> bool:
        """``u``'s transmission ended: True when its last packet is through; otherwise its next
        transmission begins (the next packet, or this one again), or, after link.max_attempts failures,
        it leaves the band lost (False is handed back to the device)."""
        if u.attempt_ok:
            u.packet, u.tries = u.packet + 1, 0
            if u.packet == self.link.packet_count(u.bits):
                return True
        elif u.tries >= self.link.tries_per_packet:
            self._leave(u)
            u.airtime_s = self.host.env.now - u.tx_start_s
            u.done.succeed(False)
            self._reschedule()
            return False
        u.bits_left = self.link.packet_size(u.bits, u.packet)
        if not u.round_gain:  # each transmission at the channel of its own moment
            u.gain = self.host.draw_gain(u.device)
        self._reschedule()
        self._begin_attempt(u)
        return False

    def state_dict(self) -> dict:
        """The order of the uploads on the air, their block factors and when their bits were last counted."""
        return {"active": [u.seq for u in self.active], "t_last": self.t_last,
                "fading": {seq: f.tolist() for seq, f in self.fading.items()}}

    def load_state(self, state: dict) -> None:
        """Restore the uploads on the air (after the engine restored the updates)."""
        self.active = [self.host.update(seq) for seq in state["active"]]
        self.fading = {int(seq): np.array(f) for seq, f in state.get("fading", {}).items()}
        self.t_last = float(state["t_last"])
        self._reschedule()


DEFAULT_UPLINKS[True] = SharedBand
