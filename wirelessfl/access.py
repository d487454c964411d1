"""The uplink and how uploads share it: the link's rates, and the access schemes, a part named by
``link.access``.

An access scheme fits :class:`AccessScheme`: ``airtime_s(bits, gains, powers)`` gives the time on
the air of the k devices that send in a round (sync), ``schedule(ready_s, airtime_s, deadline_s)``
the round's uplink in closed form (who goes on the air when, who misses the deadline), and, for
the event protocols, ``upload_s(bits, gain, power)`` one upload's time on the air when it starts
and ``event_uplink(engine)`` the SimPy uplink the devices in flight contend for. ``ACCESS`` names
the built-ins besides installed plugins (entry-point group ``wirelessfl.access``) and import paths:

- ``tdma``: one device at a time on the whole band, first come first served.
- ``tdma_slotted``: the same in slots: frames of ``slots_per_frame`` slots of ``slot_s`` seconds,
  each frame opened by ``guard_s`` seconds in which nobody sends. An upload holds whole slots,
  consecutive ones (across frames if need be), starting at a slot boundary.
- ``fdma``: the band split evenly among the devices sending.
- ``dedicated``: every device its own fixed sub-band, whatever the others do (no queue, no
  sharing): the assumption of simulators that end an upload at dispatch, with each device's channel.
- ``ofdma``: the band in ``resource_blocks`` blocks with a gain each, shared by an allocation rule
  (``equal`` or ``greedy``; see :class:`OFDMA`).
- ``aircomp``: every device of a round at once, truncated channel inversion, the server receiving
  the sum of the updates plus noise (see :class:`AirComp`).

Schedulers that price airtime (the Lyapunov rules) ask the scheme how: ``pricing(bits, k)`` gives
the band and noise one of k devices sending together sees (fdma, ofdma: B / k and N0 / k), or a
fixed airtime (aircomp), and ``transmit_power`` the power a device will really send at.

Knows nothing of learning.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from .fields import ConfigError, NoOptions, option
from .plugins import Registry

__all__ = ["ACCESS", "AccessScheme", "AirComp", "AirtimePrice", "Dedicated", "FDMA", "Link", "OFDMA", "SlottedTDMA", "TDMA", "UplinkFacts", "UplinkSchedule"]


class Link:
    """Shannon-rate uplink: rate = B log2(1 + g P / N0); airtime = bits / rate; energy = P airtime."""

    def __init__(self, cfg):
        self.bandwidth_hz = cfg.bandwidth_hz
        self.noise_power = cfg.noise_power
        self.downlink_s = cfg.downlink_s
        self.downlink_rate_bps = cfg.downlink_rate_bps
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

    def downlink_time_s(self, bits: float) -> float:
        """Broadcast time of the global model: downlink_s plus bits / downlink_rate_bps if a rate is set.

        The two add up: downlink_s stands for fixed per-round overheads (synchronisation, signalling).
        """
        return self.downlink_s + (bits / self.downlink_rate_bps if self.downlink_rate_bps else 0.0)

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


@dataclass
class UplinkSchedule:
    """What happened on the uplink in one round's computation-and-upload phase.

    order: indices into the selected devices, in the order their uploads started; tx_start: when
    each one's upload started (nan: it never started); arrived: its upload was complete by the
    deadline; end_s: when the phase ended (the last upload, or the deadline if one was missed);
    tx_end: when each upload ended, where that is not tx_start + airtime (slots across a guard);
    None: it is.
    """

    order: np.ndarray
    tx_start: np.ndarray
    arrived: np.ndarray
    end_s: float
    tx_end: np.ndarray | None = None


@dataclass(frozen=True)
class UplinkFacts:
    """What the uplink did for the updates of one aggregation (``Algorithm.uplink`` receives it):
    devices (k,); gains |h|^2 (k,) each upload's first gain; power (k,); arrived (k,) whether the
    update reached the server; noise_var, the variance of the noise the channel adds to each entry
    of the aggregate, in units of the updates' mean power per entry (0: the updates arrive exactly;
    ``aircomp``: 1 / (K^2 SNR) over K devices at receive SNR rho0 / N0). The trainer adds that noise
    to the next aggregate (wirelessfl.learning.trainer.Trainer.aggregate)."""

    devices: np.ndarray
    gains: np.ndarray
    power: np.ndarray
    arrived: np.ndarray
    noise_var: float = 0.0


@dataclass(frozen=True)
class AirtimePrice:
    """How a scheduler prices one upload's airtime under an access scheme: as
    bits / (bandwidth_hz log2(1 + g P / noise_power)), the form whose cost the Lambert-W power rule
    minimises, or, when ``fixed_s`` is set, as fixed_s for every device that sends (P > 0)."""

    bandwidth_hz: float
    noise_power: float
    fixed_s: float | None = None


class AccessScheme(Protocol):
    """How uploads share the uplink. Required: ``from_scenario``, ``airtime_s`` and ``schedule``;
    subclass to inherit the rest. An instance has ``link``, its :class:`Link` (bandwidth, noise):
    the engines and the schedulers' round state read them there."""

    Options: ClassVar[type | None] = None
    """A dataclass of the scheme's own options, or None (options handed over as a dict)."""
    concurrent: ClassVar[bool] = False
    """True: several devices send at once (the event engine shares the band among them); False:
    one at a time (the event engine queues them for one transmitter)."""
    solo_uploads: ClassVar[bool] = False
    """True: an upload has a channel of its own while on the air (the whole band under tdma, its own
    sub-band under dedicated), so its time on the air follows from its own channel alone: packets are
    sent on ``upload_link``, and fading within an upload (channel.coherence_s, devices.speed_mps) is
    modelled on it (refused elsewhere). False (a shared band): a packet's capacity is the device's
    rate on its share, and its errors are drawn at that share's SNR (``share_snr``)."""
    over_the_air: ClassVar[bool] = False
    """True: the server receives only the sum of the updates (AirComp), never one device's update;
    an aggregation that needs them one by one (a median, Krum) cannot run over it."""

    @classmethod
    def from_scenario(cls, scenario, options) -> "AccessScheme":
        """Build the scheme for ``scenario`` (its [link] table) with its options."""
        ...

    def airtime_s(self, bits, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """Time on the air of each of the k = len(gain) devices that send in a round."""
        ...

    def schedule(self, ready_s: np.ndarray, airtime_s: np.ndarray, deadline_s: float | None = None) -> UplinkSchedule:
        """A sync round's uplink in closed form: device i is ready at ready_s[i] and needs airtime_s[i]."""
        ...

    @classmethod
    def check(cls, scenario, options) -> None:
        """Raise ConfigError if the scenario cannot run with this scheme."""

    def upload_link(self) -> "Link":
        """The channel one upload is sent on, for packets and fading within an upload (default: the
        whole band)."""
        return self.link

    def on_air_s(self, seconds):
        """The time a transmission of ``seconds`` holds the channel (default: those seconds; slotted
        TDMA: whole slots). Accepts a number or an array."""
        return seconds

    def upload_s(self, bits: float, gain: float, power: float) -> float:
        """Event protocols: one upload's time on the air as it starts (NaN: the event uplink
        decides as it goes, as FDMA's shared band does)."""
        return float(self.airtime_s(bits, np.array([gain]), np.array([power]))[0])

    def transmit_power(self, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """Rounds (sync, semi_sync): the power each selected device transmits at, from its gain and
        the scheduler's power (default: the scheduler's; aircomp: channel inversion)."""
        return power

    def pricing(self, bits: float, k: int) -> AirtimePrice:
        """How a scheduler prices one upload of ``bits`` when k devices send together (default: the
        whole band, as one transmitter at a time has it)."""
        return AirtimePrice(self.link.bandwidth_hz, self.link.noise_power)

    def uplink_facts(self, devices: np.ndarray, gains: np.ndarray, power: np.ndarray,
                     arrived: np.ndarray) -> UplinkFacts:
        """What the uplink did for one aggregation (default: the updates arrive exactly)."""
        return UplinkFacts(devices, gains, power, arrived)

    def rates_bps(self, gain: np.ndarray, power: np.ndarray, fading: np.ndarray | None = None) -> np.ndarray:
        """Concurrent schemes: the rate of each of the k = len(gain) devices on the air together
        (``fading``: their block factors from ``block_fading``; default: 1 / airtime_s of one bit)."""
        with np.errstate(divide="ignore"):
            return 1.0 / np.asarray(self.airtime_s(1.0, gain, power), dtype=float)

    def block_fading(self, k: int) -> np.ndarray | None:
        """Concurrent schemes: what an upload going on the air draws for ``rates_bps`` (k rows;
        default None: nothing)."""
        return None

    def event_uplink(self, engine):
        """Event protocols: the SimPy uplink the devices in flight contend for, for a scheme that
        brings its own; None (default): the engine's (``sim.uplink.default_uplink``: one transmitter,
        the shared band at ``rates_bps`` when ``concurrent``, slot-aligned for ``SlottedTDMA``)."""
        return None

    def state_dict(self) -> dict[str, Any]:
        """The scheme's memory, for checkpoints."""
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""


class TDMA(AccessScheme):
    """Time division: one device at a time on the whole band, first come first served in order of
    computation completion; airtime = bits / (B log2(1 + g P / N0))."""

    Options = NoOptions
    concurrent = False
    solo_uploads = True

    def __init__(self, link: Link):
        self.link = link
        self._factor = math.log(2.0) / link.bandwidth_hz  # airtime = bits ln2 / (B ln(1 + g P / N0))

    @classmethod
    def from_scenario(cls, scenario, options) -> "TDMA":
        """One transmitter on the scenario's link."""
        return cls(Link(scenario.link))

    def upload_s(self, bits: float, gain: float, power: float) -> float:
        """One upload's airtime on the whole band (the scalar form of airtime_s)."""
        rate = math.log1p(gain * power / self.link.noise_power)
        return bits * self._factor / rate if rate > 0 else math.inf

    def airtime_s(self, bits: float, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """Airtime of each selected device, alone on the band."""
        return self.link.airtime_s(bits, gain, power)

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


class FDMA(AccessScheme):
    """Frequency division: the k selected devices each get B / k and transmit at once.

    Thermal noise has a flat spectral density, so a sub-band of B / k carries noise N0 / k:
    rate = (B / k) log2(1 + g P k / N0) and airtime = bits / rate. Under sync the split is fixed for
    the round (a device that finishes early does not hand its sub-band to the others); each device
    starts as soon as its computation ends. Under the event protocols the band is re-split among the
    devices on the air as they come and go (wirelessfl.sim.uplink.SharedBand).
    """

    Options = NoOptions
    concurrent = True

    def __init__(self, link: Link):
        self.link = link

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

    def rates_bps(self, gain: np.ndarray, power: np.ndarray, fading: np.ndarray | None = None) -> np.ndarray:
        """The rate of each of the k = len(gain) devices sending at once, on B / k each."""
        gain, power = np.broadcast_arrays(np.asarray(gain, dtype=float), np.asarray(power, dtype=float))
        k = max(gain.size, 1)
        snr = gain * power * k / self.link.noise_power
        return self.link.bandwidth_hz / k * np.log1p(snr) / np.log(2.0)  # exact also for snr < 1e-16

    def airtime_s(self, bits: float, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """Airtime of each of the k = len(gain) selected devices at its rate on its share of the band."""
        rate = self.rates_bps(gain, power, self.block_fading(np.size(gain)))
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



@dataclass(frozen=True)
class DedicatedOptions:
    """Options of the dedicated sub-bands."""

    subbands: int | None = option(None, ge=1, doc="sub-bands the band is cut into, B / subbands Hz each, one per "
                                                  "device (default: devices.count)")


class Dedicated(FDMA):
    """Every device sends on a sub-band of its own, B / S Hz with noise N0 / S (S = ``subbands``,
    default one per device), whatever the others do: rate (B / S) log2(1 + g P S / N0), fixed when
    the upload starts. Nobody queues and nobody shares, so uploads never contend; this is the
    "bytes over a per-client bandwidth" of simulators that fix an upload's end at dispatch, here with
    each device's own channel. Under sync every device starts when it is ready (as fdma); under the
    event protocols each upload runs on its own (``sim.uplink.IndependentUplink``)."""

    Options = DedicatedOptions
    concurrent = False
    solo_uploads = True

    def __init__(self, link: Link, subbands: int):
        super().__init__(link)
        self.subbands = int(subbands)

    @classmethod
    def from_scenario(cls, scenario, options: DedicatedOptions) -> "Dedicated":
        """The scenario's band in ``subbands`` (default devices.count) fixed sub-bands."""
        return cls(Link(scenario.link), options.subbands or scenario.devices.count)

    def rates_bps(self, gain: np.ndarray, power: np.ndarray, fading: np.ndarray | None = None) -> np.ndarray:
        """Each device's rate on its own sub-band, however many send."""
        gain, power = np.broadcast_arrays(np.asarray(gain, dtype=float), np.asarray(power, dtype=float))
        s = self.subbands
        return self.link.bandwidth_hz / s * np.log1p(gain * power * s / self.link.noise_power) / np.log(2.0)

    def upload_s(self, bits: float, gain: float, power: float) -> float:
        """Known when the upload starts: its own sub-band's rate."""
        with np.errstate(divide="ignore"):
            return float(bits / self.rates_bps(np.array([gain]), np.array([power]))[0])

    def upload_link(self) -> Link:
        """The device's own sub-band: B / S Hz, noise N0 / S."""
        return self.link.subband(self.subbands)

    def pricing(self, bits: float, k: int) -> AirtimePrice:
        """One fixed sub-band, whatever k."""
        sub = self.upload_link()
        return AirtimePrice(sub.bandwidth_hz, sub.noise_power)


@dataclass(frozen=True)
class OfdmaOptions:
    """Options of OFDMA."""

    resource_blocks: int = option(25, ge=1, doc="resource blocks the band is cut into (B / R Hz each)")
    allocation: str = option("equal", choices=("equal", "greedy"),
                             doc="equal: every device an equal time share of every block; greedy: whole blocks, "
                                 "each device its best free one first, the rest each to the device with the "
                                 "highest SNR on it")
    frequency_selective: bool = option(True, doc="each block an independent unit-mean Rayleigh factor on the "
                                                 "device's gain (false: every block at the device's gain)")


class OFDMA(FDMA):
    """Orthogonal frequency division: the band is R resource blocks of B / R Hz, handed out among
    the k devices sending at once.

    Block b of device i has gain G[i, b] = g_i e[i, b]: the device's gain times a unit-mean
    exponential factor (Rayleigh in amplitude) drawn afresh for every upload, independently per
    block (``frequency_selective = false``: e = 1). The allocation gives device i a time share
    a[i, b] of block b (each block's shares add up to 1); the device spreads its power P_i evenly
    over the n_i = sum_b a[i, b] blocks it holds, so block b sees SNR_ib = G[i, b] P_i R / (n_i N0),
    and its rate is sum_b a[i, b] (B / R) log2(1 + SNR_ib).

    - ``equal``: a[i, b] = 1 / k (the blocks rotate among the devices from one transmission
      interval to the next). With flat blocks the rate is (B / k) log2(1 + g P k / N0): FDMA.
    - ``greedy`` (needs k <= R): whole blocks. The devices, lowest mean SNR first, each take the
      free block where their SNR is highest; every block left goes to the device with the highest
      SNR G[i, b] P_i on it.

    Under sync the allocation is fixed for the round, as FDMA's split is; under the event protocols
    it is made again whenever a device joins or leaves the band (wirelessfl.sim.uplink.SharedBand),
    each upload keeping the block factors it drew when it went on the air. The factors come from
    the scheme's own random stream "ofdma".
    """

    Options = OfdmaOptions

    def __init__(self, link: Link, resource_blocks: int = 25, allocation: str = "equal",
                 frequency_selective: bool = True, rng: np.random.Generator | None = None):
        super().__init__(link)
        self.resource_blocks, self.allocation = int(resource_blocks), allocation
        self.frequency_selective = bool(frequency_selective)
        self.rng = rng if rng is not None else np.random.default_rng(0)

    @classmethod
    def from_scenario(cls, scenario, options: OfdmaOptions) -> "OFDMA":
        """Resource blocks and their allocation from the options; block factors from the "ofdma" stream."""
        from .rng import stream

        return cls(Link(scenario.link), options.resource_blocks, options.allocation, options.frequency_selective,
                   stream(scenario.seed, "ofdma"))

    def block_fading(self, k: int) -> np.ndarray | None:
        """Each block's factor e[i, b] for k uploads starting now ((k, R); None when flat)."""
        if not self.frequency_selective:
            return None
        return self.rng.exponential(1.0, size=(k, self.resource_blocks))

    def shares(self, snr_unit: np.ndarray) -> np.ndarray:
        """The allocation a[i, b] ((k, R)), from each device's SNR on each block with all its power there."""
        k, r = snr_unit.shape
        if self.allocation == "equal" or k == 0:
            return np.full((k, r), 1.0 / max(k, 1))
        if k > r:
            raise ConfigError(f"link.allocation = 'greedy': {k} devices send at once but link.resource_blocks = {r}; "
                              "greedy hands out whole blocks (give more blocks, or allocation = 'equal')")
        a = np.zeros((k, r))
        free = np.ones(r, dtype=bool)
        for i in np.argsort(snr_unit.mean(axis=1), kind="stable").tolist():  # weakest first
            b = int(np.argmax(np.where(free, snr_unit[i], -np.inf)))
            a[i, b], free[b] = 1.0, False
        rest = np.flatnonzero(free)
        a[np.argmax(snr_unit[:, rest], axis=0), rest] = 1.0
        return a

    def rates_bps(self, gain: np.ndarray, power: np.ndarray, fading: np.ndarray | None = None) -> np.ndarray:
        """The rate of each of the k = len(gain) devices under the allocation (see the class)."""
        gain, power = np.broadcast_arrays(np.asarray(gain, dtype=float), np.asarray(power, dtype=float))
        r = self.resource_blocks
        block_gain = gain[:, None] * (1.0 if fading is None else fading)
        snr_unit = np.broadcast_to(block_gain * power[:, None] * r / self.link.noise_power, (gain.size, r))
        a = self.shares(snr_unit)
        held = a.sum(axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            per_block = np.where(a > 0, a * np.log1p(snr_unit / held), 0.0)
        return self.link.bandwidth_hz / r * per_block.sum(axis=1) / np.log(2.0)

    def state_dict(self) -> dict[str, Any]:
        """The block factors' random stream."""
        return {"rng": self.rng.bit_generator.state}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore the random stream."""
        self.rng.bit_generator.state = state["rng"]


@dataclass(frozen=True)
class AirCompOptions:
    """Options of over-the-air aggregation."""

    truncation_gain: float = option(0.1, gt=0, doc="|h|^2 below which a device stays silent (truncated channel "
                                                   "inversion); the receive power is rho0 = link.p_max x this")
    bits_per_symbol: float = option(32.0, gt=0, doc="upload bits carried by one analog channel use (32: one "
                                                    "float32 parameter per symbol)")


class AirComp(AccessScheme):
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
    (wirelessfl.sim.uplink.JointUplink).
    """

    Options = AirCompOptions
    concurrent = True
    over_the_air = True

    def __init__(self, link: Link, truncation_gain: float = 0.1, p_max: float = 10 ** 3.5,
                 bits_per_symbol: float = 32.0):
        self.link = link
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
        seconds = np.asarray(seconds, dtype=float)
        with np.errstate(invalid="ignore"):
            n = np.maximum(np.ceil(seconds / self.slot_s - 1e-9), 1.0)
        held = np.where(np.isfinite(seconds), n * self.slot_s, np.inf)
        return float(held) if held.ndim == 0 else held

    def slots(self, airtime_s: float) -> int:
        """The slots an upload of this airtime holds (airtime_s returns whole slots)."""
        return max(int(round(airtime_s / self.slot_s)), 1)

    def airtime_s(self, bits, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """n slot_s for each device, n = ceil(bits / (rate slot_s)) (inf where it cannot send)."""
        return np.asarray(self.on_air_s(self.link.airtime_s(bits, gain, power)), dtype=float)

    def upload_s(self, bits: float, gain: float, power: float) -> float:
        """One upload's whole slots."""
        return float(self.on_air_s(super().upload_s(bits, gain, power)))

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


ACCESS = Registry("access", "wirelessfl.access:AccessScheme", {
    "tdma": "wirelessfl.access:TDMA",
    "tdma_slotted": "wirelessfl.access:SlottedTDMA",
    "fdma": "wirelessfl.access:FDMA",
    "dedicated": "wirelessfl.access:Dedicated",
    "ofdma": "wirelessfl.access:OFDMA",
    "aircomp": "wirelessfl.access:AirComp",
})
"""Built-in access schemes by the name ``link.access`` gives them."""
