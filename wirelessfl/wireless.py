"""Channels, links and multiple access. Knows nothing of learning.

A channel fits :class:`Channel`: ``draw(rng)`` gives one round's gains |h_n|^2. ``CHANNELS`` names
the built-ins ``channel.model`` accepts besides installed plugins and import paths:
RayleighFading (i.i.d.), GaussMarkovFading (correlated across rounds, has state), RicianFading and
TraceChannel (measured gains replayed from a file). PathLossChannel multiplies any of them by
distance path loss and log-normal shadowing (``channel.path_loss``). Link gives Shannon rates,
airtimes, transmit energy and the downlink time; TDMA and FDMA give each selected device's airtime
under that access scheme and the round's uplink schedule (who is on the air when, who missed the
deadline), computed in closed form.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from .fields import FilePath, NoOptions, option
from .plugins import Registry
from .traces import Trace


class Channel(Protocol):
    """A fading process: one draw of every device's gain |h_n|^2 per round (block fading).

    Required: ``from_scenario`` and ``draw``; subclass to inherit the optional parts.
    """

    Options: ClassVar[type | None] = None
    """A dataclass of the channel's own options, or None (options handed over as a dict)."""

    @classmethod
    def from_scenario(cls, scenario, options) -> "Channel":
        """Build the channel for ``scenario`` (N = scenario.devices.count devices)."""
        ...

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """This round's gains (N,), from the run's "channel" stream."""
        ...

    @classmethod
    def check(cls, scenario, options) -> None:
        """Raise ConfigError if the scenario cannot run with this channel."""

    def draw_devices(self, rng: np.random.Generator, devices: np.ndarray) -> np.ndarray:
        """The gains of ``devices`` only, for one upload each (the event protocols draw a gain when
        an upload starts). Default: one whole ``draw``, indexed; override it when the devices can
        be drawn alone (i.i.d. fading), which makes each upload O(1) instead of O(N)."""
        return self.draw(rng)[devices]

    def mean_gain(self) -> np.ndarray | None:
        """E|h_n|^2 of every device (for devices.min_mean_snr_db and devices.csv); None: unknown."""
        return None

    def state_dict(self) -> dict[str, Any]:
        """The channel's memory, for checkpoints."""
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""


def sigma_profile(cfg, num_devices: int) -> np.ndarray:
    """Per-device Rayleigh scale sigma_n: homogeneous, linear from sigma_min to sigma_max, or a list."""
    if cfg.profile == "homogeneous":
        return np.full(num_devices, cfg.sigma)
    if cfg.profile == "linear":
        return np.linspace(cfg.sigma_min, cfg.sigma_max, num_devices)
    return np.asarray(cfg.sigmas, dtype=float)


class RayleighFading(Channel):
    """Block fading |h_n| ~ Rayleigh(sigma_n), i.i.d. across rounds; gains |h|^2 clipped below.

    |h|^2 of a Rayleigh(sigma) amplitude is exponential with mean 2 sigma^2.
    """

    Options = NoOptions

    def __init__(self, sigmas: np.ndarray, gain_floor: float):
        self.sigmas = np.asarray(sigmas, dtype=float)
        self.gain_floor = gain_floor
        self._mean = 2.0 * self.sigmas ** 2

    @classmethod
    def from_scenario(cls, scenario, options) -> "RayleighFading":
        """sigma_n from channel.profile, the channel's gain floor."""
        return cls(sigma_profile(scenario.channel, scenario.devices.count), scenario.channel.gain_floor)

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One round's channel gains |h_n|^2 for every device."""
        # standard exponentials times the means: what rng.exponential(means) draws, at a third of its cost
        gains = rng.standard_exponential(self._mean.size) * self._mean
        return np.maximum(gains, self.gain_floor)

    def draw_devices(self, rng: np.random.Generator, devices: np.ndarray) -> np.ndarray:
        """Gains of ``devices`` alone (i.i.d.: the others need no draw)."""
        if len(devices) == 1:  # one upload starting: scalar draws cost a fifth of an array's
            return np.array([max(rng.standard_exponential() * float(self._mean[devices[0]]), self.gain_floor)])
        return np.maximum(rng.standard_exponential(len(devices)) * self._mean[devices], self.gain_floor)

    def mean_gain(self) -> np.ndarray:
        """E|h_n|^2 = 2 sigma_n^2 (ignoring the floor)."""
        return 2.0 * self.sigmas ** 2


@dataclass(frozen=True)
class GaussMarkovOptions:
    """Options of the Gauss-Markov channel."""

    rho: float = option(0.9, ge=0, le=1, doc="correlation of h between rounds")


class GaussMarkovFading(Channel):
    """Rayleigh fading correlated across rounds (first-order Gauss-Markov, Jakes-like memory).

    h_t = rho h_{t-1} + sqrt(1 - rho^2) w_t with w_t ~ CN(0, 2 sigma^2) i.i.d.; h_0 is drawn from the
    stationary law CN(0, 2 sigma^2), so every round's |h_t| ~ Rayleigh(sigma) and the lag-k
    correlation of h is rho^k. rho = 0 is i.i.d. Rayleigh, rho = 1 a channel frozen at h_0.
    The current h is state: ``state_dict``/``load_state`` carry it through checkpoints.
    """

    def __init__(self, sigmas: np.ndarray, rho: float, gain_floor: float):
        self.sigmas = np.asarray(sigmas, dtype=float)
        self.rho = float(rho)
        self.gain_floor = gain_floor
        self.h: np.ndarray | None = None  # complex amplitudes of the last round; None before round 0

    Options = GaussMarkovOptions

    @classmethod
    def from_scenario(cls, scenario, options: GaussMarkovOptions) -> "GaussMarkovFading":
        """sigma_n from channel.profile, correlation rho."""
        return cls(sigma_profile(scenario.channel, scenario.devices.count), options.rho, scenario.channel.gain_floor)

    def _complex_gaussian(self, rng: np.random.Generator) -> np.ndarray:
        # real and imaginary parts N(0, sigma^2): E|w|^2 = 2 sigma^2
        z = rng.standard_normal((2, self.sigmas.size)) * self.sigmas
        return z[0] + 1j * z[1]

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """Advance the process one round and return the gains |h_n|^2 (clipped below)."""
        w = self._complex_gaussian(rng)
        self.h = w if self.h is None else self.rho * self.h + np.sqrt(1.0 - self.rho ** 2) * w
        return np.maximum(np.abs(self.h) ** 2, self.gain_floor)

    def mean_gain(self) -> np.ndarray:
        """E|h_n|^2 = 2 sigma_n^2 (ignoring the floor)."""
        return 2.0 * self.sigmas ** 2

    def state_dict(self) -> dict:
        """The current amplitudes as plain lists (exact float round trip, weights-only loadable)."""
        if self.h is None:
            return {"h_real": None, "h_imag": None}
        return {"h_real": self.h.real.tolist(), "h_imag": self.h.imag.tolist()}

    def load_state(self, state: dict) -> None:
        """Inverse of state_dict."""
        if state.get("h_real") is None:
            self.h = None
        else:
            self.h = np.asarray(state["h_real"], dtype=float) + 1j * np.asarray(state["h_imag"], dtype=float)


@dataclass(frozen=True)
class RicianOptions:
    """Options of the Rician channel."""

    rician_k: float = option(1.0, ge=0, doc="line-of-sight power / scattered power (linear)")


class RicianFading(Channel):
    """Block fading with a line-of-sight part: h = sqrt(K/(K+1)) Omega^(1/2) + sqrt(1/(K+1)) w.

    w ~ CN(0, Omega) with Omega = 2 sigma_n^2, so E|h|^2 = Omega (as for Rayleigh with the same sigma)
    and K = LOS power / scattered power; |h| is Rice-distributed; K = 0 is Rayleigh(sigma). The LOS
    phase is irrelevant to |h| because w is circularly symmetric. I.i.d. across rounds.
    """

    def __init__(self, sigmas: np.ndarray, k_factor: float, gain_floor: float):
        self.sigmas = np.asarray(sigmas, dtype=float)
        self.k_factor = float(k_factor)
        self.gain_floor = gain_floor

    Options = RicianOptions

    @classmethod
    def from_scenario(cls, scenario, options: RicianOptions) -> "RicianFading":
        """sigma_n from channel.profile, K = rician_k."""
        return cls(sigma_profile(scenario.channel, scenario.devices.count), options.rician_k,
                   scenario.channel.gain_floor)

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One round's gains |h_n|^2 (clipped below)."""
        omega = 2.0 * self.sigmas ** 2
        los = np.sqrt(self.k_factor / (self.k_factor + 1.0) * omega)
        scatter_sd = np.sqrt(omega / (2.0 * (self.k_factor + 1.0)))  # per real dimension
        z = rng.standard_normal((2, self.sigmas.size)) * scatter_sd
        return np.maximum((los + z[0]) ** 2 + z[1] ** 2, self.gain_floor)

    def mean_gain(self) -> np.ndarray:
        """E|h_n|^2 = 2 sigma_n^2 (ignoring the floor)."""
        return 2.0 * self.sigmas ** 2


def cell_positions(num_devices: int, radius_m: float, rng: np.random.Generator) -> np.ndarray:
    """Positions (N, 2) drawn uniformly over a disc of the given radius centred on the base station."""
    r = radius_m * np.sqrt(rng.random(num_devices))  # sqrt: uniform in area, not in radius
    theta = 2.0 * np.pi * rng.random(num_devices)
    return np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1)


class PathLoss:
    """Large-scale gain: reference_gain x (d / d0)^-exponent x 10^(X / 10), X ~ N(0, shadowing_db^2).

    Distances below d0 count as d0 (the far-field model does not hold closer in). Shadowing is drawn
    once per device at construction (``per_round=False``: a device behind a building stays there) or
    afresh every round from the channel stream (``per_round=True``: fast-moving devices).
    """

    def __init__(self, positions_m: np.ndarray, *, reference_gain: float, reference_distance_m: float,
                 exponent: float, shadowing_db: float, per_round: bool, rng: np.random.Generator):
        self.positions_m = np.asarray(positions_m, dtype=float).reshape(-1, 2)
        self.distances_m = np.hypot(self.positions_m[:, 0], self.positions_m[:, 1])
        d = np.maximum(self.distances_m, reference_distance_m)
        self.distance_gain = reference_gain * (d / reference_distance_m) ** (-exponent)
        self.shadowing_db = float(shadowing_db)
        self.per_round = per_round
        self.device_shadow_db = (np.zeros(d.size) if per_round or shadowing_db == 0
                                 else rng.normal(0.0, shadowing_db, d.size))

    def scale(self, rng: np.random.Generator, devices: np.ndarray | None = None) -> np.ndarray:
        """This round's large-scale gain of every device (or of ``devices``)."""
        distance = self.distance_gain if devices is None else self.distance_gain[devices]
        if self.per_round and self.shadowing_db > 0:
            return distance * 10.0 ** (rng.normal(0.0, self.shadowing_db, distance.size) / 10.0)
        shadow = self.device_shadow_db if devices is None else self.device_shadow_db[devices]
        return distance * 10.0 ** (shadow / 10.0)

    def mean_scale(self) -> np.ndarray:
        """Long-run mean of each device's scale.

        Per-round shadowing: the log-normal mean, distance gain x exp((s ln10 / 10)^2 / 2). Per-device
        shadowing: the device's own fixed scale (averaged over devices at one distance it has the
        same log-normal mean).
        """
        if self.per_round:
            return self.distance_gain * np.exp(0.5 * (self.shadowing_db * np.log(10.0) / 10.0) ** 2)
        return self.distance_gain * 10.0 ** (self.device_shadow_db / 10.0)


class PathLossChannel(Channel):
    """A fading model times a path-loss model: g_n = PathLoss.scale_n x |h_n|^2.

    The fading's gain floor applies to |h|^2 before path loss, so it stays a relative deep-fade clip.
    """

    def __init__(self, fading, path_loss: PathLoss):
        self.fading, self.path_loss = fading, path_loss

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One round's gains (the fading is drawn first, then any per-round shadowing)."""
        small = self.fading.draw(rng)
        return small * self.path_loss.scale(rng)

    def draw_devices(self, rng: np.random.Generator, devices: np.ndarray) -> np.ndarray:
        """Gains of ``devices`` alone: the fading's, then their shadowing."""
        return self.fading.draw_devices(rng, devices) * self.path_loss.scale(rng, devices)

    def mean_gain(self) -> np.ndarray | None:
        """Long-run mean gain of each device: PathLoss.mean_scale x E|h|^2 (ignoring the floor)."""
        fading = self.fading.mean_gain()
        return None if fading is None else self.path_loss.mean_scale() * fading

    def state_dict(self) -> dict:
        """The fading's state (the path loss is rebuilt from the scenario and its seed)."""
        return self.fading.state_dict()

    def load_state(self, state: dict) -> None:
        """Inverse of state_dict."""
        self.fading.load_state(state)


@dataclass(frozen=True)
class TraceOptions:
    """Options of a replayed trace."""

    trace: FilePath = option(doc="CSV or .npy file of rounds x devices (relative paths: from the scenario's folder)")
    trace_end: str = option("stop", choices=("stop", "cycle"),
                            doc="when the rounds run out: stop the run with an error, or start over")


class TraceChannel(Channel):
    """Measured gains |h_n|^2 replayed round by round from a file (rows: rounds, columns: devices).

    ``wirelessfl trace`` writes one from any scenario's channel. The gain floor does not apply
    (the trace is what was measured); path loss, if on, multiplies it. Its mean over the rounds is
    the mean gain. The next row is state: a resumed run continues where it stopped.
    """

    Options = TraceOptions

    def __init__(self, trace: Trace):
        self.trace = trace
        self.next_round = 0

    @classmethod
    def from_scenario(cls, scenario, options: TraceOptions) -> "TraceChannel":
        """The trace of options.trace (one column per device)."""
        return cls(Trace.read(options.trace, scenario.devices.count, "channel.trace", options.trace_end,
                              positive=True))

    @classmethod
    def check(cls, scenario, options: TraceOptions) -> None:
        """The file exists, parses, and has one column per device of positive gains."""
        Trace.read(options.trace, scenario.devices.count, "channel.trace", options.trace_end, positive=True)

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """The next round's row (rng unused)."""
        gains = self.trace.row(self.next_round)
        self.next_round += 1
        return gains

    def mean_gain(self) -> np.ndarray:
        """The trace's mean gain of every device."""
        return self.trace.values.mean(axis=0)

    def state_dict(self) -> dict:
        """The next row to replay."""
        return {"next_round": self.next_round}

    def load_state(self, state: dict) -> None:
        """Continue at the saved row."""
        self.next_round = int(state["next_round"])


CHANNELS = Registry("channel", "wirelessfl.wireless:Channel", {
    "rayleigh": "wirelessfl.wireless:RayleighFading",
    "gauss_markov": "wirelessfl.wireless:GaussMarkovFading",
    "rician": "wirelessfl.wireless:RicianFading",
    "trace": "wirelessfl.wireless:TraceChannel",
})
"""Built-in channels by the name ``channel.model`` gives them."""


def build_channel(scenario, rng: np.random.Generator | None = None) -> Channel:
    """The scenario's channel: its part (``channel.model``) times path loss when that is on.

    ``rng`` (the "cell" stream) places the devices and draws per-device shadowing; it is only used
    with path loss, at construction, so a resumed run rebuilds the same cell from the seed.
    """
    cfg = scenario.channel
    fading = scenario.part("channel").from_scenario(scenario, scenario.options("channel"))
    if not cfg.path_loss:
        return fading
    num_devices = scenario.devices.count
    if rng is None:
        raise ValueError("path loss needs an rng to place the devices and draw their shadowing")
    positions = (np.asarray(cfg.positions_m, dtype=float) if cfg.positions_m
                 else cell_positions(num_devices, cfg.cell_radius_m, rng))
    path_loss = PathLoss(positions,
                         reference_gain=10.0 ** (cfg.reference_gain_db / 10.0),
                         reference_distance_m=cfg.reference_distance_m, exponent=cfg.path_loss_exponent,
                         shadowing_db=cfg.shadowing_db, per_round=cfg.shadowing == "per_round", rng=rng)
    return PathLossChannel(fading, path_loss)


class Link:
    """Shannon-rate uplink: rate = B log2(1 + g P / N0); airtime = bits / rate; energy = P airtime."""

    def __init__(self, cfg):
        self.bandwidth_hz = cfg.bandwidth_hz
        self.noise_power = cfg.noise_power
        self.downlink_s = cfg.downlink_s
        self.downlink_rate_bps = cfg.downlink_rate_bps

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

    def energy_j(self, bits: float, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """Transmit energy P x airtime (0 where nothing is sent)."""
        gain, power = np.broadcast_arrays(np.asarray(gain, dtype=float), np.asarray(power, dtype=float))
        sending = power > 0
        energy = np.zeros(power.shape)
        energy[sending] = power[sending] * self.airtime_s(bits, gain[sending], power[sending])
        return energy


@dataclass
class UplinkSchedule:
    """What happened on the uplink in one round's computation-and-upload phase.

    order: indices into the selected devices, in the order their uploads started; tx_start: when
    each one's upload started (nan: it never started); arrived: its upload was complete by the
    deadline; end_s: when the phase ended (the last upload, or the deadline if one was missed).
    """

    order: np.ndarray
    tx_start: np.ndarray
    arrived: np.ndarray
    end_s: float


class TDMA:
    """Time division: one device at a time on the whole band, first come first served in order of
    computation completion; airtime = bits / (B log2(1 + g P / N0))."""

    concurrent = False

    def __init__(self, link: Link):
        self.link = link

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


class FDMA:
    """Frequency division: the k selected devices each get B / k and transmit at once.

    Thermal noise has a flat spectral density, so a sub-band of B / k carries noise N0 / k:
    rate = (B / k) log2(1 + g P k / N0) and airtime = bits / rate. The split is fixed for the
    round (a device that finishes early does not hand its sub-band to the others); each device
    starts as soon as its computation ends.
    """

    concurrent = True

    def __init__(self, link: Link):
        self.link = link

    def airtime_s(self, bits: float, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """Airtime of each of the k = len(gain) selected devices on its B / k sub-band."""
        gain, power = np.broadcast_arrays(np.asarray(gain, dtype=float), np.asarray(power, dtype=float))
        k = max(gain.size, 1)
        snr = gain * power * k / self.link.noise_power
        rate = self.link.bandwidth_hz / k * np.log1p(snr) / np.log(2.0)  # exact also for snr < 1e-16
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


def make_access(cfg, link: Link):
    """The multiple-access scheme named in the scenario."""
    return FDMA(link) if cfg.access == "fdma" else TDMA(link)
