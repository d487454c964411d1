"""The downlink: when the global model reaches each device that starts, and whether it does.

``link.downlink`` = "fixed" (the default): link.downlink_s + bits / link.downlink_rate_bps for every
device, never lost. "broadcast": one transmission to the devices that start together (a round's
devices; the devices of one dispatch) at the base station's power ``link.bs_power``, at the rate of
the weakest of them, B log2(1 + g_min P_bs / N0), or at the fixed ``link.downlink_rate_bps``.
"unicast": one transmission to each device on a channel of its own (the base station serves them at
once, as with spatial multiplexing) at its own capacity B log2(1 + g_n P_bs / N0), or the fixed rate.
link.downlink_s is added before the first transmission (signalling).

Errors (``link.downlink_errors``): none; outage (a device whose capacity is below the fixed rate
misses the model); waterfall (a device misses it with probability 1 - exp(-m / SNR_n), from the
"downlink" stream). The model is sent again to those who missed it (broadcast: to them together,
at the rate of the weakest of them), up to ``link.downlink_max_attempts`` transmissions; each
retransmission sees the channel of the engine's rule (a round's gain, or a fresh draw). A device
that still misses it waits for the next model or trains from the last one it received
(``link.downlink_miss``), which the engines decide.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["Delivery", "Downlink", "UNTIMED_DOWNLINK", "UntimedDownlink", "or_untimed"]


@dataclass
class Delivery:
    """What the downlink did for each receiver (arrays in the receivers' order)."""

    seconds: np.ndarray   # from the downlink's start to the end of the transmission that reached it (or of the last that missed)
    attempts: np.ndarray  # transmissions of the model to it
    received: np.ndarray  # whether it got the model


class Downlink:
    """The downlink of ``link`` (the LinkConfig): ``deliver`` times it for a group of receivers."""

    def __init__(self, cfg):
        self.mode = cfg.downlink
        self.fixed_s, self.rate_bps = float(cfg.downlink_s), cfg.downlink_rate_bps
        self.power, self.bandwidth_hz, self.noise_power = float(cfg.bs_power), float(cfg.bandwidth_hz), float(cfg.noise_power)
        self.errors, self.waterfall_m, self.max_attempts = cfg.downlink_errors, cfg.waterfall_m, cfg.downlink_max_attempts
        self.miss = cfg.downlink_miss

    @property
    def timed(self) -> bool:
        """Whether each device's downlink is timed from its gain (else every device gets the model
        after the same fixed time)."""
        return self.mode != "fixed"

    def fixed_time_s(self, bits: float) -> float:
        """link.downlink = 'fixed': downlink_s plus bits / downlink_rate_bps if a rate is set (the
        two add up: downlink_s stands for fixed overheads such as synchronisation and signalling)."""
        return self.fixed_s + (bits / self.rate_bps if self.rate_bps else 0.0)

    def snr(self, gains: np.ndarray) -> np.ndarray:
        """Each receiver's downlink SNR g P_bs / N0."""
        return np.asarray(gains, dtype=float) * self.power / self.noise_power

    def capacity_bps(self, gains: np.ndarray) -> np.ndarray:
        """Each receiver's capacity B log2(1 + g P_bs / N0)."""
        return self.bandwidth_hz * np.log1p(self.snr(gains)) / math.log(2.0)

    def deliver(self, bits: float, gains: np.ndarray, rng: np.random.Generator,
                redraw: Callable[[np.ndarray], np.ndarray] | None = None) -> Delivery:
        """The model of ``bits`` sent to receivers at ``gains``: when it reached each (or when the
        last transmission to one that missed it ended), its transmissions, whether it got it.
        ``redraw(i)``: the gains of receivers ``i`` (indices into ``gains``) for a retransmission
        (default: the first transmission's gains); ``rng``: the waterfall errors' draws."""
        gains = np.array(gains, dtype=float).reshape(-1)
        k = gains.size
        if not self.timed:
            return Delivery(np.full(k, self.fixed_time_s(bits)), np.ones(k, dtype=np.int64), np.ones(k, dtype=bool))
        seconds = np.full(k, self.fixed_s)
        attempts = np.zeros(k, dtype=np.int64)
        received = np.zeros(k, dtype=bool)
        waiting = np.arange(k)
        for attempt in range(self.max_attempts):
            if not waiting.size:
                break
            if attempt and redraw is not None:
                gains[waiting] = redraw(waiting)
            capacity = self.capacity_bps(gains[waiting])
            rate = self._rates(capacity)
            with np.errstate(divide="ignore"):
                took = np.where(rate > 0, bits / np.where(rate > 0, rate, 1.0), math.inf)
            ok = self._got_it(capacity, rate, self.snr(gains[waiting]), rng)
            if self.mode == "broadcast":  # one transmission to all of them: they hear it end together
                seconds[waiting] = seconds[waiting].max(initial=self.fixed_s) + took
            else:
                seconds[waiting] += took
            attempts[waiting] += 1
            received[waiting[ok]] = True
            waiting = waiting[~ok]
        return Delivery(seconds, attempts, received)

    def _rates(self, capacity: np.ndarray) -> np.ndarray:
        """The rate of each receiver's transmission: the fixed rate, the weakest receiver's capacity
        (broadcast) or its own (unicast)."""
        if self.rate_bps is not None:
            return np.full(capacity.size, float(self.rate_bps))
        if self.mode == "broadcast":
            return np.full(capacity.size, capacity.min(initial=math.inf))
        return capacity

    def _got_it(self, capacity: np.ndarray, rate: np.ndarray, snr: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Which receivers got this transmission (the error model)."""
        if self.errors == "outage":
            return capacity >= rate
        if self.errors == "waterfall":
            u = rng.random(capacity.size)
            with np.errstate(divide="ignore"):
                return (snr > 0) & (u >= -np.expm1(-self.waterfall_m / np.where(snr > 0, snr, 1.0)))
        return np.ones(capacity.size, dtype=bool)


class UntimedDownlink:
    """The downlink when it is not timed per device (Parts.downlink's default): every model arrives
    after one fixed time (the engines' Parts.downlink_s) and is never missed, so the engines ask it
    as they ask a timed one and only its ``timed`` tells the records which columns they have."""

    timed = False
    mode = "fixed"
    miss = "wait"  # never used: nobody misses the model

    def __init__(self, fixed_s: float = 0.0):
        self.fixed_s = float(fixed_s)

    def deliver(self, bits: float, gains: np.ndarray, rng: np.random.Generator, redraw=None) -> Delivery:
        """Every receiver has the model after ``fixed_s``, in one transmission."""
        k = np.size(gains)
        return Delivery(np.full(k, self.fixed_s), np.ones(k, dtype=np.int64), np.ones(k, dtype=bool))


UNTIMED_DOWNLINK = UntimedDownlink()
"""A downlink that takes no time of its own (the fixed time is Parts.downlink_s)."""


def or_untimed(downlink: "Downlink | UntimedDownlink | None") -> "Downlink | UntimedDownlink":
    """A downlink handed over by a caller, with None (the old spelling of "not timed") as UNTIMED_DOWNLINK."""
    return UNTIMED_DOWNLINK if downlink is None else downlink
