"""The scenario's tables: frozen dataclasses with their fields, ranges and one-line descriptions.

The six tables that name a part (``protocol.name``, ``scheduler.name``, ``learning.algorithm``,
``channel.model``, ``devices.compute``, ``link.access``) also carry the part's ``options`` and, in a scenario with variants or a
sweep, ``held`` options of other parts for the members that name them. The learning table also
names the model, the dataset and the partition, whose options are its sub-tables ``model_options``,
``dataset_options`` and ``partition_options``.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..capabilities import has_member
from ..units import dbm_to_w, noise_power_w
from ..fields import FilePath, Power, build_dataclass, option
from ..plugins import KIND_OF_TABLE, KINDS, registry
from .network_tables import HierarchyConfig, NetworkConfig
from .orbits_table import OrbitsConfig


class PluginOptions(Mapping):
    """The options of a part that declares no Options dataclass: a read-only table (the part gets a
    plain dict copy)."""

    def __init__(self, data: Mapping | None = None):
        self._data = copy.deepcopy(dict(data or {}))  # plain TOML values, any size (no JSON round trip)

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)

    def __eq__(self, other):
        return isinstance(other, PluginOptions) and self._data == other._data

    def __hash__(self):
        return hash(_frozen(self._data))

    def __repr__(self):
        return f"PluginOptions({self._data!r})"

    def to_dict(self) -> dict:
        """A deep copy as a plain dict (what the part receives)."""
        return copy.deepcopy(self._data)


def _frozen(value):
    """A hashable form of TOML values that equal values share (tables' key order does not count)."""
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def _part(default: str, kind: str, doc: str):
    """The field that names a part of ``kind``."""
    return field(default=default, metadata={"doc": doc, "part": kind})


def _options():
    return field(default=None, metadata={"options": True})


def _options_of(kind: str):
    """The sub-table of the options of the part of ``kind`` (named by the table's field ``kind.key``)."""
    return field(default=None, metadata={"options_of": kind})


def _held():
    return field(default=None, metadata={"held": True})


class _PartTable:
    """A table that names a part: its ``options`` are the part's (default options when omitted);
    ``held`` keeps, in a scenario with variants or a sweep, options of other parts for the members
    that name them."""

    def __post_init__(self):
        if self.options is None:
            kind = _kind_of(type(self))
            name = getattr(self, kind.key)
            object.__setattr__(self, "options", _default_options(registry(kind.name).load(name)))
        if self.held is None:
            object.__setattr__(self, "held", PluginOptions())
        for f in dataclasses.fields(self):
            if "options_of" in f.metadata and getattr(self, f.name) is None:
                kind = KINDS[f.metadata["options_of"]]
                part = registry(kind.name).load(getattr(self, kind.key))
                object.__setattr__(self, f.name, _default_options(part))


def _kind_of(cls):
    return next(KINDS[f.metadata["part"]] for f in dataclasses.fields(cls) if "part" in f.metadata)


def _default_options(part: type):
    schema = part.Options
    return PluginOptions() if schema is None else build_dataclass(schema, {}, "options")


@dataclass(frozen=True)
class RunConfig:
    """When a run stops and how often the model is evaluated."""

    rounds: int | None = option(None, ge=1, doc="stop after this many rounds")
    time_budget_s: float | None = option(None, gt=0, doc="stop once the simulated clock passes this")
    target_accuracy: float | None = option(None, gt=0, le=1, doc="accuracy for time-to-target")
    stop_at_target: bool = option(False, doc="stop as soon as target_accuracy is reached")
    eval_every_rounds: int | None = option(None, ge=1, doc="evaluate every k rounds (default 10)")
    eval_every_s: float | None = option(None, gt=0, doc="evaluate every dt simulated seconds")
    eval_at_start: bool = option(True, doc="evaluate the initial model at time 0 (the first point of the "
                                 "accuracy curve); false: training starts at once")
    timing_only: bool = option(False, doc="run the event loop without training")
    checkpoint_every: int | None = option(None, ge=1, doc="write a checkpoint every k rounds")
    round_deadline_s: float | None = option(None, gt=0, doc="uploads not done this long after the "
                                            "round started are dropped; the round ends then")
    idle_round_s: float = option(0.01, gt=0, doc="how long a round lasts in which nothing takes time (nobody "
                                 "can be scheduled and there is no downlink or server work): a frame; the "
                                 "clock always advances, so a time budget always ends")
    record_devices: bool = option(True, doc="stream per-round arrays of every device to decisions.h5")
    device: str = option("cpu", doc="torch device for training, e.g. cpu or cuda")
    threads: int = option(1, ge=1, doc="torch intra-op threads while the run trains (part of the "
                                        "scenario so results do not depend on where it runs)")
    batching: str = option("auto", choices=("auto", "vmap", "loop"), doc="how the selected devices' local "
                           "steps are computed: one vectorised call (vmap), one device after another (loop), "
                           "or auto (the path measured faster for the model, device type and number of devices: "
                           "Trainer.batching_for)")
    personalised_eval: bool | None = option(None, doc="also record personal_accuracy (each device "
                                            "adapts the model by one step of learning.per_alpha on its "
                                            "own data and is tested on its own test split); default: on "
                                            "for the Per-FedAvg algorithms and the perfedavg partitions")

@dataclass(frozen=True)
class ChannelConfig(_PartTable):
    """Block fading (one draw per device per round), optionally times path loss and shadowing.

    ``model`` names the fading process (wirelessfl.wireless.CHANNELS: "rayleigh", "gauss_markov",
    "rician", "trace", or a plugin); sigma_n follows ``profile``. Path loss (path_loss = true): the
    gain is the fading |h|^2 times reference_gain x (d / d0)^-exponent x 10^(X / 10),
    X ~ N(0, shadowing_db^2), base station at (0, 0).
    """

    model: str = _part("rayleigh", "channel", "the fading model: a built-in name, an installed plugin or 'module:Class'")
    profile: str = option("homogeneous", choices=("homogeneous", "linear", "list"),
                          doc="how sigma_n is set across devices")
    sigma: float | None = option(None, gt=0, doc="sigma of every device (homogeneous; default 1, E|h|^2 = 2 as the "
                                 "papers have it, or 1/sqrt(2), unit mean, with path_loss = \"38.901\")")
    sigma_min: float = option(0.1, gt=0, doc="sigma of device 0 (linear)")
    sigma_max: float = option(10.0, gt=0, doc="sigma of device N-1 (linear)")
    sigmas: tuple[float, ...] = option((), gt=0, doc="one sigma per device (list)")
    gain_floor: float = option(1e-3, ge=0, doc="lower clip of the fading |h|^2 (before path loss)")
    coherence_s: float | None = option(None, gt=0, doc="fading within an upload: a long upload's channel changes "
                                       "every this many seconds (default: one gain per upload; with "
                                       "devices.speed_mps, 0.423 / f_D)")
    path_loss: bool | str = option(False, choices=(False, True, "38.901"),
                                   doc="multiply the fading gain by path loss and shadowing: true (log-distance, "
                                       "below), or \"38.901\" (3GPP TR 38.901 with channel.scenario, carrier_hz and "
                                       "the heights; docs/radio.md)")
    scenario: str = option("uma", choices=("uma", "umi", "rma", "inh"),
                           doc="path_loss = \"38.901\": urban macro, urban micro (street canyon), rural macro or "
                               "indoor office (mixed)")
    los: str = option("random", choices=("random", "los", "nlos"),
                      doc="path_loss = \"38.901\": each device's line of sight, drawn with the TR 38.901 "
                          "probability, or forced")
    carrier_hz: float | None = option(None, gt=0, doc="carrier of the path loss (and of the Doppler; default "
                                      "link.carrier_hz)")
    bs_height_m: float | None = option(None, gt=0, doc="path_loss = \"38.901\": base station height (default: the "
                                       "scenario's, 25 m UMa, 10 m UMi and RMa, 3 m InH)")
    ut_height_m: float = option(1.5, gt=0, le=1e5, doc="path_loss = \"38.901\": device height")
    cell_radius_m: float = option(100.0, gt=0, doc="devices are drawn uniformly in this disc")
    positions_m: tuple[tuple[float, ...], ...] = option((), doc="one [x, y] per device (else drawn)")
    reference_distance_m: float = option(1.0, gt=0, doc="d0; closer devices count as at d0")
    reference_gain_db: float = option(0.0, doc="path gain at d0 in dB")
    path_loss_exponent: float = option(3.0, gt=0)
    shadowing_db: float | None = option(None, ge=0, doc="standard deviation of log-normal shadowing in dB (default: "
                                        "0 for the log-distance path loss, TR 38.901's per state for \"38.901\"; 0: none)")
    shadowing: str = option("per_device", choices=("per_device", "per_round"),
                            doc="shadowing drawn once per device, or afresh every round")
    options: Any = _options()
    held: Any = _held()

    @property
    def log_distance_shadowing_db(self) -> float:
        """The shadowing of the log-distance path loss (none unless shadowing_db sets it)."""
        return 0.0 if self.shadowing_db is None else self.shadowing_db


@dataclass(frozen=True)
class LinkConfig(_PartTable):
    """Uplink: rate B log2(1 + g P / N0), airtime = model bits / rate, energy = P x airtime; ``access``
    names how uploads share it (wirelessfl.access.ACCESS: "tdma", "tdma_slotted", "fdma", "ofdma", "aircomp", an installed
    plugin or 'module:Class')."""

    access: str = _part("tdma", "access", "the access scheme: tdma (one device at a time on the whole band), "
                        "tdma_slotted (in slots and frames), fdma (band split evenly), ofdma (resource blocks with "
                        "a gain each), aircomp (over-the-air sum of the updates), an installed plugin or "
                        "'module:Class'")
    bandwidth_hz: float = option(22e6, gt=0)
    noise_power: Power = option(1.0, gt=0, doc="N0 (linear, or a string in dB)")
    p_bar: Power = option(1.0, gt=0, doc="time-average power budget per device")
    p_max: Power = option(10 ** 3.5, gt=0, doc="peak transmit power")
    downlink_s: float = option(0.0, ge=0, doc="fixed broadcast time of the global model per round")
    downlink_rate_bps: float | None = option(None, gt=0, doc="downlink = 'fixed': adds model_bits / rate to "
                                             "downlink_s; broadcast and unicast: the model goes at this fixed rate "
                                             "(default: at the capacity of the weakest receiver, or of each)")
    downlink: str = option("fixed", choices=("fixed", "broadcast", "unicast"),
                           doc="how the model reaches the devices: fixed (downlink_s and downlink_rate_bps, the same "
                               "for all, never lost); broadcast (once to the devices that start together, at the "
                               "rate of the weakest at bs_power); unicast (to each on a channel of its own at its "
                               "own rate); docs/energy.md")
    bs_power: Power = option(100.0, gt=0, doc="downlink = 'broadcast' or 'unicast': the base station's transmit "
                             "power (linear, or a string in dB); a device's downlink SNR is g bs_power / N0")
    downlink_errors: str = option("none", choices=("none", "outage", "waterfall"),
                                  doc="downlink errors: none; outage (a device whose capacity is below "
                                      "downlink_rate_bps misses the model); waterfall (it misses with 1 - exp(-m / SNR))")
    downlink_max_attempts: int = option(1, ge=1, doc="transmissions of the model to a device that missed it before "
                                        "it gives up (downlink_miss says what it does then)")
    downlink_miss: str = option("wait", choices=("wait", "stale"),
                                doc="a device that missed the model: wait (it does not train this time; outcome "
                                    "'downlink') or stale (it trains from the last model it received; its staleness "
                                    "counts the versions it missed; event protocols)")
    model_bits: int | None = option(None, ge=1, doc="upload size; default 32 x model parameters")
    carrier_hz: float = option(2e9, gt=0, doc="carrier frequency (with devices.speed_mps: the Doppler shift)")
    packet_bits: int | None = option(None, ge=1, doc="an upload is sent in packets of this many bits (the last "
                                     "one shorter); default: one packet")
    rate_bps: float | None = option(None, gt=0, doc="fixed transmission rate of the packets; default: each "
                                    "transmission at the capacity B log2(1 + g P / N0) of its channel")
    errors: str = option("none", choices=("none", "outage", "waterfall"),
                         doc="packet errors: none; outage (a packet fails when the capacity is below the fixed "
                             "rate); waterfall (fails with PER = 1 - exp(-m / SNR))")
    waterfall_m: float = option(1.0, gt=0, doc="m of the waterfall error model")
    max_attempts: int = option(1, ge=1, doc="transmissions of a packet (ARQ) before its upload is lost")
    rate: str = option("shannon", doc="the link abstraction: shannon (B log2(1 + SINR)), nr or lte (MCS, BLER and "
                       "HARQ; wirelessfl.radio.rates), an installed plugin or 'module:Class'; options in rate_options")
    rate_options: Any = _options_of("rate")
    tx_power_dbm: float | None = option(None, ge=-100, le=100, doc="physical units: the devices' transmit power in dBm (sets p_bar, "
                                        "and p_max unless p_max_dbm does)")
    p_max_dbm: float | None = option(None, ge=-100, le=100, doc="physical units: the peak transmit power in dBm (sets p_max)")
    noise_figure_db: float | None = option(None, ge=0, le=100, doc="physical units: the receiver's noise figure; the noise "
                                           "is noise_psd_dbm_hz + noise_figure_db + 10 log10(bandwidth_hz) (sets "
                                           "noise_power in watts)")
    noise_psd_dbm_hz: float = option(-174.0, ge=-300, le=0, doc="physical units: the thermal noise density")
    bs_antenna_gain_db: float = option(0.0, ge=-100, le=100, doc="the base station's antenna gain (with channel.path_loss = \"38.901\")")
    ut_antenna_gain_db: float = option(0.0, ge=-100, le=100, doc="the devices' antenna gain (with channel.path_loss = \"38.901\")")
    options: Any = _options()
    held: Any = _held()

    def __post_init__(self):
        super().__post_init__()
        # physical units at the edge, watts inside: every consumer of noise_power, p_bar, p_max reads watts
        if self.noise_figure_db is not None:
            object.__setattr__(self, "noise_power", noise_power_w(self.bandwidth_hz, self.noise_figure_db,
                                                                  self.noise_psd_dbm_hz))
        if self.tx_power_dbm is not None:
            object.__setattr__(self, "p_bar", dbm_to_w(self.tx_power_dbm))
            object.__setattr__(self, "p_max", dbm_to_w(self.tx_power_dbm))
        if self.p_max_dbm is not None:
            object.__setattr__(self, "p_max", dbm_to_w(self.p_max_dbm))

    @property
    def physical(self) -> bool:
        """Whether the noise or the power is given in physical units."""
        return self.noise_figure_db is not None or self.tx_power_dbm is not None or self.p_max_dbm is not None

    def derived_fields(self) -> tuple[str, ...]:
        """The linear fields computed from physical ones (left out when the scenario is written back)."""
        return tuple(name for name, source in (("noise_power", self.noise_figure_db), ("p_bar", self.tx_power_dbm),
                                               ("p_max", self.tx_power_dbm if self.p_max_dbm is None
                                                else self.p_max_dbm)) if source is not None)

@dataclass(frozen=True)
class DevicesConfig(_PartTable):
    """The devices, their computation time per round (they compute in parallel) and availability.

    ``compute`` names the computation model (wirelessfl.devices.COMPUTE: "constant", "cpu",
    "shifted_exponential", "trace", or a plugin). Availability: a two-state Markov chain per device
    (p_on_to_off = 0: always available), or a trace of on/off rows.
    """

    count: int = option(100, ge=1, doc="number of devices N")
    compute: str = _part("constant", "compute", "the computation model: a built-in name, an installed "
                         "plugin or 'module:Class'")
    step_time_s: float = option(0.0, ge=0, doc="computation time per local step, added to the "
                                "model's time: unequal local work makes stragglers")
    speed_mps: float = option(0.0, ge=0, doc="device speed: with link.carrier_hz the Doppler f_D = v f_c / c sets "
                              "the correlation J0(2 pi f_D T_c) of the fading from one coherence time to the next")
    mobility: str = option("static", choices=("static", "constant_velocity", "random_waypoint"),
                           doc="how devices move in the cell at speed_mps (needs channel.path_loss): "
                               "static, constant_velocity (one direction, reflected at the cell's edge) or "
                               "random_waypoint (straight to uniform points of the cell, no pause)")
    p_on_to_off: float = option(0.0, ge=0, le=1, doc="per-round probability an available device leaves")
    p_off_to_on: float = option(1.0, gt=0, le=1, doc="per-round probability an unavailable one returns")
    availability_period_s: float = option(1.0, gt=0, doc="event protocols: the availability chain (or trace "
                                          "row) steps every this many simulated seconds, and a device that is "
                                          "off after a step loses the update it was computing or uploading")
    availability_trace: FilePath | None = option(None, doc="CSV or .npy of rounds x devices, 1 = available "
                                                 "(replaces the Markov chain)")
    availability_trace_end: str = option("stop", choices=("stop", "cycle"),
                                         doc="when the trace runs out: stop with an error, or start over")
    availability: str = option("chain", choices=("chain", "battery"),
                               doc="who can be reached: chain (the Markov chain p_on_to_off / p_off_to_on, or "
                                   "availability_trace) or battery (each device's charge: the battery_* and harvest_* "
                                   "options, docs/energy.md)")
    battery_capacity_j: float = option(1000.0, gt=0, doc="availability = 'battery': each device's capacity, joules")
    battery_initial_j: float | None = option(None, ge=0, doc="the charge each device starts with (None: full)")
    battery_threshold: float = option(0.1, ge=0, le=1, doc="a device holding less than this fraction of its "
                                      "capacity at a step is unavailable (and one a task leaves below it, at once)")
    harvest: str = option("none", doc="energy arriving at each step (the first at t = 0; then each round's start "
                          "under sync, every availability_period_s under event protocols): none; bernoulli (harvest_j "
                          "with probability harvest_p); poisson (a Poisson number, mean harvest_mean, of harvest_j "
                          "each); trace (a trace's row of joules); an installed plugin or 'module:Class' "
                          "(wirelessfl.harvest); options in harvest_options")
    harvest_options: Any = _options_of("harvest")
    harvest_j: float = option(1.0, ge=0, doc="joules per harvested arrival")
    harvest_p: float = option(0.5, ge=0, le=1, doc="harvest = 'bernoulli': the probability of an arrival per step")
    harvest_mean: float = option(1.0, ge=0, doc="harvest = 'poisson': the mean number of arrivals per step")
    harvest_trace: FilePath | None = option(None, doc="harvest = 'trace': CSV or .npy of steps x devices, joules "
                                            "harvested (>= 0)")
    harvest_trace_end: str = option("stop", choices=("stop", "cycle"),
                                    doc="when the harvest trace runs out: stop with an error, or start over")
    rx_power_w: float = option(0.1, ge=0, doc="batteries: the power a device draws while it receives the model "
                                "(the broadcast's duration, link.downlink_s and link.downlink_rate_bps)")
    excluded: tuple[int, ...] = option((), ge=0, doc="devices that never take part (incomplete "
                                       "participation, docs/papers/safari.md): never available to the scheduler")
    excluded_count: int = option(0, ge=0, doc="this many more devices, drawn once from the 'exclusion' "
                                 "stream, never take part")
    min_mean_snr_db: float | None = option(None, doc="devices whose mean SNR E|h|^2 p_bar / N0 (2 sigma^2 "
                                           "p_bar / N0 for Rayleigh) is below this never transmit")
    options: Any = _options()
    held: Any = _held()


@dataclass(frozen=True)
class ProtocolConfig(_PartTable):
    """When the server aggregates: ``name`` (wirelessfl.sim.protocols.PROTOCOLS: "sync", "semi_sync",
    "fedbuff", "fedasync", an installed plugin or 'module:Class') and its options."""

    name: str = _part("sync", "protocol", "the round protocol: a built-in name, an installed plugin or "
                      "'module:Class'")
    options: Any = _options()
    held: Any = _held()


@dataclass(frozen=True)
class SchedulerConfig(_PartTable):
    """Which devices transmit and at what power: ``name`` (wirelessfl.scheduling.SCHEDULERS,
    an installed plugin or 'module:Class') and its options."""

    name: str = _part("lyapunov", "scheduler", "the scheduler: a built-in name, an installed plugin or "
                      "'module:Class'")
    options: Any = _options()
    held: Any = _held()


@dataclass(frozen=True)
class LearningConfig(_PartTable):
    """Data, model, the local update rule and the learning algorithm (``algorithm``:
    wirelessfl.learning.ALGORITHMS, an installed plugin or 'module:Class', with its options)."""

    dataset: str = option("fashion_mnist", doc="the dataset: fashion_mnist, mnist, cifar10, synthetic "
                          "(wirelessfl.learning.DATASETS), an installed plugin or 'module:Class'")
    data_dir: str = option("", doc="directory with the dataset files (default: standard places)")
    model: str = option("small_cnn", doc="the model: paper_cnn, small_cnn, mlp, logreg, mlp_80_60, "
                        "lenet (wirelessfl.learning.MODELS), an installed plugin or 'module:Name'")
    partition: str = option("dirichlet_per_device",
                            doc="the split over devices: dirichlet_per_device, label_dirichlet, iid, "
                                "perfedavg_groups, perfedavg_groups_single, classes_per_device "
                                "(wirelessfl.learning.PARTITIONS), an installed plugin or 'module:Class'; "
                                "perfedavg_groups: Per-FedAvg's Table 2 layout, 10 groups, type-A devices "
                                "hold samples_per_device = 5a samples (a of classes 0-4), type-B devices a/2 "
                                "of class j and 2a of class j+5; _single: type-B devices hold class j+5 only; "
                                "classes_per_device: the SAFARI paper's non-iid index p (docs/papers/safari.md), "
                                "each device holds learning.classes_per_device classes, each class "
                                "is held by p N / 10 devices and split evenly among them")
    classes_per_device: int = option(2, ge=1, le=10, doc="classes_per_device: p distinct classes per "
                                     "device (10: nearly iid, 1: one class each)")
    class_assignment: str = option("random", choices=("random", "ordered"),
                                   doc="classes_per_device: random class sets (the paper), or ordered: "
                                       "dealt in label order, device n first gets class n 10 // (p N)")
    alpha: float = option(1.0, ge=0, allow_inf=True, doc="Dirichlet concentration; 0 one class, inf iid")
    samples_per_device: int = option(500, ge=1)
    synthetic_alpha: float = option(1.0, ge=0, doc="Synthetic(alpha, beta): spread of the device models")
    synthetic_beta: float = option(1.0, ge=0, doc="Synthetic(alpha, beta): spread of the device inputs")
    algorithm: str = _part("fedavg", "algorithm", "the learning algorithm: a built-in name, an installed "
                           "plugin or 'module:Class'")
    aux_samples: int = option(0, ge=0, doc="size n_T of the server's auxiliary set, drawn uniformly "
                              "from the training set (stream 'aux') and removed from the devices' pool")
    local_steps: int = option(10, ge=1, le=1_000_000, doc="K local SGD steps (at most a million)")
    batch_size: int = option(32, ge=1)
    lr: float = option(0.01, gt=0, doc="local step size gamma")
    size_sigma: float = option(0.0, ge=0, doc="unequal dataset sizes: samples_per_device x "
                               "LogNormal(-sigma^2/2, sigma) per device (iid, dirichlet_per_device)")
    eval_train_samples: int = option(10000, ge=1, doc="training samples used for the train loss")
    per_alpha: float = option(0.01, ge=0, doc="step size of the personalised evaluation's adaptation "
                              "step (and Per-FedAvg's inner step size alpha)")
    per_adapt_on: str = option("train", choices=("train", "test"), doc="personalised evaluation: the "
                               "adaptation batch comes from the device's train data (default) or its test "
                               "split (the paper's wording; leaks the test data)")
    fairness_metrics: bool | None = option(None, doc="record per-device test accuracy and client "
                                           "dissimilarity at every evaluation (default: on for the fair "
                                           "schedulers random ... unionfl, off otherwise)")
    device_test_samples: int = option(100, ge=1, doc="size of each device's own test split, label-matched to "
                                      "its training data (fairness metrics, personalised evaluation; the "
                                      "perfedavg partitions bring their own split)")
    model_options: Any = _options_of("model")
    dataset_options: Any = _options_of("dataset")
    partition_options: Any = _options_of("partition")
    compression: str = option("none", doc="what a device's update is sent as: none (32-bit floats), float16, "
                              "topk, randk, qsgd, sign (wirelessfl.learning.compression: COMPRESSORS), an "
                              "installed plugin or 'module:Class'; its options in compression_options")
    compression_options: Any = _options_of("compression")
    options: Any = _options()
    held: Any = _held()


class _Rebuild:
    """How a Scenario is built again with changes: ``config.build`` (which builds scenarios, above this
    module of plain data) puts its ``member`` and ``replace`` here when it loads."""

    member: Callable[..., "Scenario"]
    replace: Callable[..., "Scenario"]


REBUILD = _Rebuild()


@dataclass(frozen=True)
class Scenario:
    """One fully resolved simulation, or a family of them through variants and sweep."""

    name: str = option("scenario")
    radio: str | None = option(None, doc="a preset of physical radio values (wirelessfl.config.radio_presets: "
                               "nr_uma_3_5ghz, nr_umi_3_5ghz, lte_uma_2ghz, inh_office_5ghz) filling [link] and "
                               "[channel] keys the file does not set")
    seed: int = option(0, ge=0, doc="root seed of every random stream")
    plugin_path: tuple[FilePath, ...] = option((), doc="folders searched for 'module:Class' parts before sys.path "
                                          "(load_scenario adds the scenario file's folder when a part is there)")
    run: RunConfig = field(default_factory=RunConfig)
    channel: ChannelConfig = field(default_factory=ChannelConfig)
    link: LinkConfig = field(default_factory=LinkConfig)
    devices: DevicesConfig = field(default_factory=DevicesConfig)
    protocol: ProtocolConfig = field(default_factory=ProtocolConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    learning: LearningConfig = field(default_factory=LearningConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    hierarchy: HierarchyConfig = field(default_factory=HierarchyConfig)
    orbits: OrbitsConfig | None = None  # FL over satellites (config.orbits_table); None: no orbits
    variants: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    sweep: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    def variant_scenarios(self) -> list[tuple[str, "Scenario"]]:
        """Expand [variants] into (name, scenario) pairs; a scenario without variants is its own."""
        if not self.variants:
            return [(self.name, self)]
        return [(vname, self.member(*ov, ("name", vname))) for vname, ov in self.variants]

    def member(self, *assignments: tuple[str, Any]) -> "Scenario":
        """One run of this family: the scenario without variants and sweep, with (key, value) set.

        The member's parts keep the options set for them in this scenario (also those held for other
        parts, when the assignments name those parts); options no part of the member takes are dropped.
        """
        return REBUILD.member(self, *assignments)

    def replace(self, *overrides: str) -> "Scenario":
        """A copy with dotted overrides such as ``"scheduler.V=1000"`` applied and validated."""
        return REBUILD.replace(self, *overrides)

    def part_name(self, kind: str) -> str:
        """The name the scenario gives the part of ``kind`` ("protocol", "scheduler", "algorithm", "channel",
        "compute", "access", "model", "dataset", "partition")."""
        k = KINDS[kind]
        return getattr(getattr(self, k.table), k.key)

    def part(self, kind: str) -> type:
        """The class of the part of ``kind``."""
        return registry(kind).load(self.part_name(kind), self.plugin_path)

    @property
    def facts(self) -> "Facts":
        """What this scenario's parts declare that other parts may depend on (:class:`Facts`)."""
        return Facts.of(self)

    def options(self, kind: str):
        """The options of the part of ``kind``: its Options instance, or a dict."""
        opts = getattr(getattr(self, KINDS[kind].table), KINDS[kind].options_key)
        if opts is None:  # a table built in code, not read (network.association_options): the part's defaults
            opts = _default_options(self.part(kind))
        return opts.to_dict() if isinstance(opts, PluginOptions) else opts

    def accepts(self, key: str) -> bool:
        """Whether the dotted ``key`` is a field of this scenario (a table's own field or an option
        of the part it names), so that an override of it takes effect."""
        parts = key.split(".")
        if len(parts) == 1:
            return parts[0] in {f.name for f in dataclasses.fields(self)}
        table = getattr(self, parts[0], None)
        if not dataclasses.is_dataclass(table):
            return False
        names = {f.name for f in dataclasses.fields(table)} - {"options", "held"}
        if len(parts) == 2 and parts[1] in names:
            return True
        secondary = next((k for k in KINDS.values() if k.table == parts[0] and not k.owns_table
                          and k.options_key == parts[1]), None)
        if secondary is not None:
            opts = getattr(table, secondary.options_key)
            return len(parts) == 3 and (isinstance(opts, PluginOptions)
                                        or parts[2] in {f.name for f in dataclasses.fields(opts)})
        kind = KIND_OF_TABLE.get(parts[0])
        if kind is None:
            return False
        leaf = parts[2] if len(parts) == 3 and parts[1] == "options" else parts[1] if len(parts) == 2 else None
        opts = table.options
        if leaf is None:
            return False
        if isinstance(opts, PluginOptions):
            return parts[1] == "options"
        return leaf in {f.name for f in dataclasses.fields(opts)}


SPECIAL = ("variants", "sweep")
TABLES = {"run": RunConfig, "channel": ChannelConfig, "link": LinkConfig, "devices": DevicesConfig,
          "protocol": ProtocolConfig, "scheduler": SchedulerConfig, "learning": LearningConfig,
          "network": NetworkConfig, "hierarchy": HierarchyConfig, "orbits": OrbitsConfig}
OPTIONAL_TABLES = ("orbits",)
"""Tables that are None unless the file gives them (the scenario then writes back as before)."""


@dataclass(frozen=True)
class Facts:
    """What a scenario's parts declare that other parts may depend on, each read from the part that
    declares it, so that a part's ``check`` reads a fact rather than another part's class:

    - event_driven: the event engine runs the protocol, which says what an arrival does
      (``on_arrival``; wirelessfl.sim.protocols.event_driven): every built-in but sync, whose rounds
      are in closed form;
    - stale_updates: the protocol applies updates computed from an older model: as its options say
      (``stale_updates``, the capability DecidesStaleUpdates: semi_sync carrying late uploads), else
      when it is event-driven without rounds (no ``on_round``: fedbuff, fedasync);
    - mixes_device_models: the protocol moves the model toward each device's model rather than by
      its delta (``keeps_start_model``, the capability MixesDeviceModels: fedasync);
    - inclusion_probabilities: the scheduler's Decision.q are the devices' inclusion probabilities
      (``Scheduler.inclusion_probabilities``; fair selection picks its devices itself);
    - over_the_air: the uplink delivers only the sum of the updates sent together
      (``AccessScheme.over_the_air``: aircomp);
    - runs_in_tiers: the algorithm runs with edge servers and a cloud (``Algorithm.runs_in_tiers``);
    - probes: the scheduler asks devices for reports before it decides (``Scheduler.probe``).
    """

    event_driven: bool
    stale_updates: bool
    mixes_device_models: bool
    inclusion_probabilities: bool
    over_the_air: bool
    runs_in_tiers: bool
    probes: bool = False

    @classmethod
    def of(cls, scenario: Scenario) -> "Facts":
        protocol = scenario.part("protocol")  # its capabilities by name: wirelessfl.sim.protocols.base
        events = has_member(protocol, "on_arrival")
        stale = (protocol.stale_updates(scenario.options("protocol")) if has_member(protocol, "stale_updates")
                 else events and not has_member(protocol, "on_round"))
        return cls(event_driven=events, stale_updates=bool(stale),
                   mixes_device_models=bool(getattr(protocol, "keeps_start_model", False)),
                   inclusion_probabilities=bool(getattr(scenario.part("scheduler"), "inclusion_probabilities", True)),
                   over_the_air=bool(getattr(scenario.part("access"), "over_the_air", False)),
                   runs_in_tiers=bool(getattr(scenario.part("algorithm"), "runs_in_tiers", lambda: False)()),
                   probes=has_member(scenario.part("scheduler"), "probe"))
