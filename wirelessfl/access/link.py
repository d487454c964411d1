"""The link every access scheme sends on: Shannon rates, packets, errors and retransmissions
(:class:`Link`), and the event side of an upload in packets on a channel of its own
(:func:`send_packets`), which the schemes whose uploads have a channel to themselves share."""
from __future__ import annotations

import copy
import math

import numpy as np

from ..des import ON_AIR, QUEUED, RANK_DEVICE, priority

__all__ = ["Link", "queue", "send_alone", "send_packets", "share_snr"]


class Link:
    """The uplink: rate = B log2(1 + g P / N0) (or the rate part's, ``link.rate``: wirelessfl.radio.rates);
    airtime = bits / rate; energy = P airtime.

    With an MCS rate (nr, lte) every upload goes through ``send``: its transport blocks, HARQ and ARQ
    are the rate's (a transmission here is a packet's, ``link.packet_bits``, delivered or lost as a
    whole), and ``last_sent`` holds the MCS and transport-block transmissions of the last one."""

    def __init__(self, cfg, rate=None):
        self.bandwidth_hz = cfg.bandwidth_hz
        self.noise_power = cfg.noise_power
        self.packet_bits, self.fixed_rate_bps = cfg.packet_bits, cfg.rate_bps
        self.errors, self.waterfall_m, self.max_attempts = cfg.errors, cfg.waterfall_m, cfg.max_attempts
        self.rate = rate if rate is not None else rate_model(cfg)  # None: Shannon, by the code below
        self.last_sent = None  # an MCS rate's last transmission (wirelessfl.radio.rates.Sent)
        self.upload_harq = (-1, 0)  # and the last upload's (MCS, transport-block transmissions), send_at

    @property
    def mcs_rate(self) -> bool:
        """Whether uploads go at an MCS rate part's (link.rate other than "shannon"): their HARQ
        counts are recorded and their errors come from the "harq" stream."""
        return self.rate is not None

    @property
    def packets_on(self) -> bool:
        """Whether uploads go in packets that may fail (packet_bits, a fixed rate, an error model or
        an MCS rate set); otherwise an upload is one transmission at the capacity and always arrives."""
        return self.packet_bits is not None or self.fixed_rate_bps is not None or self.errors != "none" \
            or self.rate is not None

    @property
    def tries_per_packet(self) -> int:
        """Transmissions of a packet before its upload is lost: max_attempts, or one where an MCS
        rate retransmits its transport blocks itself (HARQ, then ARQ up to max_attempts)."""
        return 1 if self.rate is not None else self.max_attempts

    def rate_at(self, snr, bandwidth_hz: float):
        """The rate of a channel of ``bandwidth_hz`` at linear SINR ``snr``: B log2(1 + SINR), or the
        rate part's nominal rate (first transmissions)."""
        if self.rate is None:
            return bandwidth_hz * np.log1p(snr) / np.log(2.0)
        return self.rate.rate_bps(snr, bandwidth_hz)

    def packet_sizes(self, bits: float) -> list[float]:
        """The packets of an upload of ``bits`` (the last one shorter)."""
        return [self.packet_size(bits, i) for i in range(self.packet_count(bits))]

    def packet_count(self, bits: float) -> int:
        """How many packets an upload of ``bits`` goes in."""
        if self.packet_bits is None or bits <= self.packet_bits:
            return 1
        whole, rest = divmod(float(bits), self.packet_bits)
        return int(whole) + (rest > 0)

    def packet_size(self, bits: float, i: int) -> float:
        """The bits of packet ``i`` of an upload of ``bits`` (without building the list of them)."""
        if self.packet_bits is None or bits <= self.packet_bits:
            return float(bits)
        whole, rest = divmod(float(bits), self.packet_bits)
        return float(self.packet_bits) if i < whole else rest

    def attempt(self, bits: float, gain: float, power: float, u: float, rng=None) -> tuple[float, bool]:
        """One transmission of a packet of ``bits`` on this link at gain x power (see ``attempt_at``)."""
        return self.attempt_at(bits, *self._capacity_and_snr(gain, power), u, rng)

    def attempt_at(self, bits: float, capacity_bps: float, snr: float, u: float, rng=None,
                   bandwidth_hz: float | None = None) -> tuple[float, bool]:
        """One transmission of a packet of ``bits`` on a channel of ``capacity_bps`` at ``snr``: (its
        seconds on the air, whether it got through). At the fixed rate, or at the capacity; outage:
        fails when the capacity is below the rate; waterfall: fails with probability 1 - exp(-m / SNR)
        (``u``: a uniform draw). An MCS rate: its transport blocks through HARQ and ARQ, drawn from
        ``rng`` (the "harq" stream), their transmissions' air at the nominal rate ``capacity_bps`` on
        ``bandwidth_hz`` (a share of the band; default the link's)."""
        if self.rate is not None:
            band = self.bandwidth_hz if bandwidth_hz is None else bandwidth_hz
            sent = self.last_sent = self.rate.send(bits, snr, band, rng, self.max_attempts)
            return (sent.on_air_bits / capacity_bps if capacity_bps > 0 else math.inf), sent.ok
        rate = self.fixed_rate_bps if self.fixed_rate_bps is not None else capacity_bps
        seconds = bits / rate if rate > 0 else math.inf
        if self.errors == "outage":
            return seconds, capacity_bps >= rate
        if self.errors == "waterfall":
            return seconds, snr > 0 and u >= -math.expm1(-self.waterfall_m / snr)
        return seconds, True

    def send(self, bits: float, gain: float, power: float, rng: np.random.Generator,
             on_air=None) -> tuple[float, int, bool]:
        """An upload at one gain (a sync round's block) on this link: see ``send_at``."""
        return self.send_at(bits, *self._capacity_and_snr(gain, power), rng, on_air)

    def _capacity_and_snr(self, gain: float, power: float) -> tuple[float, float]:
        """B log2(1 + SNR) (or the rate part's) and SNR = g P / N0 of one transmission (Python floats)."""
        snr = gain * power / self.noise_power
        if self.rate is not None:
            return float(self.rate.rate_bps(snr, self.bandwidth_hz)), snr
        return self.bandwidth_hz * math.log1p(snr) / math.log(2.0), snr

    def send_at(self, bits: float, capacity_bps: float, snr: float, rng: np.random.Generator,
                on_air=None, bandwidth_hz: float | None = None) -> tuple[float, int, bool]:
        """An upload on a channel of ``capacity_bps`` at ``snr``, packet after packet, each retried up
        to max_attempts times: (seconds on the air, transmissions, whether every packet got through).
        ``on_air``: the time a transmission of so many seconds holds the channel (slotted TDMA: whole
        slots; default: those seconds)."""
        seconds, attempts, self.upload_harq = 0.0, 0, (-1, 0)
        for size in self.packet_sizes(bits):
            for _ in range(self.tries_per_packet):
                took, ok = self.attempt_at(size, capacity_bps, snr,
                                           rng.random() if self.errors == "waterfall" else 1.0, rng, bandwidth_hz)
                seconds, attempts = seconds + (took if on_air is None else on_air(took)), attempts + 1
                if self.rate is not None:  # the upload's MCS and transport-block transmissions so far
                    self.upload_harq = (self.last_sent.mcs, self.upload_harq[1] + self.last_sent.transmissions)
                if ok:
                    break
            else:
                return seconds, attempts, False
        return seconds, attempts, True

    def subband(self, parts: int) -> "Link":
        """This link narrowed to one of ``parts`` equal sub-bands: B / parts Hz, noise N0 / parts."""
        narrow = copy.copy(self)
        narrow.bandwidth_hz, narrow.noise_power = self.bandwidth_hz / parts, self.noise_power / parts
        return narrow

    def rate_bps(self, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """Achievable rate in bit/s of each device at the given gain and transmit power."""
        # log1p: log2(1 + x) rounds to 0 for x below 1.1e-16, which made a positive power's airtime inf
        snr = np.asarray(gain) * np.asarray(power) / self.noise_power
        if self.rate is not None:
            return np.asarray(self.rate.rate_bps(snr, self.bandwidth_hz), dtype=float)
        return self.bandwidth_hz * np.log1p(snr) / np.log(2.0)

    def airtime_s(self, bits: float, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """Seconds to send ``bits`` (inf where the rate is zero, i.e. zero power, or so small that the
        airtime overflows: the clock reports an inf time as NonFiniteTime, in one line)."""
        with np.errstate(divide="ignore", over="ignore"):
            return bits / self.rate_bps(gain, power)


def rate_model(cfg):
    """The rate part of a [link] table (None for Shannon, which the link computes itself)."""
    name = getattr(cfg, "rate", "shannon")
    if name == "shannon":
        return None
    from ..plugins import registry

    return registry("rate").load_any(name).from_link(cfg, cfg.rate_options)


def share_snr(rate_bps, bandwidth_hz: float):
    """The SNR at which a channel of ``bandwidth_hz`` carries ``rate_bps``: 2^(rate / B) - 1. On a
    shared band, with B the device's equal share B / k, it is the SNR a packet's errors are drawn at
    (FDMA: exactly g P k / N0)."""
    return np.expm1(np.asarray(rate_bps, dtype=float) / bandwidth_hz * math.log(2.0))




def queue(host, u) -> None:
    """``u`` waits for the uplink: phase QUEUED and its place in the host's queue order, which a
    resume rebuilds the processes in (a resumed request keeps its place)."""
    u.phase = QUEUED
    if u.queue_seq < 0:
        u.queue_seq = host.next_queue_place()


def send_alone(host, link: Link, u):
    """The upload of ``u`` on a channel it has to itself from now (a SimPy generator): it goes on
    the air (unless a resumed upload already is, with its times), then sends its packets on
    ``link`` or, without packets, holds the channel for its airtime. Returns whether it got through."""
    if u.phase != ON_AIR:
        u.phase = ON_AIR
        host.start_transmission(u)
    if host.packets_on:
        return (yield from send_packets(host, link, u))
    u.attempts = 1
    end = u.tx_start_s + u.airtime_s
    yield host.env.at(end, priority(RANK_DEVICE, u.seq))
    u.tx_end_s = end
    return True


def send_packets(host, link: Link, u, slotted=None):
    """The upload of ``u`` in packets on a channel it has to itself (the band it holds under TDMA,
    its own sub-band under dedicated: the scheme's ``upload_link()``), a SimPy generator: each
    transmission at the fixed rate or its channel's capacity, a failed packet sent again (each retry
    at the channel of its own moment, or at the round's gain) up to link.max_attempts times. Returns
    whether it got through. ``slotted``: the uplink whose slots the transmissions take, one after
    another, each in whole slots (its ``window`` and ``held``; default: each from now, for its seconds)."""
    env, rng = host.env, host.link_rng
    sizes = link.packet_sizes(u.bits)
    prio = priority(RANK_DEVICE, u.seq)
    if u.attempts == 0:
        u.airtime_s = 0.0  # the time on the air, summed over the transmissions
    while u.packet < len(sizes):
        if u.attempt_end_s != u.attempt_end_s:  # a transmission begins (a resumed one is under way)
            if u.attempts > 0 and not u.round_gain:
                u.gain = host.draw_gain(u.device)
            took, ok = link.attempt(sizes[u.packet], u.gain, u.power,
                                    rng.random() if link.errors == "waterfall" else 1.0, rng)
            if link.last_sent is not None:  # an MCS rate: the upload's MCS and transport-block transmissions
                u.mcs, u.harq_tx = link.last_sent.mcs, u.harq_tx + link.last_sent.transmissions
            start, end = (env.now, env.now + took) if slotted is None else slotted.window(env.now, took)
            u.attempt_start_s, u.attempt_end_s, u.attempt_ok = start, end, ok
            u.attempts, u.tries = u.attempts + 1, u.tries + 1
        yield env.at(u.attempt_end_s, prio)
        u.airtime_s += u.attempt_end_s - u.attempt_start_s if slotted is None else \
            slotted.held(u.attempt_start_s, u.attempt_end_s)
        u.attempt_end_s = math.nan
        if u.attempt_ok:
            u.packet, u.tries = u.packet + 1, 0
        elif u.tries >= link.tries_per_packet:
            return False
    u.tx_end_s = env.now
    return True
