"""Scenarios: frozen dataclasses loaded from TOML, with dotted overrides and strict validation.

A scenario file has one table per concern ([run], [channel], [link], [devices], [scheduler],
[learning]) plus two optional tables that expand one file into several runs:
[variants.NAME] (dotted overrides per named variant, e.g. lyapunov vs uniform) and [sweep]
(grids of values). Unknown keys, wrong types and out-of-range values raise ConfigError naming the
field path, the value and what is allowed.

Four tables name a part (see wirelessfl.plugins): ``scheduler.name``, ``learning.algorithm``,
``channel.model`` and ``devices.compute``. The part's own options come from the table's
``options`` sub-table, or, for options the part declares in its ``Options`` dataclass, from the
table itself (``scheduler.V`` is ``scheduler.options.V``). Options the named part does not take are
an error, except after an override that names another part (a variant, a grid value): the new part
keeps the options it shares with the old one and drops the others. This module does not import
torch.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from .fields import ConfigError, FilePath, Power, build_dataclass, field_value, option, show
from .plugins import KIND_OF_TABLE, KINDS, PluginError, registry

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["ChannelConfig", "ConfigError", "DevicesConfig", "FilePath", "LearningConfig", "LinkConfig", "Power",
           "PluginOptions", "RunConfig", "Scenario", "SchedulerConfig", "dumps", "from_dict", "load_scenario",
           "option", "parse_value", "to_dict"]


class PluginOptions(Mapping):
    """The options of a part that declares no Options dataclass: a read-only table (the part gets a
    plain dict copy)."""

    def __init__(self, data: Mapping | None = None):
        self._data = _deep_copy(dict(data or {}))

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)

    def __eq__(self, other):
        return isinstance(other, PluginOptions) and self._data == other._data

    def __hash__(self):
        return hash(json.dumps(self._data, sort_keys=True, default=repr))

    def __repr__(self):
        return f"PluginOptions({self._data!r})"

    def to_dict(self) -> dict:
        """A deep copy as a plain dict (what the part receives)."""
        return _deep_copy(self._data)


def _part(default: str, kind: str, doc: str):
    """The field that names a part of ``kind``."""
    return field(default=default, metadata={"doc": doc, "part": kind})


def _options():
    return field(default=None, metadata={"options": True})


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
    timing_only: bool = option(False, doc="run the event loop without training")
    checkpoint_every: int | None = option(None, ge=1, doc="write a checkpoint every k rounds")
    round_deadline_s: float | None = option(None, gt=0, doc="uploads not done this long after the "
                                            "round started are dropped; the round ends then")
    record_devices: bool = option(True, doc="keep per-round arrays of every device (decisions.npz)")
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
    sigma: float = option(1.0, gt=0, doc="sigma of every device (homogeneous)")
    sigma_min: float = option(0.1, gt=0, doc="sigma of device 0 (linear)")
    sigma_max: float = option(10.0, gt=0, doc="sigma of device N-1 (linear)")
    sigmas: tuple[float, ...] = option((), gt=0, doc="one sigma per device (list)")
    gain_floor: float = option(1e-3, ge=0, doc="lower clip of the fading |h|^2 (before path loss)")
    path_loss: bool = option(False, doc="multiply the fading gain by distance path loss and shadowing")
    cell_radius_m: float = option(100.0, gt=0, doc="devices are drawn uniformly in this disc")
    positions_m: tuple[tuple[float, ...], ...] = option((), doc="one [x, y] per device (else drawn)")
    reference_distance_m: float = option(1.0, gt=0, doc="d0; closer devices count as at d0")
    reference_gain_db: float = option(0.0, doc="path gain at d0 in dB")
    path_loss_exponent: float = option(3.0, gt=0)
    shadowing_db: float = option(0.0, ge=0, doc="standard deviation of log-normal shadowing in dB")
    shadowing: str = option("per_device", choices=("per_device", "per_round"),
                            doc="shadowing drawn once per device, or afresh every round")
    options: Any = _options()
    held: Any = _held()


@dataclass(frozen=True)
class LinkConfig:
    """Uplink: rate B log2(1 + g P / N0), airtime = model bits / rate, energy = P x airtime."""

    access: str = option("tdma", choices=("tdma", "fdma"),
                         doc="tdma: one device at a time on the whole band; fdma: band split evenly")
    bandwidth_hz: float = option(22e6, gt=0)
    noise_power: Power = option(1.0, gt=0, doc="N0 (linear, or a string in dB)")
    p_bar: Power = option(1.0, gt=0, doc="time-average power budget per device")
    p_max: Power = option(10 ** 3.5, gt=0, doc="peak transmit power")
    downlink_s: float = option(0.0, ge=0, doc="fixed broadcast time of the global model per round")
    downlink_rate_bps: float | None = option(None, gt=0, doc="adds model_bits / rate to downlink_s")
    model_bits: int | None = option(None, ge=1, doc="upload size; default 32 x model parameters")

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
    p_on_to_off: float = option(0.0, ge=0, le=1, doc="per-round probability an available device leaves")
    p_off_to_on: float = option(1.0, gt=0, le=1, doc="per-round probability an unavailable one returns")
    availability_trace: FilePath | None = option(None, doc="CSV or .npy of rounds x devices, 1 = available "
                                                 "(replaces the Markov chain)")
    availability_trace_end: str = option("stop", choices=("stop", "cycle"),
                                         doc="when the trace runs out: stop with an error, or start over")
    excluded: tuple[int, ...] = option((), ge=0, doc="devices that never take part (incomplete "
                                       "participation, spec 003): never available to the scheduler")
    excluded_count: int = option(0, ge=0, doc="this many more devices, drawn once from the 'exclusion' "
                                 "stream, never take part")
    min_mean_snr_db: float | None = option(None, doc="devices whose mean SNR E|h|^2 p_bar / N0 (2 sigma^2 "
                                           "p_bar / N0 for Rayleigh) is below this never transmit")
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

    dataset: str = option("fashion_mnist", choices=("fashion_mnist", "mnist", "cifar10", "synthetic"))
    data_dir: str = option("", doc="directory with the dataset files (default: standard places)")
    model: str = option("small_cnn", choices=("paper_cnn", "small_cnn", "mlp", "logreg", "mlp_80_60", "lenet"))
    partition: str = option("dirichlet_per_device",
                            choices=("dirichlet_per_device", "label_dirichlet", "iid", "perfedavg_groups",
                                     "perfedavg_groups_single", "classes_per_device"),
                            doc="perfedavg_groups: Per-FedAvg's Table 2 layout, 10 groups, type-A devices "
                                "hold samples_per_device = 5a samples (a of classes 0-4), type-B devices a/2 "
                                "of class j and 2a of class j+5; _single: type-B devices hold class j+5 only; "
                                "classes_per_device: the SAFARI paper's non-iid index p (spec 003 A4), "
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
    local_steps: int = option(10, ge=1, doc="K local SGD steps")
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
    options: Any = _options()
    held: Any = _held()


@dataclass(frozen=True)
class Scenario:
    """One fully resolved simulation, or a family of them through variants and sweep."""

    name: str = option("scenario")
    seed: int = option(0, ge=0, doc="root seed of every random stream")
    plugin_path: tuple[FilePath, ...] = option((), doc="folders searched for 'module:Class' parts before sys.path "
                                          "(load_scenario adds the scenario file's folder when a part is there)")
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
        """One run of this family: the scenario without variants and sweep, with (key, value) set.

        The member's parts keep the options set for them in this scenario (also those held for other
        parts, when the assignments name those parts); options no part of the member takes are dropped.
        """
        base = to_dict(self, only_changed=True)
        base.pop("variants", None)
        base.pop("sweep", None)
        for table in KIND_OF_TABLE:
            node = base.get(table)
            if isinstance(node, dict):
                own = _own_fields(table)
                moved = {k: node.pop(k) for k in list(node) if k not in own and k != "options"}
                moved.update(node.pop("options", {}))
                node[_INHERITED] = moved
        overrides = []
        for k, v in assignments:
            try:
                overrides.append(f"{k}={_toml_value(v)}")
            except (TypeError, ValueError):  # a date, a table in a list, an int too long to print
                raise ConfigError(f"{k} = {show(v)}: must be a number, string, boolean or list") from None
        return from_dict(base, overrides)

    def replace(self, *overrides: str) -> "Scenario":
        """A copy with dotted overrides such as ``"scheduler.V=1000"`` applied and validated."""
        return from_dict(to_dict(self), overrides)

    def part(self, kind: str) -> type:
        """The class of the part of ``kind`` ("scheduler", "algorithm", "channel", "compute")."""
        k = KINDS[kind]
        return registry(kind).load(getattr(getattr(self, k.table), k.key), self.plugin_path)

    def options(self, kind: str):
        """The options of the part of ``kind``: its Options instance, or a dict."""
        opts = getattr(self, KINDS[kind].table).options
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


_SPECIAL = ("variants", "sweep")
_TABLES = {"run": RunConfig, "channel": ChannelConfig, "link": LinkConfig, "devices": DevicesConfig,
           "scheduler": SchedulerConfig, "learning": LearningConfig}


class _Inherited:
    """Key of the options a table held before an override named another part (never in TOML)."""

    def __repr__(self):
        return "<inherited options>"


_INHERITED = _Inherited()


def load_scenario(path: str | Path, overrides: Iterable[str] = ()) -> Scenario:
    """Load a TOML scenario file, apply ``key.path=value`` overrides and validate everything.

    Parts given as import paths are looked up in the file's folder first; relative file paths of
    options (traces) are taken from there too.
    """
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
    return from_dict(data, overrides, base_dir=path.resolve().parent)


def from_dict(data: dict, overrides: Iterable[str] = (), base_dir: str | Path | None = None) -> Scenario:
    """Build a validated Scenario from a nested dict (as parsed from TOML) plus overrides.

    ``base_dir``: the folder of the scenario file (for import-path parts and relative file paths;
    default: only ``plugin_path``, and the working folder).
    """
    try:
        data = _deep_copy(data)
    except RecursionError:  # e.g. a table header a.a.a... thousands of keys deep
        raise ConfigError("scenario: tables or lists nested too deeply") from None
    for item in overrides:
        key, value = _parse_override(item)
        _apply_override(data, key, value)
    return _build_scenario(data, Path(base_dir) if base_dir is not None else None)


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


def _own_fields(table: str) -> set[str]:
    return {f.name for f in dataclasses.fields(_TABLES[table])} - {"options", "held"}


def _apply_override(data: dict, key: str, value: Any) -> None:
    """Set ``key`` in ``data``. In a table that names a part, naming another part moves the
    table's options aside (the new part keeps those it also takes), and an option set at
    ``table.k`` replaces the one at ``table.options.k`` (and the other way round)."""
    parts = key.split(".")
    kind = KIND_OF_TABLE.get(parts[0])
    node = data.get(parts[0])
    if kind is not None and len(parts) in (2, 3) and isinstance(node, dict):
        own = _own_fields(parts[0])
        opts = node.get("options")
        if parts[1] == kind.key and len(parts) == 2:
            default = next(f.default for f in dataclasses.fields(_TABLES[parts[0]]) if f.name == kind.key)
            if value != node.get(kind.key, default):
                moved = dict(node.pop(_INHERITED, {}))
                if isinstance(opts, dict):
                    moved.update(node.pop("options"))
                moved.update({k: node.pop(k) for k in list(node) if isinstance(k, str) and k not in own
                              and k != "options"})
                node[_INHERITED] = moved
        elif len(parts) == 2 and parts[1] not in own and parts[1] != "options":
            if isinstance(opts, dict):
                opts.pop(parts[1], None)
            node.get(_INHERITED, {}).pop(parts[1], None)
        elif len(parts) == 3 and parts[1] == "options":
            if parts[2] not in own:
                node.pop(parts[2], None)
            node.get(_INHERITED, {}).pop(parts[2], None)
    _set_dotted(data, key, value)


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


class _Context:
    """What building one scenario needs besides the data: where its parts may live, and, for a
    scenario with variants or a sweep, the parts its members name (by kind)."""

    def __init__(self, base_dir: Path | None, plugin_path: tuple[str, ...], family: dict[str, set] | None):
        self.base_dir = base_dir
        self.plugin_path = list(plugin_path)
        self.family = family

    def other_parts(self, kind) -> list[str]:
        """Names of the other parts of ``kind`` a held option may belong to."""
        names = set(registry(kind.name).names())
        return sorted(names | (self.family or {}).get(kind.name, set()))

    def search_path(self) -> tuple[str, ...]:
        first = [str(self.base_dir)] if self.base_dir is not None else []
        return tuple(dict.fromkeys(first + self.plugin_path))

    def load(self, kind, name: str, path: str) -> type:
        """The part's class; a folder it was found in joins plugin_path (so a run folder's copy of
        the scenario finds it again)."""
        from .plugins import is_import_path, module_folder

        try:
            cls = registry(kind.name).load(name, self.search_path())
        except PluginError as exc:
            raise ConfigError(str(exc)) from None
        if is_import_path(name):
            folder = module_folder(name.partition(":")[0], self.search_path())
            if folder is not None and folder not in self.plugin_path:
                self.plugin_path.append(folder)
        return cls


def _build_scenario(data: Any, base_dir: Path | None) -> Scenario:
    if not isinstance(data, dict):
        raise ConfigError(f"scenario = {show(data)}: must be a table")
    fields = {f.name: f for f in dataclasses.fields(Scenario)}
    for key in data:
        if key not in fields:
            raise ConfigError(f"{key}: unknown key; allowed: {', '.join(fields)}")
    hints = typing.get_type_hints(Scenario)
    plugin_path = field_value(fields["plugin_path"], hints["plugin_path"], data.get("plugin_path", []),
                              "plugin_path", base_dir)
    for i, folder in enumerate(plugin_path):
        try:
            is_dir = Path(folder).is_dir()
        except (OSError, ValueError):
            is_dir = False
        if not is_dir:
            raise ConfigError(f"plugin_path[{i}] = {show(folder)}: no such folder")
    family = _family_parts(data) if isinstance(data.get("variants"), dict) and data["variants"] \
        or isinstance(data.get("sweep"), dict) and data["sweep"] else None
    ctx = _Context(base_dir, plugin_path, family)
    values = {}
    for name, f in fields.items():
        if name in _SPECIAL:
            values[name] = _build_special(name, data.get(name, {}), name)
        elif name in _TABLES:
            values[name] = _build_table(_TABLES[name], data.get(name, {}), name, ctx)
        elif name in data and name != "plugin_path":
            values[name] = field_value(f, hints[name], data[name], name)
    values["plugin_path"] = tuple(ctx.plugin_path)
    scenario = Scenario(**values)
    _cross_check(scenario, base_dir)
    return scenario


def _family_parts(data: dict) -> dict[str, set]:
    """The part names that the variants and the sweep of a scenario's raw data give each kind."""
    out: dict[str, set] = {k: set() for k in KINDS}
    entries = []
    variants, sweep = data.get("variants"), data.get("sweep")
    for ov in variants.values() if isinstance(variants, dict) else ():
        if isinstance(ov, dict):
            entries += list(_flatten(ov))
    for key, values in _flatten(sweep) if isinstance(sweep, dict) else ():
        entries += [(key, v) for v in values] if isinstance(values, list) else []
    for key, value in entries:
        for kind in KINDS.values():
            if key == kind.field and isinstance(value, str):
                out[kind.name].add(value)
    return out


def _build_table(cls, data: Any, path: str, ctx: _Context):
    if not isinstance(data, dict):
        raise ConfigError(f"{path} = {show(data)}: must be a table")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    part_field = next((f for f in fields.values() if "part" in f.metadata), None)
    data = dict(data)
    inherited = data.pop(_INHERITED, {})
    # "held" is not a key of a file: held options are written as the table's own keys
    extra = {k: data.pop(k) for k in list(data) if k not in fields or k in ("options", "held")}
    if part_field is None and extra:
        key = next(iter(extra))
        raise ConfigError(f"{_join(path, key)}: unknown key; allowed: {', '.join(fields)}")
    hints = typing.get_type_hints(cls)
    values = {}
    for name, f in fields.items():
        if name in data:
            values[name] = field_value(f, hints[name], data[name], _join(path, name), ctx.base_dir)
    if part_field is not None:
        kind = KINDS[part_field.metadata["part"]]
        name = values.get(kind.key, part_field.default)
        if not name:
            raise ConfigError(f"{kind.field} = {name!r}: must name a {kind.name}")
        part = ctx.load(kind, name, path)
        explicit = extra.pop("options", {})
        if not isinstance(explicit, dict):
            raise ConfigError(f"{path}.options = {show(explicit)}: must be a table of the {kind.name}'s options")
        own = sorted(set(fields) - {"options", "held"})
        takes = None if part.Options is None else {f.name for f in dataclasses.fields(part.Options)}
        held = {k: v for k, v in extra.items() if ctx.family is not None and (takes is None or k not in takes)
                and _option_of_another(kind, name, k, ctx)}
        for k in held:
            extra.pop(k)
        values["options"] = _build_options(part, kind, name, path, extra, explicit, inherited, ctx, own)
        values["held"] = PluginOptions(held)
    return cls(**values)


def _option_of_another(kind, name: str, key: str, ctx: _Context) -> bool:
    """Whether a part of ``kind`` other than ``name`` that the scenario may name takes ``key``."""
    for other in ctx.other_parts(kind):
        if other == name:
            continue
        try:
            schema = registry(kind.name).load(other, ctx.search_path()).Options
        except Exception:  # a part that cannot be loaded here says nothing about this key
            continue
        if schema is not None and dataclasses.is_dataclass(schema) and \
                key in {f.name for f in dataclasses.fields(schema)}:
            return True
    return False


def _build_options(part: type, kind, name: str, path: str, flat: dict, explicit: dict, inherited: dict,
                   ctx: _Context, own: list[str]):
    """The part's options from the table's extra keys, its ``options`` table and what an override
    moved aside (see the module docstring)."""
    for key in flat:
        if key in explicit:
            raise ConfigError(f"{path}.{key}: given both as {path}.{key} and {path}.options.{key}; keep one")
    schema = part.Options
    if schema is None:
        if flat:
            key = next(iter(flat))
            raise ConfigError(f"{path}.{key}: unknown key; {kind.field} = {name!r} declares no options class, "
                              f"so its options go in the table [{path}.options]; allowed here: {', '.join(own)}")
        return PluginOptions(explicit)
    if not dataclasses.is_dataclass(schema):
        raise ConfigError(f"{kind.field} = {name!r}: {part.__name__}.Options must be a dataclass")
    names = [f.name for f in dataclasses.fields(schema)]
    for key, where in [(k, f"{path}.{k}") for k in flat] + [(k, f"{path}.options.{k}") for k in explicit]:
        if key not in names:
            raise ConfigError(f"{where}: {_unknown_option(kind, name, key, own + names)}")
    given = {k: (v, f"{path}.{k}") for k, v in inherited.items() if k in names}
    given.update({k: (v, f"{path}.{k}") for k, v in flat.items()})
    given.update({k: (v, f"{path}.options.{k}") for k, v in explicit.items()})
    return build_dataclass(schema, given, path, ctx.base_dir)


def _unknown_option(kind, name: str, key: str, allowed: list[str]) -> str:
    """Why ``key`` is refused, with the built-in parts (of this kind, else of another) that take it."""
    def takers(k) -> list[str]:
        out = []
        for other in registry(k.name).builtins:
            try:
                schema = registry(k.name).load(other).Options
            except Exception:  # a built-in that cannot be imported here says nothing about this key
                continue
            if other != name and schema is not None and key in {f.name for f in dataclasses.fields(schema)}:
                out.append(repr(other))
        return out

    same = takers(kind)
    if same:
        hint = f" (an option of {kind.name} {', '.join(same[:3])}{', ...' if len(same) > 3 else ''})"
    else:
        elsewhere = [(k, t) for k in KINDS.values() if k is not kind for t in [takers(k)] if t]
        hint = (f" (an option of {elsewhere[0][0].name} {elsewhere[0][1][0]}: {elsewhere[0][0].table}.{key})"
                if elsewhere else "")
    if not hint:
        return f"unknown key; allowed: {', '.join(allowed)}"
    return f"not an option of {kind.name} {name!r}{hint}; allowed: {', '.join(allowed)}"


def _build_special(name: str, table: Any, path: str):
    if not isinstance(table, dict):
        raise ConfigError(f"{path} = {show(table)}: must be a table")
    if name == "variants":
        out = []
        for vname, ov in table.items():
            if not isinstance(ov, dict):
                raise ConfigError(f"{path}.{vname} = {show(ov)}: must be a table of overrides")
            out.append((vname, tuple(_flatten(ov))))
        return tuple(out)
    out = []
    for key, values in _flatten(table):
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{path}.{key} = {show(values)}: must be a non-empty list of values")
        out.append((key, tuple(values)))
    return tuple(out)


def _flatten(table: dict, prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in table.items():
        dotted = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            yield from _flatten(value, dotted)
        else:
            yield dotted, value


def _cross_check(s: Scenario, base_dir: Path | None) -> None:
    """Rules that involve more than one field, then each part's own ``check``."""
    n = s.devices.count
    if s.channel.profile == "list" and len(s.channel.sigmas) != n:
        raise ConfigError(f"channel.sigmas has {len(s.channel.sigmas)} values: must have one per device "
                          f"(devices.count = {n})")
    if s.channel.profile == "linear" and s.channel.sigma_max < s.channel.sigma_min:
        raise ConfigError(f"channel.sigma_max = {s.channel.sigma_max}: must be >= channel.sigma_min")
    if s.channel.positions_m and len(s.channel.positions_m) != n:
        raise ConfigError(f"channel.positions_m has {len(s.channel.positions_m)} values: must have one per "
                          f"device (devices.count = {n})")
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
    if s.devices.availability_trace is not None and s.devices.p_on_to_off > 0:
        raise ConfigError("devices.availability_trace: set either the trace or devices.p_on_to_off, not both")
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
    if s.link.p_max < s.link.p_bar:
        raise ConfigError(f"link.p_max = {s.link.p_max:g}: must be >= link.p_bar = {s.link.p_bar:g}")
    for kind in KINDS.values():
        _check_part(s, kind)
    # every variant and every sweep value must itself be a valid scenario
    members = []
    for vname, overrides in s.variants:
        try:
            members.append(s.member(*overrides))
        except ConfigError as exc:
            raise ConfigError(f"variants.{vname}: {exc}") from None
    for key, values in s.sweep:
        for value in values:
            try:
                members.append(s.member((key, value)))
            except ConfigError as exc:
                raise ConfigError(f"sweep.{key}: {exc}") from None
    _check_held_used(s, members)


def _option_names(part: type) -> set[str]:
    schema = part.Options
    return {f.name for f in dataclasses.fields(schema)} if schema is not None and dataclasses.is_dataclass(schema) \
        else set()


def _check_held_used(s: Scenario, members: list[Scenario]) -> None:
    """An option held for other parts must be taken by the part of some variant or sweep value."""
    for kind in KINDS.values():
        held = getattr(s, kind.table).held
        for key in held:
            if not any(key in _option_names(m.part(kind.name)) for m in members):
                names = sorted({getattr(getattr(m, kind.table), kind.key) for m in members})
                raise ConfigError(f"{kind.table}.{key}: no run of this scenario uses it: not an option of "
                                  f"{' or '.join(repr(n) for n in names) or 'its ' + kind.name}")


def _check_part(s: Scenario, kind) -> None:
    """The part's own cross-field rules (its ``check`` classmethod); other errors name its field."""
    part = s.part(kind.name)
    try:
        part.check(s, s.options(kind.name))
    except ConfigError:
        raise
    except (ValueError, TypeError, OSError) as exc:
        name = getattr(getattr(s, kind.table), kind.key)
        raise ConfigError(f"{kind.field} = {name!r}: {type(exc).__name__}: {exc}".replace("\n", " ")) from None


# ---------------------------------------------------------------------------------------------
# writing scenarios back


def to_dict(scenario: Scenario, only_changed: bool = False) -> dict:
    """The scenario as a nested dict that from_dict reads back to an equal scenario.

    A part's options go in the table's ``options`` sub-table. With ``only_changed``, fields and
    options at their default value are left out: the canonical form used to key cached runs, which
    stays the same when a later version adds fields with defaults.
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
            table = _plain_table(value, only_changed)
            if table or not only_changed:
                out[f.name] = table
        elif not (only_changed and f.name == "plugin_path" and not value):
            out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


def _plain_table(value, only_changed: bool) -> dict:
    """A dataclass (a table or a part's Options) as a dict: tuples as lists, None left out."""
    defaults = {f.name: f.default for f in dataclasses.fields(value)}
    table = {}
    for f in dataclasses.fields(value):
        v = getattr(value, f.name)
        if f.name == "options" and "options" in f.metadata:
            opts = v.to_dict() if isinstance(v, PluginOptions) else _plain_table(v, only_changed)
            if opts:
                table["options"] = opts
        elif f.name == "held" and "held" in f.metadata:
            table.update(v.to_dict())
        elif v is not None and not (only_changed and defaults[f.name] == v):
            table[f.name] = _plain(v)
    return table


def _plain(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    return v


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if math.isnan(value):
            return "nan"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + "".join(_ESCAPES.get(c) or (f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c)
                             for c in value) + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_quote_key(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
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
