"""Channels, links and multiple access. Knows nothing of learning.

A channel fits :class:`Channel`: ``draw(rng)`` gives one round's gains |h_n|^2. ``CHANNELS`` names
the built-ins ``channel.model`` accepts besides installed plugins and import paths:
RayleighFading (i.i.d.), GaussMarkovFading (correlated across rounds, has state), RicianFading and
TraceChannel (measured gains replayed from a file). PathLossChannel multiplies any of them by
distance path loss and log-normal shadowing (``channel.path_loss``; wirelessfl.path_loss), of positions that move with
``devices.mobility`` (wirelessfl.mobility: the engines tell the channel the clock, ``set_time``). The link (Shannon rates,
airtimes, energy, the downlink) and the access schemes are in wirelessfl.access.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from .capabilities import provides
from .fields import NoOptions, option
from .mobility import Mobility
from .fields import ConfigError
from .path_loss import PathLoss, Tr38901PathLoss, cell_positions, site_gains  # noqa: F401 (cell_positions: theirs too)
from .plugins import Registry
from .traces import Trace, TraceOptions


class Channel(Protocol):
    """A fading process: one draw of every device's gain |h_n|^2 per round (block fading).

    Required: ``from_scenario`` and ``draw``; subclass to inherit the optional parts. Capability
    (wirelessfl.capabilities): :class:`MovingDevices`.
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
        """Raise ConfigError if the scenario cannot run with this channel (default: the path loss's
        own ranges, ``check_path_loss``)."""
        check_path_loss(scenario)

    def draw_devices(self, rng: np.random.Generator, devices: np.ndarray) -> np.ndarray:
        """The gains of ``devices`` only, for one upload each (the event protocols draw a gain when
        an upload starts). Default: one whole ``draw``, indexed; override it when the devices can
        be drawn alone (i.i.d. fading), which makes each upload O(1) instead of O(N)."""
        return self.draw(rng)[devices]

    def draw_one(self, rng: np.random.Generator, device: int) -> float:
        """One device's gain as a float (an upload starting under the event protocols). Default:
        ``draw_devices`` of that device alone."""
        return float(self.draw_devices(rng, np.array([device]))[0])

    def mean_gain(self) -> np.ndarray | None:
        """E|h_n|^2 of every device (for devices.min_mean_snr_db and devices.csv); None: unknown."""
        return None

    def set_time(self, time_s: float) -> None:
        """The clock, before every draw (a round's start, an upload's start): channels that change
        with time, such as moving devices' path loss, move to it. Default: nothing."""

    def positions_m(self) -> np.ndarray | None:
        """Every device's position (N, 2) at the last ``set_time`` (None: the channel has none)."""
        return None

    def round_info(self) -> dict[str, float]:
        """Numbers of the channel's own for the row of rounds.csv of each round or aggregation (a
        column each, named by its key), read as the row is written. Default: none."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """The channel's memory, for checkpoints."""
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""


@runtime_checkable
class MovingDevices(Protocol):
    """A channel whose devices move: the mean gains follow their positions (``set_time`` moves them),
    and fading within an upload follows their path loss (wirelessfl.fading)."""

    mobility: Mobility | None
    """Where the devices are at each time (None: they stand still after all)."""
    path_loss: PathLoss
    """Their distance gains (``distance_gain``, ``distances_m``), moved with them."""

    def set_time(self, time_s: float) -> None:
        """Move the devices to where they are at ``time_s`` (see Channel)."""

    def positions_m(self) -> np.ndarray | None:
        """Every device's position (N, 2) at the last ``set_time`` (see Channel)."""


def changes_with_time(channel) -> bool:
    """Whether the channel moves with the clock (it has a ``set_time`` of its own): the engines then
    tell it the time before every draw, and only then can its devices hand over."""
    return type(channel).set_time is not Channel.set_time


def moving(channel) -> bool:
    """Whether the channel's devices move (:class:`MovingDevices` with a mobility; the built-in: a
    path-loss channel with devices.mobility other than static)."""
    return provides(channel, MovingDevices) and channel.mobility is not None


def sigma_profile(cfg, num_devices: int) -> np.ndarray:
    """Per-device Rayleigh scale sigma_n: homogeneous, linear from sigma_min to sigma_max, or a list."""
    if cfg.profile == "homogeneous":
        if cfg.sigma is not None:
            return np.full(num_devices, cfg.sigma)
        # unit-mean fading where the mean gain is a physical path loss
        return np.full(num_devices, math.sqrt(0.5) if cfg.path_loss == "38.901" else 1.0)
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
        self._mean_list = self._mean.tolist()  # Python floats: indexing them is cheaper than an array

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
        if len(devices) == 1:
            return np.array([self.draw_one(rng, int(devices[0]))])
        return np.maximum(rng.standard_exponential(len(devices)) * self._mean[devices], self.gain_floor)

    def draw_one(self, rng: np.random.Generator, device: int) -> float:
        """One device's gain: a scalar draw costs a fifth of an array's (the same number)."""
        return max(rng.standard_exponential() * self._mean_list[device], self.gain_floor)

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


class PathLossChannel(Channel):
    """A fading model times a path-loss model: g_n = PathLoss.scale_n x |h_n|^2.

    The fading's gain floor applies to |h|^2 before path loss, so it stays a relative deep-fade clip.
    """

    def __init__(self, fading, path_loss: PathLoss, mobility=None, sites=None, serving: np.ndarray | None = None):
        self.fading, self.path_loss = fading, path_loss
        self.mobility = mobility if mobility is not None and mobility.moving else None
        # several cells (wirelessfl.network): the sites, the cell serving each device, and each
        # device's mean gain to every site (N, C), what it interferes with at the other sites;
        # moving devices: their shadowing to every site, the handover hysteresis (a ratio) and the
        # handovers not yet recorded
        self.sites, self.serving, self.cross_mean = sites, serving, None
        self.site_shadow_db, self.hysteresis, self.fading_mean = None, 1.0, 1.0
        # the association part (network.association) and each device's mean gain to every site
        # where the devices are now (path loss and shadowing; devices.csv's gain_site_<c>)
        self.association, self.site_gain = None, None
        self.handovers: list[tuple] = []

    def set_time(self, time_s: float) -> None:
        """Moving devices (wirelessfl.mobility): the path loss of their positions at ``time_s``; with
        several cells, the handovers those positions call for (``reassociate``)."""
        if self.mobility is not None and time_s != self.mobility.now:
            self.path_loss.move(self.mobility.positions(time_s))
            if self.sites is not None:
                self.reassociate(time_s)

    def reassociate(self, time_s: float) -> None:
        """Ask the association part again where the devices are now; hand over every device whose
        answer differs from its serving cell and whose mean gain to that site beats its serving
        site's by more than the hysteresis: its serving cell, path loss and shadowing follow, and
        (time, device, from, to, x, y) joins ``handovers``, the ones not yet recorded."""
        positions, sites = self.path_loss.positions_m, self.sites.positions_m
        _, gains = site_gains(self.path_loss, positions, sites, self.site_shadow_db)
        self.site_gain = gains
        rows = np.arange(len(positions))
        best = serving_cells(self.association, positions, sites, gains)
        moving = (best != self.serving) & (gains[rows, best] > gains[rows, self.serving] * self.hysteresis)
        for n in np.flatnonzero(moving).tolist():
            self.handovers.append((float(time_s), n, int(self.serving[n]), int(best[n]),
                                   float(positions[n, 0]), float(positions[n, 1])))
        if moving.any():
            self.serving[moving] = best[moving]  # in place: the cells share the array
            self.path_loss.origins_m[moving] = sites[best[moving]]
            self.path_loss.device_shadow_db[moving] = self.site_shadow_db[moving, best[moving]]
            self.path_loss.move(positions)
        if self.cross_mean is not None:
            self.cross_mean[:] = gains * self.fading_mean

    def positions_m(self) -> np.ndarray:
        """Where the devices are (their positions at the last ``set_time``)."""
        return self.path_loss.positions_m

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
        """The fading's state (the path loss is rebuilt from the scenario and its seed), and with
        several cells the cell serving each device (handovers change it)."""
        state = self.fading.state_dict()
        return state if self.sites is None else {**state, "_serving": self.serving.tolist()}

    def load_state(self, state: dict) -> None:
        """Inverse of state_dict."""
        state = dict(state)
        serving = state.pop("_serving", None)
        self.fading.load_state(state)
        if serving is not None:  # the handovers so far: each device's serving site, path loss and shadowing
            self.serving[:] = serving
            self.path_loss.origins_m[:] = self.sites.positions_m[self.serving]
            self.path_loss.device_shadow_db[:] = self.site_shadow_db[np.arange(self.serving.size), self.serving]
            self.path_loss.move(self.path_loss.positions_m)


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
        check_path_loss(scenario)
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


def channel_columns(channel: Channel, num_devices: int, where: str = "channel.model") -> dict[str, np.ndarray]:
    """What a channel tells of its devices, for devices.csv: ``mean_gain`` (E|h_n|^2) and the
    positions ``x_m``, ``y_m`` at the run's end, each where the channel gives it (PartError when it
    gives something of the wrong shape)."""
    from .plugins import PartError

    columns = {}
    mean = channel.mean_gain()
    if mean is not None:
        mean = np.asarray(mean, dtype=float)
        if mean.shape != (num_devices,):
            raise PartError(f"{where}: mean_gain() gave shape {mean.shape}; it must give one value per device "
                            f"({num_devices},)")
        columns["mean_gain"] = mean
    path_loss = getattr(channel, "path_loss", None)
    if hasattr(path_loss, "device_columns"):  # TR 38.901: each device's state and path loss
        columns.update(path_loss.device_columns())
    positions = channel.positions_m()
    if positions is not None:
        positions = np.asarray(positions, dtype=float)
        if positions.shape != (num_devices, 2):
            raise PartError(f"{where}: positions_m() gave shape {positions.shape}; it must give (x, y) in metres "
                            f"per device ({num_devices}, 2)")
        columns.update(x_m=positions[:, 0], y_m=positions[:, 1])
    return columns


TR38901_BS_HEIGHT_M = {"uma": 25.0, "umi": 10.0, "rma": 35.0, "inh": 3.0}
"""TR 38.901 Table 7.2-1's base station heights, the default of channel.bs_height_m."""


def carrier_hz(scenario) -> float:
    """The carrier of the path loss and the Doppler: channel.carrier_hz, else link.carrier_hz."""
    given = scenario.channel.carrier_hz
    return scenario.link.carrier_hz if given is None else given


def bs_height_m(cfg) -> float:
    """The base station's height: channel.bs_height_m, else the TR 38.901 scenario's."""
    return TR38901_BS_HEIGHT_M[cfg.scenario] if cfg.bs_height_m is None else cfg.bs_height_m


def check_path_loss(scenario) -> None:
    """ConfigError (one line) where TR 38.901's path loss is asked for outside its validity ranges, or
    with something it does not model; antenna gains without it."""
    from .radio import tr38901

    cfg, link = scenario.channel, scenario.link
    if cfg.path_loss != "38.901":
        if link.bs_antenna_gain_db or link.ut_antenna_gain_db:
            field = "bs_antenna_gain_db" if link.bs_antenna_gain_db else "ut_antenna_gain_db"
            raise ConfigError(f"link.{field}: antenna gains are part of channel.path_loss = \"38.901\" (the "
                              "log-distance path loss has its own reference_gain_db)")
        return
    try:
        tr38901.check_validity(cfg.scenario, carrier_hz(scenario), bs_height_m(cfg), cfg.ut_height_m)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if cfg.reference_gain_db != 0.0 or cfg.path_loss_exponent != 3.0 or cfg.reference_distance_m != 1.0:
        raise ConfigError("channel.reference_gain_db, path_loss_exponent and reference_distance_m are the "
                          "log-distance path loss's (channel.path_loss = true); TR 38.901 has its own")


def build_channel(scenario, rng: np.random.Generator | None = None) -> Channel:
    """The scenario's channel: its part (``channel.model``) times path loss when that is on.

    ``rng`` (the "cell" stream) places the devices and draws per-device shadowing; it is only used
    with path loss, at construction, so a resumed run rebuilds the same cell from the seed.
    """
    cfg = scenario.channel
    check_path_loss(scenario)
    fading = scenario.part("channel").from_scenario(scenario, scenario.options("channel"))
    if not cfg.path_loss:
        return fading
    num_devices = scenario.devices.count
    if rng is None:
        raise ValueError("path loss needs an rng to place the devices and draw their shadowing")
    if scenario.network.cells > 1:
        return _cellular_channel(scenario, fading, rng)
    positions = (np.asarray(cfg.positions_m, dtype=float) if cfg.positions_m
                 else cell_positions(num_devices, cfg.cell_radius_m, rng))
    if cfg.path_loss == "38.901":
        path_loss = Tr38901PathLoss(positions, scenario=cfg.scenario, carrier_hz=carrier_hz(scenario),
                                    bs_height_m=bs_height_m(cfg), ut_height_m=cfg.ut_height_m, los=cfg.los,
                                    shadowing_db=cfg.shadowing_db, per_round=cfg.shadowing == "per_round",
                                    antenna_gain_db=scenario.link.bs_antenna_gain_db + scenario.link.ut_antenna_gain_db,
                                    rng=rng)
    else:
        path_loss = PathLoss(positions,
                         reference_gain=10.0 ** (cfg.reference_gain_db / 10.0),
                         reference_distance_m=cfg.reference_distance_m, exponent=cfg.path_loss_exponent,
                             shadowing_db=cfg.log_distance_shadowing_db, per_round=cfg.shadowing == "per_round",
                             rng=rng)
    dc = scenario.devices
    mobility = (Mobility(positions, cfg.cell_radius_m, dc.speed_mps, dc.mobility, scenario.seed)
                if dc.mobility != "static" else None)
    return PathLossChannel(fading, path_loss, mobility)


def _cellular_channel(scenario, fading, rng: np.random.Generator) -> PathLossChannel:
    """Several cells (wirelessfl.network): the sites, the devices placed among them (or at
    channel.positions_m), shadowing drawn to every site, each device served by the cell the
    association part (network.association) gives it, and its path loss to that site."""
    from .network import build_sites, place_devices
    from .plugins import registry

    cfg, net, n = scenario.channel, scenario.network, scenario.devices.count
    sites = build_sites(net)
    positions = (np.asarray(cfg.positions_m, dtype=float) if cfg.positions_m
                 else place_devices(n, sites, net.placement, rng))
    sigma = cfg.log_distance_shadowing_db
    per_device = cfg.shadowing == "per_device" and sigma > 0
    shape = (n, sites.count)
    shadow = rng.normal(0.0, sigma, shape) if per_device else np.zeros(shape)
    path_loss = PathLoss(positions, reference_gain=10.0 ** (cfg.reference_gain_db / 10.0),
                         reference_distance_m=cfg.reference_distance_m, exponent=cfg.path_loss_exponent,
                         shadowing_db=sigma, per_round=cfg.shadowing == "per_round", rng=rng,
                         origins_m=np.zeros((n, 2)), shadow_db=np.zeros(n))
    _, mean_gains = site_gains(path_loss, positions, sites.positions_m, shadow)
    association = registry("association").load(net.association, scenario.plugin_path).from_scenario(
        scenario, scenario.options("association"))
    serving = serving_cells(association, positions, sites.positions_m, mean_gains)
    path_loss.origins_m = sites.positions_m[serving]
    path_loss.device_shadow_db = shadow[np.arange(n), serving]
    path_loss.move(positions)
    dc = scenario.devices
    # moving devices stay in the disc around the origin that covers every cell
    mobility = (Mobility(positions, float(np.hypot(*sites.positions_m.T).max()) + sites.radius_m, dc.speed_mps,
                         dc.mobility, scenario.seed) if dc.mobility != "static" else None)
    channel = PathLossChannel(fading, path_loss, mobility, sites=sites, serving=serving)
    small = fading.mean_gain()  # E|h|^2 of each device: the fading on its links to the other sites too
    channel.fading_mean = 1.0 if small is None else np.asarray(small, dtype=float)[:, None]
    channel.cross_mean = mean_gains * channel.fading_mean
    channel.site_shadow_db, channel.hysteresis = shadow, 10.0 ** (net.handover_hysteresis_db / 10.0)
    channel.association, channel.site_gain = association, mean_gains
    return channel


def serving_cells(association, positions_m: np.ndarray, sites_m: np.ndarray, mean_gain: np.ndarray) -> np.ndarray:
    """The association part's serving cell of each device (copies in, its answer checked)."""
    from .network.association import checked_serving

    answer = association.associate(positions_m.copy(), sites_m.copy(), mean_gain.copy())
    return checked_serving(association, answer, len(positions_m), len(sites_m))


# The link and the access schemes live in wirelessfl.access (link.access names a part of its own);
# these names stay here for code written against them.
from .access import FDMA, TDMA, Link, UplinkSchedule  # noqa: E402,F401
