"""Device models: computation time and energy per round, and availability. Knows nothing of the channel.

A computation model fits :class:`ComputeModel`: ``compute_times(devices, rng, round_idx) -> seconds``
and ``energy_j(devices, round_idx, times_s) -> joules`` (the energy of a whole round's computation,
given the times just drawn for those devices; zeros where the model says nothing about energy; a
model written for the older ``energy_j(devices, round_idx)`` still runs: :func:`energy_of`). ``COMPUTE`` names the built-ins ``devices.compute``
accepts besides installed plugins and import paths. :class:`WorkScaledCompute` scales any of them
with the local work the algorithm gives each device. Availability is a Markov chain per device or
a replayed trace.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from .capabilities import absent, provides
from .fields import ConfigError, FilePath, option
from .plugins import Registry
from .traces import Trace, TraceOptions


class ComputeModel(Protocol):
    """How long each selected device computes in a round, and the energy it spends.

    Required: ``from_scenario`` and ``compute_times``; subclass to inherit the optional parts. The
    times are a FedAvg round's (``learning.local_steps`` steps); algorithms with other work scale
    them (see WorkScaledCompute). Capabilities (wirelessfl.capabilities): :class:`ComputeEnergy`,
    :class:`FrequencyScaled`.
    """

    Options: ClassVar[type | None] = None
    """A dataclass of the model's own options, or None (options handed over as a dict)."""
    work_proportional: ClassVar[bool] = False
    """True when time and energy are proportional to the local work (a CPU running cycles per
    sample): an algorithm that gives a device more steps then makes it slower."""

    @classmethod
    def from_scenario(cls, scenario, options) -> "ComputeModel":
        """Build the model for ``scenario``."""
        ...

    def compute_times(self, devices: np.ndarray, rng: np.random.Generator, round_idx: int = 0) -> np.ndarray:
        """Computation time in seconds of each of ``devices`` in round ``round_idx`` (the run's
        "compute" stream for random models)."""
        ...

    def compute_time(self, device: int, rng: np.random.Generator, round_idx: int = 0) -> float:
        """One device's computation time as a float (a device started under the event protocols).
        Default: ``compute_times`` of that device alone; override it where a scalar draw is cheaper
        (the same number)."""
        return float(self.compute_times(np.array([device]), rng, round_idx=round_idx)[0])

    @classmethod
    def check(cls, scenario, options) -> None:
        """Raise ConfigError if the scenario cannot run with this model."""

    @absent
    def energy_j(self, devices: np.ndarray, round_idx: int = 0, times_s: np.ndarray | None = None) -> np.ndarray:
        """Energy of each of ``devices``' whole computation this round (default: no energy model).
        ``times_s``: the computation times ``compute_times`` (or ``compute_time``) just drew for these
        devices, in their order, so that an energy can follow a random time (P_comp x t); None where
        no times were drawn (a check at load). A model whose ``energy_j`` has no ``times_s`` is called
        without it."""
        return np.zeros(len(devices))

    def state_dict(self) -> dict[str, Any]:
        """The model's memory, for checkpoints."""
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""


@runtime_checkable
class ComputeEnergy(Protocol):
    """A computation model with an energy: what each device's computation costs in joules."""

    def energy_j(self, devices: np.ndarray, round_idx: int = 0, times_s: np.ndarray | None = None) -> np.ndarray:
        """Energy of each of ``devices``' whole computation this round, given the times just drawn
        (see ComputeModel)."""


def _takes_times(function) -> bool:
    """Whether an ``energy_j`` takes ``times_s`` (a keyword of that name, or ``**kwargs``)."""
    key = getattr(function, "__func__", function)
    known = _TAKES_TIMES.get(key)
    if known is None:
        try:
            params = inspect.signature(function).parameters.values()
        except (TypeError, ValueError):  # a builtin without a signature: the older contract
            params = ()
        known = _TAKES_TIMES[key] = any(p.name == "times_s" or p.kind is p.VAR_KEYWORD for p in params)
    return known


_TAKES_TIMES: dict = {}


def energy_of(model, devices: np.ndarray, round_idx: int, times_s: np.ndarray | None) -> np.ndarray:
    """``model.energy_j`` of ``devices`` given the times just drawn (``times_s``); a model written
    for the older ``energy_j(devices, round_idx)`` is called that way."""
    energy = model.energy_j
    if _takes_times(energy):
        return energy(devices, round_idx=round_idx, times_s=times_s)
    return energy(devices, round_idx=round_idx)


def _per_device_lengths(scenario, options, keys: tuple[str, ...]) -> None:
    n = scenario.devices.count
    for key in keys:
        values = getattr(options, key)
        if values and len(values) != n:
            raise ConfigError(f"devices.{key} has {len(values)} values: must have one per device "
                              f"(devices.count = {n})")


@dataclass(frozen=True)
class ConstantOptions:
    """Options of the constant computation model."""

    compute_s: float = option(0.0, ge=0, doc="computation time per round, the same for all")
    compute_s_per_device: tuple[float, ...] = option((), ge=0, doc="one time per device")


class ConstantCompute(ComputeModel):
    """Each device needs a fixed time per round (one value for all, or one per device); no energy model."""

    Options = ConstantOptions

    def __init__(self, times_s: np.ndarray):
        self.times_s = np.asarray(times_s, dtype=float)

    @classmethod
    def from_scenario(cls, scenario, options: ConstantOptions) -> "ConstantCompute":
        """compute_s_per_device, else compute_s for every device."""
        if options.compute_s_per_device:
            return cls(np.asarray(options.compute_s_per_device))
        return cls(np.full(scenario.devices.count, options.compute_s))

    @classmethod
    def check(cls, scenario, options: ConstantOptions) -> None:
        """One time per device when given per device."""
        _per_device_lengths(scenario, options, ("compute_s_per_device",))

    def compute_times(self, devices: np.ndarray, rng: np.random.Generator | None = None,
                      round_idx: int = 0) -> np.ndarray:
        """Computation time in seconds of each of ``devices`` this round."""
        return self.times_s[devices]


@dataclass(frozen=True)
class CpuOptions:
    """Options of the CPU computation model."""

    cpu_hz: float = option(1e9, gt=0, doc="CPU frequency f of every device")
    cpu_hz_per_device: tuple[float, ...] = option((), gt=0, doc="one frequency per device")
    cycles_per_sample: float = option(1e7, gt=0, doc="CPU cycles c per training sample")
    cycles_per_sample_per_device: tuple[float, ...] = option((), gt=0, doc="one c per device")
    kappa: float = option(1e-28, ge=0, doc="effective switched capacitance; kappa f^2 J per cycle")
    f_min_hz: float | None = option(None, gt=0, doc="lowest frequency a scheduler may choose (None: each device's "
                                    "own cpu_hz; docs/energy.md, CPU frequency)")
    f_max_hz: float | None = option(None, gt=0, doc="highest frequency a scheduler may choose (None: each device's "
                                    "own cpu_hz)")
    kappa_per_device: tuple[float, ...] = option((), ge=0, doc="one kappa per device")
    f_min_hz_per_device: tuple[float, ...] = option((), gt=0, doc="one lowest frequency per device")
    f_max_hz_per_device: tuple[float, ...] = option((), gt=0, doc="one highest frequency per device")
    profile_file: FilePath | None = option(None, doc="CSV with a header and one row per device, columns among "
                                           "cpu_hz, cycles_per_sample, kappa, f_min_hz, f_max_hz (a column "
                                           "replaces that option for every device)")


PROFILE_COLUMNS = ("cpu_hz", "cycles_per_sample", "kappa", "f_min_hz", "f_max_hz")
"""The columns a CPU profile file may have (devices.profile_file)."""


def read_profile(path, num_devices: int) -> dict[str, np.ndarray]:
    """The columns of a CPU profile file: one row per device, each value a finite number > 0 (kappa >= 0);
    ConfigError naming devices.profile_file if it does not fit."""
    from pathlib import Path

    from .files import unreadable_file

    where = f"devices.profile_file = {str(path)!r}"
    problem = unreadable_file(Path(path))
    if problem is not None:
        raise ConfigError(f"{where}: {problem}")
    with open(path, encoding="utf-8") as fh:
        lines = [line.strip() for line in fh if line.strip() and not line.startswith("#")]
    if not lines:
        raise ConfigError(f"{where}: empty; expected a header line of {', '.join(PROFILE_COLUMNS)} and a row per device")
    names = [name.strip() for name in lines[0].split(",")]
    unknown = [name for name in names if name not in PROFILE_COLUMNS]
    if unknown or len(set(names)) != len(names):
        raise ConfigError(f"{where}: columns {names}: each must be one of {', '.join(PROFILE_COLUMNS)}, once")
    try:
        rows = np.array([[float(v) for v in line.split(",")] for line in lines[1:]], dtype=float).reshape(-1, len(names))
    except ValueError:
        raise ConfigError(f"{where}: every row must hold {len(names)} numbers separated by commas") from None
    if rows.shape[0] != num_devices:
        raise ConfigError(f"{where}: has {rows.shape[0]} rows: must have one per device (devices.count = {num_devices})")
    columns = dict(zip(names, rows.T))
    for name, values in columns.items():
        if not np.isfinite(values).all() or not (values >= 0 if name == "kappa" else values > 0).all():
            raise ConfigError(f"{where}: column {name} must hold finite numbers {'>= 0' if name == 'kappa' else '> 0'}")
    return columns


@runtime_checkable
class FrequencyScaled(Protocol):
    """A computation model whose devices run at a CPU frequency a scheduler may choose
    (Decision.frequency; docs/energy.md, "CPU frequency"): a round of C_n cycles takes C_n / f
    seconds and kappa C_n f^2 joules at f Hz, f within [f_min_n, f_max_n]. At f = 1 the two give
    C_n and kappa C_n, the coefficients a scheduler prices a frequency with."""

    def times_at(self, devices: np.ndarray, f: np.ndarray) -> np.ndarray:
        """C_n / f_n seconds for each of ``devices`` at frequencies ``f`` (one per device given, or a scalar)."""

    def energy_at(self, devices: np.ndarray, f: np.ndarray) -> np.ndarray:
        """kappa C_n f_n^2 joules for each of ``devices`` at frequencies ``f``."""

    def frequency_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(f_min, f_max): each device's lowest and highest frequency (N,) each, Hz."""


class CpuCompute(ComputeModel):
    """A CPU at f_n Hz needing c_n cycles per sample, S samples per round (S = local steps x batch).

    time_n = c_n S / f_n; energy_n = kappa f_n^2 x c_n S (dynamic power kappa f^3 over that time).
    Capability :class:`FrequencyScaled`: a scheduler may choose f_n in [f_min_hz, f_max_hz] (both
    default to the device's own cpu_hz: nothing to choose).
    """

    Options = CpuOptions
    work_proportional = True

    def __init__(self, cpu_hz: np.ndarray, cycles_per_sample: np.ndarray, samples_per_round: int,
                 kappa: np.ndarray | float, f_min: np.ndarray | float | None = None,
                 f_max: np.ndarray | float | None = None):
        self.cpu_hz = np.asarray(cpu_hz, dtype=float)
        self.cycles = np.asarray(cycles_per_sample, dtype=float) * samples_per_round  # per round
        n = self.cpu_hz.shape
        self.kappa = np.broadcast_to(np.asarray(kappa, dtype=float), n).copy()
        self.f_min = self.cpu_hz.copy() if f_min is None else np.broadcast_to(np.asarray(f_min, dtype=float), n).copy()
        self.f_max = self.cpu_hz.copy() if f_max is None else np.broadcast_to(np.asarray(f_max, dtype=float), n).copy()

    @classmethod
    def from_scenario(cls, scenario, options: CpuOptions) -> "CpuCompute":
        """S = learning.local_steps x learning.batch_size samples per round; each value per device from
        its ``*_per_device`` list, else the profile file's column, else the one option for all."""
        n = scenario.devices.count
        profile = read_profile(options.profile_file, n) if options.profile_file is not None else {}

        def per_device(name: str, listed: tuple, value):
            if listed:
                return np.asarray(listed, dtype=float)
            return profile[name] if name in profile else value

        return cls(per_device("cpu_hz", options.cpu_hz_per_device, np.full(n, options.cpu_hz)),
                   per_device("cycles_per_sample", options.cycles_per_sample_per_device,
                              np.full(n, options.cycles_per_sample)),
                   scenario.learning.local_steps * scenario.learning.batch_size,
                   per_device("kappa", options.kappa_per_device, options.kappa),
                   f_min=per_device("f_min_hz", options.f_min_hz_per_device, options.f_min_hz),
                   f_max=per_device("f_max_hz", options.f_max_hz_per_device, options.f_max_hz))

    @classmethod
    def check(cls, scenario, options: CpuOptions) -> None:
        """One value per device when given per device; f_min <= f_max; finite times and energies."""
        _per_device_lengths(scenario, options, ("cpu_hz_per_device", "cycles_per_sample_per_device", "kappa_per_device",
                                                "f_min_hz_per_device", "f_max_hz_per_device"))
        if options.profile_file is not None:
            both = [name for name in read_profile(options.profile_file, scenario.devices.count)
                    if getattr(options, f"{name}_per_device")]
            if both:
                raise ConfigError(f"devices.{both[0]}_per_device: also a column of devices.profile_file; keep one")
        bounds = cls.from_scenario(scenario, options)
        if (bounds.f_min > bounds.f_max).any():
            i = int(np.flatnonzero(bounds.f_min > bounds.f_max)[0])
            raise ConfigError(f"devices.f_min_hz: device {i}'s lowest frequency {bounds.f_min[i]:g} Hz is above its "
                              f"highest {bounds.f_max[i]:g} Hz (devices.f_max_hz, else its cpu_hz)")
        everyone = np.arange(scenario.devices.count)
        with np.errstate(over="ignore"):
            model = cls.from_scenario(scenario, options)
            times, energy = model.compute_times(everyone), model.energy_j(everyone)
        for name, values in (("computation time c S / f", times), ("computation energy kappa f^2 c S", energy)):
            if not np.isfinite(values).all():
                raise ConfigError(f"devices.compute = 'cpu': the {name} of a round is not a finite number (cpu_hz up "
                                  f"to {model.cpu_hz.max():g}, cycles c S up to {model.cycles.max():g}, kappa "
                                  f"up to {model.kappa.max():g})")

    def compute_times(self, devices: np.ndarray, rng: np.random.Generator | None = None,
                      round_idx: int = 0) -> np.ndarray:
        """c_n S / f_n for each of ``devices``."""
        return self.cycles[devices] / self.cpu_hz[devices]

    def energy_j(self, devices: np.ndarray, round_idx: int = 0, times_s: np.ndarray | None = None) -> np.ndarray:
        """kappa_n f_n^2 c_n S for each of ``devices`` (its times are c_n S / f_n: nothing to read from them)."""
        return self.kappa[devices] * self.cpu_hz[devices] ** 2 * self.cycles[devices]

    def times_at(self, devices: np.ndarray, f: np.ndarray) -> np.ndarray:
        """c_n S / f_n for each of ``devices`` at the frequencies ``f``."""
        return self.cycles[devices] / np.asarray(f, dtype=float)

    def energy_at(self, devices: np.ndarray, f: np.ndarray) -> np.ndarray:
        """kappa_n f_n^2 c_n S for each of ``devices`` at the frequencies ``f``."""
        return self.kappa[devices] * np.asarray(f, dtype=float) ** 2 * self.cycles[devices]

    def frequency_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(f_min, f_max) of every device: f_min_hz and f_max_hz, else its cpu_hz."""
        return self.f_min.copy(), self.f_max.copy()


@dataclass(frozen=True)
class ShiftedExponentialOptions:
    """Options of the shifted-exponential computation model."""

    delay_shift_s: float = option(0.0, ge=0, doc="the shift")
    delay_mean_s: float = option(1.0, gt=0, doc="mean of the exponential part")


class ShiftedExponentialCompute(ComputeModel):
    """Random computation time shift + Exp(mean), drawn afresh per selected device and round.

    The common model of stragglers (e.g. coded computation literature): a deterministic part plus an
    exponential tail. Draws come from the engine's "compute" stream in ascending device order.
    """

    Options = ShiftedExponentialOptions

    def __init__(self, shift_s: float, mean_s: float):
        self.shift_s, self.mean_s = float(shift_s), float(mean_s)

    @classmethod
    def from_scenario(cls, scenario, options: ShiftedExponentialOptions) -> "ShiftedExponentialCompute":
        """Shift and mean from the options."""
        return cls(options.delay_shift_s, options.delay_mean_s)

    def compute_times(self, devices: np.ndarray, rng: np.random.Generator, round_idx: int = 0) -> np.ndarray:
        """shift + Exp(mean) for each of ``devices``."""
        if len(devices) == 1:  # one device started: a scalar draw, the same number
            return np.array([self.compute_time(int(devices[0]), rng, round_idx)])
        return self.shift_s + rng.exponential(self.mean_s, len(devices))

    def compute_time(self, device: int, rng: np.random.Generator, round_idx: int = 0) -> float:
        """One device's shift + Exp(mean): a scalar draw (the event protocols' usual dispatch)."""
        return self.shift_s + rng.exponential(self.mean_s)


@dataclass(frozen=True)
class ComputeTraceOptions(TraceOptions):
    """Options of a replayed computation-time trace."""

    trace: FilePath = option(doc="CSV or .npy of rounds x devices, seconds (relative paths: from the scenario's folder)")


class TraceCompute(ComputeModel):
    """Measured computation times replayed by round: device n takes trace[round, n] seconds.

    ``wirelessfl trace`` writes one from any scenario's model. No energy model.
    """

    Options = ComputeTraceOptions

    def __init__(self, trace: Trace):
        self.trace = trace

    @classmethod
    def from_scenario(cls, scenario, options: ComputeTraceOptions) -> "TraceCompute":
        """The trace of options.trace (one column per device)."""
        return cls(Trace.read(options.trace, scenario.devices.count, "devices.trace", options.trace_end,
                              nonnegative=True))

    @classmethod
    def check(cls, scenario, options: ComputeTraceOptions) -> None:
        """The file exists, parses, and has one column per device of times >= 0."""
        cls.from_scenario(scenario, options)

    def compute_times(self, devices: np.ndarray, rng: np.random.Generator | None = None,
                      round_idx: int = 0) -> np.ndarray:
        """This round's row, at ``devices``."""
        return self.trace.row(round_idx)[devices]


COMPUTE = Registry("compute", "wirelessfl.devices:ComputeModel", {
    "constant": "wirelessfl.devices:ConstantCompute",
    "cpu": "wirelessfl.devices:CpuCompute",
    "shifted_exponential": "wirelessfl.devices:ShiftedExponentialCompute",
    "trace": "wirelessfl.devices:TraceCompute",
})
"""Built-in computation models by the name ``devices.compute`` gives them."""


class WorkScaledCompute:
    """A computation model scaled by each device's local work (docs/papers/fedshuffle.md: unequal local work).

    With steps_n = ``steps_fn(devices, round_idx)`` (None: ``ref_steps`` each, a FedAvg round's)
    and ``factor`` the cost of one step relative to a FedAvg step (Per-FedAvg: 2 or 4),
    w_n = steps_n x factor, and

        time_n = base_n x s_n + step_time_s x w_n,   energy_n = base energy_n x s_n,

    with s_n = w_n / ref_steps for a work-proportional base model (a CPU), else ``factor``: a
    fixed time per round stays fixed when the number of steps changes, but a costlier step costs
    more whatever the model. With FedShuffle's E ceil(|D_n| / B) steps, devices with more data
    become the stragglers.
    """

    def __init__(self, base: ComputeModel, steps_fn, ref_steps: int, step_time_s: float = 0.0,
                 factor: float = 1.0):
        self.base, self.steps_fn = base, steps_fn
        self.ref_steps, self.step_time_s, self.factor = max(int(ref_steps), 1), float(step_time_s), factor
        if steps_fn is None and factor == 1 and self.step_time_s == 0:
            # nothing scales (steps_fn None: the algorithm gives every device a FedAvg round's work):
            # the base model's own methods, without a call in between (one per dispatched device)
            self.compute_times, self.energy_j = base.compute_times, base.energy_j
            if hasattr(base, "compute_time"):  # (where work scales, one device goes through compute_times)
                self.compute_time = base.compute_time

    def _scale(self, devices: np.ndarray, round_idx: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(w_n, s_n) of each device; None where nothing scales (a FedAvg round, no step time)."""
        steps = None if self.steps_fn is None else self.steps_fn(np.asarray(devices, dtype=np.int64), round_idx)
        if steps is None and self.factor == 1 and self.step_time_s == 0:
            return None
        if steps is None:
            steps = np.full(len(devices), self.ref_steps)
        work = np.asarray(steps, dtype=float) * self.factor
        if self.base.work_proportional:
            return work, work / self.ref_steps
        return work, np.full(len(devices), float(self.factor))

    def compute_times(self, devices: np.ndarray, rng: np.random.Generator | None = None,
                      round_idx: int = 0) -> np.ndarray:
        """base time x s_n + step_time_s x w_n for each of ``devices``."""
        times = self.base.compute_times(devices, rng, round_idx=round_idx)
        scaled = self._scale(devices, round_idx)
        if scaled is None:
            return times
        self._drawn = (np.array(devices, copy=True), np.asarray(times, dtype=float))  # the base's, for energy_j
        return times * scaled[1] + self.step_time_s * scaled[0]

    @property
    def has_energy(self) -> bool:
        """Whether the base model has an energy model (:class:`ComputeEnergy`; without one: zeros)."""
        return provides(self.base, ComputeEnergy)

    def energy_j(self, devices: np.ndarray, round_idx: int = 0, times_s: np.ndarray | None = None) -> np.ndarray:
        """The base model's energy, given the base's own times just drawn, scaled like its time."""
        scaled = self._scale(devices, round_idx)
        base_times = times_s
        if scaled is not None and times_s is not None:  # the base drew them before the work scaled them
            drawn = getattr(self, "_drawn", None)
            if drawn is not None and np.array_equal(drawn[0], devices):
                base_times = drawn[1]
            else:
                base_times = (np.asarray(times_s, dtype=float) - self.step_time_s * scaled[0]) / scaled[1]
        energy = energy_of(self.base, devices, round_idx, base_times)
        return energy if scaled is None else energy * scaled[1]

    @property
    def frequency_scaled(self) -> bool:
        """Whether the base model runs at a frequency a scheduler may choose (:class:`FrequencyScaled`)."""
        return provides(self.base, FrequencyScaled)

    def at_frequency(self, devices: np.ndarray, f: np.ndarray, round_idx: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(times, energy) of each of ``devices`` at the frequencies ``f`` (one per device given), scaled
        like ``compute_times`` and ``energy_j``; the base model must be :class:`FrequencyScaled`."""
        times, energy = self.base.times_at(devices, f), self.base.energy_at(devices, f)
        scaled = self._scale(devices, round_idx)
        if scaled is None:
            return times, energy
        return times * scaled[1] + self.step_time_s * scaled[0], energy * scaled[1]

    def state_dict(self) -> dict:
        """The base model's state."""
        return self.base.state_dict()

    def load_state(self, state: dict) -> None:
        """Restore the base model's state."""
        self.base.load_state(state)


class MarkovAvailability:
    """Each device is on or off; between rounds on -> off with probability a, off -> on with b.

    The chain starts in its stationary law, P(on) = b / (a + b), independently per device, so the
    on fraction is the same in every round. The current on/off vector is state (``state_dict``).
    """

    def __init__(self, num_devices: int, p_on_to_off: float, p_off_to_on: float):
        if not 0 < p_off_to_on <= 1 or not 0 <= p_on_to_off <= 1:
            raise ValueError("need 0 <= p_on_to_off <= 1 and 0 < p_off_to_on <= 1")
        self.num_devices = int(num_devices)
        self.p_on_to_off, self.p_off_to_on = float(p_on_to_off), float(p_off_to_on)
        self.on: np.ndarray | None = None  # None before the first round

    @property
    def stationary_on(self) -> float:
        """Long-run fraction of rounds a device is available: b / (a + b)."""
        return self.p_off_to_on / (self.p_on_to_off + self.p_off_to_on)

    def step(self, rng: np.random.Generator) -> np.ndarray:
        """This round's availability mask (one uniform draw per device per round)."""
        u = rng.random(self.num_devices)
        if self.on is None:
            self.on = u < self.stationary_on
        else:
            self.on = np.where(self.on, u >= self.p_on_to_off, u < self.p_off_to_on)
        return self.on.copy()

    def state_dict(self) -> dict:
        """The current on/off vector as a plain list."""
        return {"on": None if self.on is None else self.on.tolist()}

    def load_state(self, state: dict) -> None:
        """Inverse of state_dict."""
        self.on = None if state["on"] is None else np.asarray(state["on"], dtype=bool)


class TraceAvailability:
    """Availability replayed from a trace of 0/1 rows (1: the device may be scheduled)."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self.next_round = 0

    def step(self, rng: np.random.Generator) -> np.ndarray:
        """The next round's row (rng unused)."""
        on = self.trace.row(self.next_round)
        self.next_round += 1
        return on

    def state_dict(self) -> dict:
        """The next row to replay."""
        return {"next_round": self.next_round}

    def load_state(self, state: dict) -> None:
        """Continue at the saved row."""
        self.next_round = int(state["next_round"])


def build_availability(scenario) -> MarkovAvailability | TraceAvailability | None:
    """The availability model of the scenario; None when every device is always available."""
    dc = scenario.devices
    if dc.availability_trace is not None:
        return TraceAvailability(Trace.read(dc.availability_trace, dc.count, "devices.availability_trace",
                                            dc.availability_trace_end, boolean=True))
    if dc.p_on_to_off == 0:
        return None
    return MarkovAvailability(dc.count, dc.p_on_to_off, dc.p_off_to_on)
