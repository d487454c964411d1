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
    """Shannon-rate uplink: rate = B log2(1 + g P / N0); airtime = bits / rate; energy = P airtime."""

    def __init__(self, cfg):
        self.bandwidth_hz = cfg.bandwidth_hz
        self.noise_power = cfg.noise_power
        self.packet_bits, self.fixed_rate_bps = cfg.packet_bits, cfg.rate_bps
        self.errors, self.waterfall_m, self.max_attempts = cfg.errors, cfg.waterfall_m, cfg.max_attempts

    @property
    def packets_on(self) -> bool:
        """Whether uploads go in packets that may fail (packet_bits, a fixed rate or an error model
        set); otherwise an upload is one transmission at the capacity and always arrives."""
        return self.packet_bits is not None or self.fixed_rate_bps is not None or self.errors != "none"

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

    def attempt(self, bits: float, gain: float, power: float, u: float) -> tuple[float, bool]:
        """One transmission of a packet of ``bits`` on this link at gain x power (see ``attempt_at``)."""
        return self.attempt_at(bits, *self._capacity_and_snr(gain, power), u)

    def attempt_at(self, bits: float, capacity_bps: float, snr: float, u: float) -> tuple[float, bool]:
        """One transmission of a packet of ``bits`` on a channel of ``capacity_bps`` at ``snr``: (its
        seconds on the air, whether it got through). At the fixed rate, or at the capacity; outage:
        fails when the capacity is below the rate; waterfall: fails with probability 1 - exp(-m / SNR)
        (``u``: a uniform draw)."""
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
        """B log2(1 + SNR) and SNR = g P / N0 of one transmission (Python floats)."""
        snr = gain * power / self.noise_power
        return self.bandwidth_hz * math.log1p(snr) / math.log(2.0), snr

    def send_at(self, bits: float, capacity_bps: float, snr: float, rng: np.random.Generator,
                on_air=None) -> tuple[float, int, bool]:
        """An upload on a channel of ``capacity_bps`` at ``snr``, packet after packet, each retried up
        to max_attempts times: (seconds on the air, transmissions, whether every packet got through).
        ``on_air``: the time a transmission of so many seconds holds the channel (slotted TDMA: whole
        slots; default: those seconds)."""
        seconds, attempts = 0.0, 0
        for size in self.packet_sizes(bits):
            for _ in range(self.max_attempts):
                took, ok = self.attempt_at(size, capacity_bps, snr,
                                           rng.random() if self.errors == "waterfall" else 1.0)
                seconds, attempts = seconds + (took if on_air is None else on_air(took)), attempts + 1
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
        return self.bandwidth_hz * np.log1p(snr) / np.log(2.0)

    def airtime_s(self, bits: float, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """Seconds to send ``bits`` (inf where the rate is zero, i.e. zero power)."""
        with np.errstate(divide="ignore"):
            return bits / self.rate_bps(gain, power)


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
