"""Scenarios: frozen dataclasses loaded from TOML, with dotted overrides and strict validation.

A scenario file has one table per concern ([run], [channel], [link], [devices], [scheduler],
[learning]) plus two optional tables that expand one file into several runs:
[variants.NAME] (dotted overrides per named variant, e.g. lyapunov vs uniform) and [sweep]
(grids of values). Unknown keys, wrong types and out-of-range values raise ConfigError naming the
field path, the value and what is allowed. This module does not import torch.
"""
from __future__ import annotations

import dataclasses
import math
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, NewType

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

Power = NewType("Power", float)
"""A power in linear units; the file may also give it as a string in decibels, e.g. "35 dB"."""


class ConfigError(ValueError):
    """A scenario value is missing, unknown, of the wrong type or out of range."""


def _field(default: Any, *, ge=None, gt=None, le=None, lt=None, choices=None, doc: str = ""):
    """A dataclass field with its allowed range, choices and a one-line description."""
    meta = {"ge": ge, "gt": gt, "le": le, "lt": lt, "choices": choices, "doc": doc}
    if isinstance(default, (list, dict)):
        raise TypeError("mutable default")
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class RunConfig:
    """When a run stops and how often the model is evaluated."""

    rounds: int | None = _field(None, ge=1, doc="stop after this many rounds")
    time_budget_s: float | None = _field(None, gt=0, doc="stop once the simulated clock passes this")
    target_accuracy: float | None = _field(None, gt=0, le=1, doc="accuracy for time-to-target")
    stop_at_target: bool = _field(False, doc="stop as soon as target_accuracy is reached")
    eval_every_rounds: int | None = _field(None, ge=1, doc="evaluate every k rounds (default 10)")
    eval_every_s: float | None = _field(None, gt=0, doc="evaluate every dt simulated seconds")
    timing_only: bool = _field(False, doc="run the event loop without training")
    checkpoint_every: int | None = _field(None, ge=1, doc="write a checkpoint every k rounds")
    round_deadline_s: float | None = _field(None, gt=0, doc="uploads not done this long after the "
                                            "round started are dropped; the round ends then")
    record_devices: bool = _field(True, doc="keep per-round arrays of every device (decisions.npz)")
    device: str = _field("cpu", doc="torch device for training, e.g. cpu or cuda")
    threads: int = _field(1, ge=1, doc="torch intra-op threads while the run trains (part of the "
                                        "scenario so results do not depend on where it runs)")
    batching: str = _field("auto", choices=("auto", "vmap", "loop"), doc="how the selected devices' local "
                           "steps are computed: one vectorised call (vmap), one device after another (loop), "
                           "or auto (the path measured faster for the model, device type and number of devices: "
                           "Trainer.batching_for)")
    personalised_eval: bool | None = _field(None, doc="also record personal_accuracy (each device "
                                            "adapts the model by one step of learning.per_alpha on its "
                                            "own data and is tested on its own test split); default: on "
                                            "for the Per-FedAvg algorithms and the perfedavg partitions")


@dataclass(frozen=True)
class ChannelConfig:
    """Block fading (one draw per device per round), optionally times path loss and shadowing.

    Fading: "rayleigh" (i.i.d. |h_n| ~ Rayleigh(sigma_n)), "gauss_markov" (the same marginal,
    correlated across rounds: h_t = rho h_{t-1} + sqrt(1 - rho^2) w_t) or "rician" (a line-of-sight
    part with K times the scattered power; mean power 2 sigma_n^2 as for Rayleigh).
    Path loss (path_loss = true): the gain is the fading |h|^2 times
    reference_gain x (d / d0)^-exponent x 10^(X / 10), X ~ N(0, shadowing_db^2), base station at (0, 0).
    """

    model: str = _field("rayleigh", choices=("rayleigh", "gauss_markov", "rician"))
    profile: str = _field("homogeneous", choices=("homogeneous", "linear", "list"),
                          doc="how sigma_n is set across devices")
    sigma: float = _field(1.0, gt=0, doc="sigma of every device (homogeneous)")
    sigma_min: float = _field(0.1, gt=0, doc="sigma of device 0 (linear)")
    sigma_max: float = _field(10.0, gt=0, doc="sigma of device N-1 (linear)")
    sigmas: tuple[float, ...] = _field((), gt=0, doc="one sigma per device (list)")
    gain_floor: float = _field(1e-3, ge=0, doc="lower clip of the fading |h|^2 (before path loss)")
    rho: float = _field(0.9, ge=0, le=1, doc="gauss_markov: correlation of h between rounds")
    rician_k: float = _field(1.0, ge=0, doc="rician: line-of-sight power / scattered power (linear)")
    path_loss: bool = _field(False, doc="multiply the fading gain by distance path loss and shadowing")
    cell_radius_m: float = _field(100.0, gt=0, doc="devices are drawn uniformly in this disc")
    positions_m: tuple[tuple[float, ...], ...] = _field((), doc="one [x, y] per device (else drawn)")
    reference_distance_m: float = _field(1.0, gt=0, doc="d0; closer devices count as at d0")
    reference_gain_db: float = _field(0.0, doc="path gain at d0 in dB")
    path_loss_exponent: float = _field(3.0, gt=0)
    shadowing_db: float = _field(0.0, ge=0, doc="standard deviation of log-normal shadowing in dB")
    shadowing: str = _field("per_device", choices=("per_device", "per_round"),
                            doc="shadowing drawn once per device, or afresh every round")


@dataclass(frozen=True)
class LinkConfig:
    """Uplink: rate B log2(1 + g P / N0), airtime = model bits / rate, energy = P x airtime."""

    access: str = _field("tdma", choices=("tdma", "fdma"),
                         doc="tdma: one device at a time on the whole band; fdma: band split evenly")
    bandwidth_hz: float = _field(22e6, gt=0)
    noise_power: Power = _field(1.0, gt=0, doc="N0 (linear, or a string in dB)")
    p_bar: Power = _field(1.0, gt=0, doc="time-average power budget per device")
    p_max: Power = _field(10 ** 3.5, gt=0, doc="peak transmit power")
    downlink_s: float = _field(0.0, ge=0, doc="fixed broadcast time of the global model per round")
    downlink_rate_bps: float | None = _field(None, gt=0, doc="adds model_bits / rate to downlink_s")
    model_bits: int | None = _field(None, ge=1, doc="upload size; default 32 x model parameters")


@dataclass(frozen=True)
class DevicesConfig:
    """The devices, their computation time per round (they compute in parallel) and availability.

    compute: "constant" (compute_s or compute_s_per_device), "cpu" (cycles_per_sample x samples per
    round / cpu_hz, energy kappa cpu_hz^2 per cycle; samples per round = local_steps x batch_size)
    or "shifted_exponential" (delay_shift_s + Exp(mean delay_mean_s), drawn per device per round).
    Availability: a two-state Markov chain per device (p_on_to_off = 0: always available).
    The times are a FedAvg round's: the Per-FedAvg algorithms multiply them (and step_time_s) by
    their gradient evaluations per local step, 2 (FO) or 4 (HF, exact).
    """

    count: int = _field(100, ge=1, doc="number of devices N")
    compute: str = _field("constant", choices=("constant", "cpu", "shifted_exponential"))
    compute_s: float = _field(0.0, ge=0, doc="computation time per round, the same for all")
    compute_s_per_device: tuple[float, ...] = _field((), ge=0, doc="one time per device")
    cpu_hz: float = _field(1e9, gt=0, doc="cpu: CPU frequency f of every device")
    cpu_hz_per_device: tuple[float, ...] = _field((), gt=0, doc="cpu: one frequency per device")
    cycles_per_sample: float = _field(1e7, gt=0, doc="cpu: CPU cycles c per training sample")
    cycles_per_sample_per_device: tuple[float, ...] = _field((), gt=0, doc="cpu: one c per device")
    kappa: float = _field(1e-28, ge=0, doc="cpu: effective switched capacitance; kappa f^2 J per cycle")
    step_time_s: float = _field(0.0, ge=0, doc="computation time per local step, added to the "
                                "model's time: unequal local work makes stragglers")
    delay_shift_s: float = _field(0.0, ge=0, doc="shifted_exponential: the shift")
    delay_mean_s: float = _field(1.0, gt=0, doc="shifted_exponential: mean of the exponential part")
    p_on_to_off: float = _field(0.0, ge=0, le=1, doc="per-round probability an available device leaves")
    p_off_to_on: float = _field(1.0, gt=0, le=1, doc="per-round probability an unavailable one returns")
    excluded: tuple[int, ...] = _field((), ge=0, doc="devices that never take part (incomplete "
                                       "participation, spec 003): never available to the scheduler")
    excluded_count: int = _field(0, ge=0, doc="this many more devices, drawn once from the 'exclusion' "
                                 "stream, never take part")
    min_mean_snr_db: float | None = _field(None, doc="devices whose mean SNR E|h|^2 p_bar / N0 (2 sigma^2 "
                                           "p_bar / N0 for Rayleigh) is below this never transmit")
    server_compute_s: float = _field(0.0, ge=0, doc="safari: simulated time of one server round "
                                     "(server computation on the auxiliary set; no airtime)")
    server_step_s: float = _field(0.0, ge=0, doc="safari: server time per SGD step on the auxiliary set, "
                                  "added to server_compute_s (steps: learning.server_steps or one epoch)")


@dataclass(frozen=True)
class SchedulerConfig:
    """Which devices transmit and at what power."""

    name: str = _field("lyapunov", choices=("lyapunov", "uniform", "random", "power_of_choice", "divfl",
                                           "subtrunc", "unionfl"),
                       doc="random ... unionfl: fair selection (spec 000), exactly kappa distinct devices")
    m: int = _field(10, ge=1, doc="draws with replacement per round")
    sampling: str = _field("with_replacement", choices=("with_replacement", "without_replacement"),
                           doc="uniform only: without_replacement draws min(m, available) distinct "
                               "devices (the SAFARI paper's client sampling, spec 003)")
    V: float = _field(100.0, gt=0, doc="drift-plus-penalty trade-off")
    lam: float = _field(100.0, ge=0, doc="weight of airtime against 1/q in the objective")
    power_rule: str = _field("exact", choices=("exact", "paper"))
    solver: str = _field("exact", choices=("exact", "manifold"))
    # fair selection (spec 000): random, power_of_choice, divfl, subtrunc, unionfl
    kappa: int = _field(10, ge=1, doc="fair selection: distinct devices per round")
    fair_lambda: float | None = _field(None, ge=0, doc="subtrunc: weight lambda of the truncated loss "
                                       "term (default 0.95)")
    fair_budget: float = _field(1.10, gt=0, doc="subtrunc: truncation budget b")
    fair_phi: str = _field("log1p", choices=("log1p", "identity"), doc="subtrunc: phi(loss), ln(1+x) or x")
    fair_mu: float | None = _field(None, ge=0, doc="unionfl: penalty mu per recently selected device "
                                   "(default 1)")
    fair_window: int = _field(5, ge=0, doc="unionfl: look-back window W in rounds")
    fair_greedy: str = _field("stochastic", choices=("stochastic", "naive"),
                              doc="divfl/subtrunc/unionfl: stochastic greedy (r candidates per step) or "
                                  "plain greedy")
    fair_sample_size: int | None = _field(None, ge=1, doc="stochastic greedy: r (default max(kappa, 0.1 N))")
    fair_epsilon: float | None = _field(None, gt=0, lt=1, doc="stochastic greedy: r = ceil(N / kappa "
                                        "ln(1 / epsilon)) instead of fair_sample_size")
    fair_freshness: str = _field("selected_only", choices=("selected_only", "all_every_round"),
                                 doc="stored gradients: all devices once, then the selected ones piggy-back "
                                     "(default), or all devices every round (oracle)")
    fair_normalize_distances: bool = _field(False, doc="divide gradient distances by their maximum (ablation)")
    fair_projection_dim: int | None = _field(None, ge=1, doc="store gradients as k-dim random projections "
                                             "(N x k floats instead of N x d)")
    poc_candidates: int | None = _field(None, ge=1, doc="power_of_choice: candidates d (default N)")
    fair_probe_samples: int | None = _field(None, ge=1, doc="local samples a device uses for the loss and "
                                            "gradient it reports (evenly spaced, fixed; default all)")


# learning.algorithm values of the FedShuffle family (spec 001; wirelessfl.learning.fedshuffle)
FEDSHUFFLE_FAMILY = ("fedavg_rr", "fedavg_min", "fedavg_mean", "fednova", "fedshuffle", "fedshuffle_so", "fedshuffle_mvr")


@dataclass(frozen=True)
class LearningConfig:
    """Data, model and the local update rule."""

    dataset: str = _field("fashion_mnist", choices=("fashion_mnist", "mnist", "cifar10", "synthetic"))
    data_dir: str = _field("", doc="directory with the dataset files (default: standard places)")
    model: str = _field("small_cnn", choices=("paper_cnn", "small_cnn", "mlp", "logreg", "mlp_80_60", "lenet"))
    partition: str = _field("dirichlet_per_device",
                            choices=("dirichlet_per_device", "label_dirichlet", "iid", "perfedavg_groups",
                                     "perfedavg_groups_single", "classes_per_device"),
                            doc="perfedavg_groups: Per-FedAvg's Table 2 layout, 10 groups, type-A devices "
                                "hold samples_per_device = 5a samples (a of classes 0-4), type-B devices a/2 "
                                "of class j and 2a of class j+5; _single: type-B devices hold class j+5 only; "
                                "classes_per_device: the SAFARI paper's non-iid index p (spec 003 A4), "
                                "each device holds learning.classes_per_device classes, each class "
                                "is held by p N / 10 devices and split evenly among them")
    classes_per_device: int = _field(2, ge=1, le=10, doc="classes_per_device: p distinct classes per "
                                     "device (10: nearly iid, 1: one class each)")
    class_assignment: str = _field("random", choices=("random", "ordered"),
                                   doc="classes_per_device: random class sets (the paper), or ordered: "
                                       "dealt in label order, device n first gets class n 10 // (p N)")
    alpha: float = _field(1.0, ge=0, doc="Dirichlet concentration; 0 one class, inf iid")
    samples_per_device: int = _field(500, ge=1)
    synthetic_alpha: float = _field(1.0, ge=0, doc="Synthetic(alpha, beta): spread of the device models")
    synthetic_beta: float = _field(1.0, ge=0, doc="Synthetic(alpha, beta): spread of the device inputs")
    algorithm: str = _field("fedavg", choices=("fedavg", "safari", "fedavg_rr", "fedavg_min", "fedavg_mean", "fednova", "fedshuffle", "fedshuffle_so",
                                                  "fedshuffle_mvr", "perfedavg_fo", "perfedavg_hf",
                                                  "perfedavg_exact"),
                            doc="perfedavg_*: Per-FedAvg (spec 004) with the first-order, Hessian-free or "
                                "exact meta-gradient; fedavg_rr ... fedshuffle_mvr: the FedShuffle family (spec 001), "
                                "learning.local_epochs epochs of ceil(|D_n| / batch_size) steps; safari: "
                                "each round is a client round with probability safari_q, else a server "
                                "round on the auxiliary set (spec 003)")
    safari_q: float = _field(0.8, ge=0, le=1, doc="safari: probability that a round is a client round")
    aux_samples: int = _field(0, ge=0, doc="size n_T of the server's auxiliary set, drawn uniformly "
                              "from the training set (stream 'aux') and removed from the devices' pool")
    server_steps: int | None = _field(None, ge=1, doc="safari: SGD steps per server round (1: the "
                                      "paper's Algorithm 1); default one epoch over the auxiliary set")
    server_lr: float | None = _field(None, gt=0, doc="safari: server step size eta_s (default: lr)")
    server_round_is_slot: bool = _field(False, doc="safari: a server round counts as a Lyapunov slot "
                                        "with zero consumption (queues drain by p_bar); default: "
                                        "queues change only in client rounds")
    aggregation: str | None = _field(None, choices=("unbiased", "mean", "data_size"),
                                     doc="fedavg and safari: unbiased (weights 1 / (N q_n), spec 002), mean "
                                         "(the plain average of the devices' models, spec 003 Algorithm 1, "
                                         "spec 000 Alg. 1) or data_size (shares |D_n| / sum |D_j| over the "
                                         "devices that trained); default unbiased, mean with the fair "
                                         "schedulers (their kappa devices have no inclusion probability)")
    local_steps: int = _field(10, ge=1, doc="K local SGD steps")
    batch_size: int = _field(32, ge=1)
    lr: float = _field(0.01, gt=0, doc="local step size gamma")
    local_epochs: int = _field(1, ge=1, doc="FedShuffle family: local epochs E; device n runs "
                               "E ceil(|D_n| / batch_size) steps (local_steps is then unused)")
    local_epochs_max: int | None = _field(None, ge=1, doc="FedShuffle family: heterogeneous epochs, "
                                          "E_n ~ U{local_epochs, ..., local_epochs_max} per device and round")
    momentum: float = _field(0.0, ge=0, lt=1, doc="FedShuffle family: global momentum 1 - a (spec 001 "
                             "sec. 2.6; 0.9 in the paper); fedshuffle_mvr needs it > 0")
    nova_tau_eff: str = _field("arith", choices=("arith", "harmonic"),
                               doc="fednova: tau_eff = sum rho_j tau_j (arith, Wang et al.) or harmonic")
    global_lr: float = _field(1.0, gt=0, doc="server step size eta_g on the aggregated update (fedavg, "
                              "the FedShuffle family, safari's client rounds)")
    size_sigma: float = _field(0.0, ge=0, doc="unequal dataset sizes: samples_per_device x "
                               "LogNormal(-sigma^2/2, sigma) per device (iid, dirichlet_per_device)")
    eval_train_samples: int = _field(10000, ge=1, doc="training samples used for the train loss")
    per_alpha: float = _field(0.01, ge=0, doc="Per-FedAvg: inner (adaptation) step size alpha, also the "
                              "step size of the personalised evaluation")
    per_beta: float | None = _field(None, gt=0, doc="Per-FedAvg: local (meta) step size beta; default: lr")
    per_delta: float = _field(1e-3, gt=0, doc="Per-FedAvg HF: finite-difference radius delta")
    per_adapt_on: str = _field("train", choices=("train", "test"), doc="personalised evaluation: the "
                               "adaptation batch comes from the device's train data (default) or its test "
                               "split (the paper's wording; leaks the test data)")
    fairness_metrics: bool | None = _field(None, doc="record per-device test accuracy and client "
                                           "dissimilarity at every evaluation (default: on for the fair "
                                           "schedulers random ... unionfl, off otherwise)")
    device_test_samples: int = _field(100, ge=1, doc="size of each device's own test split, label-matched to "
                                      "its training data (fairness metrics, personalised evaluation; the "
                                      "perfedavg partitions bring their own split)")


@dataclass(frozen=True)
class Scenario:
    """One fully resolved simulation, or a family of them through variants and sweep."""

    name: str = _field("scenario")
    seed: int = _field(0, ge=0, doc="root seed of every random stream")
    run: RunConfig = field(default_factory=RunConfig)
    channel: ChannelConfig = field(default_factory=ChannelConfig)
    link: LinkConfig = field(default_factory=LinkConfig)
    devices: DevicesConfig = field(default_factory=DevicesConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    learning: LearningConfig = field(default_factory=LearningConfig)
    variants: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    sweep: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    def variant_scenarios(self) -> list[tuple[str, "Scenario"]]:
        """Expand [variants] into (name, scenario) pairs; a scenario without variants is its own."""
        if not self.variants:
            return [(self.name, self)]
        return [(vname, self.member(*ov, ("name", vname))) for vname, ov in self.variants]

    def member(self, *assignments: tuple[str, Any]) -> "Scenario":
        """One run of this family: the scenario without variants and sweep, with (key, value) set."""
        base = to_dict(self)
        base.pop("variants", None)
        base.pop("sweep", None)
        overrides = []
        for k, v in assignments:
            try:
                overrides.append(f"{k}={_toml_value(v)}")
            except (TypeError, ValueError):  # a date, a table in a list, an int too long to print
                raise ConfigError(f"{k} = {_show(v)}: must be a number, string, boolean or list") from None
        return from_dict(base, overrides)

    def replace(self, *overrides: str) -> "Scenario":
        """A copy with dotted overrides such as ``"scheduler.V=1000"`` applied and validated."""
        return from_dict(to_dict(self), overrides)


_SPECIAL = ("variants", "sweep")


def load_scenario(path: str | Path, overrides: Iterable[str] = ()) -> Scenario:
    """Load a TOML scenario file, apply ``key.path=value`` overrides and validate everything."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"scenario file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"scenario file {path} cannot be read: {exc}") from None
    try:
        data = tomllib.loads(text)
    except (ValueError, RecursionError) as exc:  # TOMLDecodeError, an int over 4300 digits, deep nesting
        raise ConfigError(f"scenario file {path} is not valid TOML: {exc}") from None
    data.setdefault("name", path.stem)
    return from_dict(data, overrides)


def from_dict(data: dict, overrides: Iterable[str] = ()) -> Scenario:
    """Build a validated Scenario from a nested dict (as parsed from TOML) plus overrides."""
    try:
        data = _deep_copy(data)
    except RecursionError:  # e.g. a table header a.a.a... thousands of keys deep
        raise ConfigError("scenario: tables or lists nested too deeply") from None
    for item in overrides:
        key, value = _parse_override(item)
        _set_dotted(data, key, value)
    return _build(Scenario, data, "")


def parse_value(text: str) -> Any:
    """Parse an override value as a TOML value (1000, 1e-3, true, inf, [1, 2]); else a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except (ValueError, RecursionError):  # TOMLDecodeError, an int over 4300 digits, deep nesting
        return text


def _parse_override(item: str) -> tuple[str, Any]:
    if "=" not in item:
        raise ConfigError(f"override {item!r}: expected KEY=VALUE, e.g. scheduler.V=1000")
    key, _, text = item.partition("=")
    key = key.strip()
    if not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*", key):
        raise ConfigError(f"override {item!r}: KEY must be a dotted field path, e.g. scheduler.V")
    return key, parse_value(text.strip())


def _set_dotted(data: dict, key: str, value: Any) -> None:
    parts = key.split(".")
    node = data
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{'.'.join(parts[:i + 1])}: is a value, not a table; cannot set {key}")
        node = child
    node[parts[-1]] = value


def _deep_copy(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _deep_copy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_deep_copy(v) for v in data]
    return data


# ---------------------------------------------------------------------------------------------
# validation


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _build(cls, data: Any, path: str):
    if not isinstance(data, dict):
        raise ConfigError(f"{path or 'scenario'} = {_show(data)}: must be a table")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in fields:
            raise ConfigError(f"{_join(path, key)}: unknown key; allowed: {', '.join(fields)}")
    values = {}
    for name, f in fields.items():
        fpath = _join(path, name)
        if name in _SPECIAL:
            values[name] = _build_special(name, data.get(name, {}), fpath)
        elif dataclasses.is_dataclass(hints[name]):
            values[name] = _build(hints[name], data.get(name, {}), fpath)
        elif name in data:
            values[name] = _check(_coerce(data[name], hints[name], fpath), f.metadata, fpath)
        else:
            values[name] = f.default
    scenario = cls(**values)
    if cls is Scenario:
        _cross_check(scenario)
    return scenario


def _build_special(name: str, table: Any, path: str):
    if not isinstance(table, dict):
        raise ConfigError(f"{path} = {_show(table)}: must be a table")
    if name == "variants":
        out = []
        for vname, ov in table.items():
            if not isinstance(ov, dict):
                raise ConfigError(f"{path}.{vname} = {_show(ov)}: must be a table of overrides")
            out.append((vname, tuple(_flatten(ov))))
        return tuple(out)
    out = []
    for key, values in _flatten(table):
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{path}.{key} = {_show(values)}: must be a non-empty list of values")
        out.append((key, tuple(values)))
    return tuple(out)


def _flatten(table: dict, prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in table.items():
        dotted = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            yield from _flatten(value, dotted)
        else:
            yield dotted, value


_DB = re.compile(r"^\s*([-+]?\d+(\.\d*)?([eE][-+]?\d+)?)\s*dB\s*$")


def _coerce(value: Any, hint: Any, path: str) -> Any:
    """Check ``value`` against the annotated type, converting only where it is lossless."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return _coerce(value, args[0], path)
    if hint is Power:
        if isinstance(value, str):
            match = _DB.match(value)
            if not match:
                raise ConfigError(f"{path} = {_show(value)}: must be a number (linear) or a string like '35 dB'")
            try:
                return 10 ** (float(match.group(1)) / 10)
            except OverflowError:
                raise ConfigError(f"{path} = {_show(value)}: must be finite") from None
        return _coerce(value, float, path)
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path} = {_show(value)}: must be true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path} = {_show(value)}: must be an integer")
        if not -2 ** 63 <= value < 2 ** 63:
            raise ConfigError(f"{path} = {_show(value)}: must be a 64-bit integer")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path} = {_show(value)}: must be a number")
        try:
            value = float(value)
        except OverflowError:  # an int beyond the float range
            raise ConfigError(f"{path} = {_show(value)}: must be finite") from None
        if math.isnan(value):
            raise ConfigError(f"{path} = nan: must be a number")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path} = {_show(value)}: must be a string")
        return value
    if origin is tuple:
        if not isinstance(value, list):
            raise ConfigError(f"{path} = {_show(value)}: must be a list")
        item = typing.get_args(hint)[0]
        return tuple(_coerce(v, item, f"{path}[{i}]") for i, v in enumerate(value))
    raise TypeError(f"unsupported annotation {hint!r} at {path}")  # a bug in this module


def _show(value: Any, limit: int = 200) -> str:
    """repr of a value for a message: shortened, and safe for ints too long to print (ValueError)."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        text = f"<{type(value).__name__} too large to print>"
    return text if len(text) <= limit else text[:limit] + "..."


def _check(value: Any, meta: typing.Mapping, path: str) -> Any:
    items = value if isinstance(value, tuple) else (value,)
    for v in items:
        if meta.get("choices") is not None and v not in meta["choices"]:
            allowed = ", ".join(repr(c) for c in meta["choices"])
            raise ConfigError(f"{path} = {_show(v)}: must be one of {allowed}")
        for key, ok, word in (("ge", lambda a, b: a >= b, ">="), ("gt", lambda a, b: a > b, ">"),
                              ("le", lambda a, b: a <= b, "<="), ("lt", lambda a, b: a < b, "<")):
            bound = meta.get(key)
            if bound is not None and not ok(v, bound):
                raise ConfigError(f"{path} = {_show(v)}: must be {word} {bound}")
        if isinstance(v, float) and math.isinf(v) and path.split(".")[-1] != "alpha":
            raise ConfigError(f"{path} = {_show(v)}: must be finite")
    return value


def _cross_check(s: Scenario) -> None:
    """Rules that involve more than one field."""
    n = s.devices.count
    if s.channel.profile == "list" and len(s.channel.sigmas) != n:
        raise ConfigError(f"channel.sigmas has {len(s.channel.sigmas)} values: must have one per device "
                          f"(devices.count = {n})")
    if s.channel.profile == "linear" and s.channel.sigma_max < s.channel.sigma_min:
        raise ConfigError(f"channel.sigma_max = {s.channel.sigma_max}: must be >= channel.sigma_min")
    for section, key in (("devices", "compute_s_per_device"), ("devices", "cpu_hz_per_device"),
                         ("devices", "cycles_per_sample_per_device"), ("channel", "positions_m")):
        values = getattr(getattr(s, section), key)
        if values and len(values) != n:
            raise ConfigError(f"{section}.{key} has {len(values)} values: must have one per device "
                              f"(devices.count = {n})")
    for i, xy in enumerate(s.channel.positions_m):
        if len(xy) != 2:
            raise ConfigError(f"channel.positions_m[{i}] = {list(xy)!r}: must be a pair [x, y] in metres")
    if s.run.rounds is None and s.run.time_budget_s is None:
        raise ConfigError("run.rounds: set run.rounds or run.time_budget_s so the run stops")
    if s.run.stop_at_target and s.run.target_accuracy is None:
        raise ConfigError("run.stop_at_target = true: needs run.target_accuracy")
    if s.run.eval_every_rounds is not None and s.run.eval_every_s is not None:
        raise ConfigError("run.eval_every_s: set either run.eval_every_rounds or run.eval_every_s, not both")
    if s.learning.dataset == "synthetic" and s.learning.model not in ("mlp", "logreg", "mlp_80_60"):
        raise ConfigError(f"learning.model = {s.learning.model!r}: the synthetic dataset has 60 features, "
                          "so the model must be one of 'mlp', 'logreg', 'mlp_80_60'")
    bad = [d for d in s.devices.excluded if d >= n]
    if bad:
        raise ConfigError(f"devices.excluded = {list(s.devices.excluded)!r}: device ids must be < "
                          f"devices.count = {n}")
    if s.devices.excluded_count + len(set(s.devices.excluded)) > n:
        raise ConfigError(f"devices.excluded_count = {s.devices.excluded_count}: with devices.excluded "
                          f"it excludes more than devices.count = {n} devices")
    if s.learning.algorithm == "safari" and s.learning.safari_q < 1 and not s.run.timing_only:
        if s.learning.aux_samples < 1:
            raise ConfigError("learning.aux_samples = 0: safari with learning.safari_q < 1 needs an "
                              "auxiliary set (learning.aux_samples >= 1)")
    if s.scheduler.sampling == "without_replacement" and s.scheduler.name != "uniform":
        raise ConfigError(f"scheduler.sampling = 'without_replacement': only for scheduler.name = 'uniform' "
                          f"(got {s.scheduler.name!r})")
    if s.learning.partition == "classes_per_device":
        p = s.learning.classes_per_device
        if s.learning.dataset == "synthetic":
            raise ConfigError("learning.partition = 'classes_per_device': the synthetic dataset has its own "
                              "split; use it with fashion_mnist, mnist or cifar10")
        if (p * n) % 10:
            raise ConfigError(f"learning.classes_per_device = {p}: p x devices.count = {p * n} must be a "
                              "multiple of the 10 classes (each class is held by p N / 10 devices)")
    if s.learning.aux_samples and s.learning.dataset == "synthetic":
        raise ConfigError("learning.aux_samples: the synthetic dataset has no shared training pool to "
                          "draw an auxiliary set from; use 0")
    lc = s.learning
    if lc.aggregation is not None and lc.algorithm not in ("fedavg", "safari"):
        raise ConfigError(f"learning.aggregation = {lc.aggregation!r}: only fedavg and safari use it "
                          f"(learning.algorithm is {lc.algorithm!r}, which has its own weights)")
    family = lc.algorithm in FEDSHUFFLE_FAMILY
    if lc.algorithm == "fedshuffle_mvr" and lc.momentum == 0:
        raise ConfigError("learning.momentum = 0: fedshuffle_mvr needs a momentum in (0, 1), e.g. 0.9")
    for key, value, default in (("momentum", lc.momentum, 0.0), ("local_epochs_max", lc.local_epochs_max, None)):
        if value != default and not family:
            raise ConfigError(f"learning.{key} = {value!r}: only the FedShuffle family uses it "
                              f"(learning.algorithm is {lc.algorithm!r})")
    if lc.local_epochs_max is not None and lc.local_epochs_max < lc.local_epochs:
        raise ConfigError(f"learning.local_epochs_max = {lc.local_epochs_max}: must be >= "
                          f"learning.local_epochs = {lc.local_epochs}")
    if s.learning.partition.startswith("perfedavg_groups") and not s.run.timing_only:
        if s.devices.count % 10:
            raise ConfigError(f"devices.count = {s.devices.count}: learning.partition = "
                              f"{s.learning.partition!r} needs a multiple of 10 devices (10 equal groups)")
        if s.learning.samples_per_device % 10:
            raise ConfigError(f"learning.samples_per_device = {s.learning.samples_per_device}: learning.partition "
                              f"= {s.learning.partition!r} needs a multiple of 10 (5a with a even)")
        if s.learning.dataset == "synthetic":
            raise ConfigError(f"learning.partition = {s.learning.partition!r}: the synthetic dataset has its "
                              "own split over devices; use another dataset")
    _check_fair(s)
    if s.link.p_max < s.link.p_bar:
        raise ConfigError(f"link.p_max = {s.link.p_max:g}: must be >= link.p_bar = {s.link.p_bar:g}")
    # every variant and every sweep value must itself be a valid scenario
    for vname, overrides in s.variants:
        try:
            s.member(*overrides)
        except ConfigError as exc:
            raise ConfigError(f"variants.{vname}: {exc}") from None
    for key, values in s.sweep:
        for value in values:
            try:
                s.member((key, value))
            except ConfigError as exc:
                raise ConfigError(f"sweep.{key}: {exc}") from None


FAIR_SCHEDULERS = ("random", "power_of_choice", "divfl", "subtrunc", "unionfl")


def _check_fair(s: Scenario) -> None:
    """Fair-selection settings: only with the scheduler they belong to, and within N."""
    sc, n = s.scheduler, s.devices.count
    if sc.fair_lambda is not None and sc.name != "subtrunc":
        raise ConfigError(f"scheduler.fair_lambda = {sc.fair_lambda}: only used by scheduler.name = "
                          f"'subtrunc' (now {sc.name!r})")
    if sc.fair_mu is not None and sc.name != "unionfl":
        raise ConfigError(f"scheduler.fair_mu = {sc.fair_mu}: only used by scheduler.name = 'unionfl' "
                          f"(now {sc.name!r})")
    if sc.poc_candidates is not None and sc.name != "power_of_choice":
        raise ConfigError(f"scheduler.poc_candidates = {sc.poc_candidates}: only used by scheduler.name = "
                          f"'power_of_choice' (now {sc.name!r})")
    if sc.fair_sample_size is not None and sc.fair_epsilon is not None:
        raise ConfigError("scheduler.fair_epsilon: set either scheduler.fair_sample_size or "
                          "scheduler.fair_epsilon, not both")
    if sc.name not in FAIR_SCHEDULERS:
        return
    if sc.kappa > n:
        raise ConfigError(f"scheduler.kappa = {sc.kappa}: must be <= devices.count = {n}")
    if sc.poc_candidates is not None and not sc.kappa <= sc.poc_candidates <= n:
        raise ConfigError(f"scheduler.poc_candidates = {sc.poc_candidates}: must lie in [scheduler.kappa, "
                          f"devices.count] = [{sc.kappa}, {n}]")
    if s.learning.algorithm != "fedavg":
        raise ConfigError(f"learning.algorithm = {s.learning.algorithm!r}: scheduler.name = {sc.name!r} "
                          "aggregates the kappa updates itself; use 'fedavg'")
    if s.learning.aggregation == "unbiased":
        raise ConfigError(f"learning.aggregation = 'unbiased': scheduler.name = {sc.name!r} chooses its devices "
                          "without inclusion probabilities; use 'mean' or 'data_size'")


# ---------------------------------------------------------------------------------------------
# writing scenarios back


def to_dict(scenario: Scenario, only_changed: bool = False) -> dict:
    """The scenario as a nested dict that from_dict reads back to an equal scenario.

    With ``only_changed``, fields at their default value are left out: the canonical form used to
    key cached runs, which stays the same when a later version adds fields with defaults.
    """
    out: dict[str, Any] = {}
    for f in dataclasses.fields(scenario):
        value = getattr(scenario, f.name)
        if f.name == "variants":
            if value:
                out[f.name] = {vname: dict(ov) for vname, ov in value}
        elif f.name == "sweep":
            if value:
                out[f.name] = {k: list(v) for k, v in value}
        elif dataclasses.is_dataclass(value):
            defaults = type(value)()
            table = {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(value).items()
                     if v is not None and not (only_changed and getattr(defaults, k) == v)}
            if table or not only_changed:
                out[f.name] = table
        else:
            out[f.name] = value
    return out


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + "".join(_ESCAPES.get(c) or (f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c)
                             for c in value) + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


def dumps(scenario: Scenario, only_changed: bool = False) -> str:
    """The scenario as TOML text (read back by load_scenario to an equal scenario).

    ``only_changed`` leaves out fields at their defaults (see to_dict).
    """
    data = to_dict(scenario, only_changed)
    lines = [f"{k} = {_toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)]

    def table(name: str, body: dict) -> None:
        scalars = {k: v for k, v in body.items() if not isinstance(v, dict)}
        lines.append(f"\n[{name}]")
        lines.extend(f"{_quote_key(k)} = {_toml_value(v)}" for k, v in scalars.items())
        for k, v in body.items():
            if isinstance(v, dict):
                table(f"{name}.{_quote_key(k)}", v)

    for k, v in data.items():
        if isinstance(v, dict):
            table(k, v)
    return "\n".join(lines) + "\n"


def _quote_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_value(key)
