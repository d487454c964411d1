"""Device models: computation time and energy per round, and availability. Knows nothing of the channel.

A computation model has ``compute_times(devices, rng, round_idx) -> seconds`` and
``energy_j(devices, round_idx) -> joules`` (the energy of a whole round's computation; 0 where the
model says nothing about energy). ``round_idx`` matters only where the work changes by round.
"""
from __future__ import annotations

import numpy as np

from .config import DevicesConfig


class ConstantCompute:
    """Each device needs a fixed time per round (one value for all, or one per device); no energy model."""

    def __init__(self, times_s: np.ndarray):
        self.times_s = np.asarray(times_s, dtype=float)

    def compute_times(self, devices: np.ndarray, rng: np.random.Generator | None = None,
                      round_idx: int = 0) -> np.ndarray:
        """Computation time in seconds of each of ``devices`` this round."""
        return self.times_s[devices]

    def energy_j(self, devices: np.ndarray, round_idx: int = 0) -> np.ndarray:
        """No energy model: zeros."""
        return np.zeros(len(devices))


class CpuCompute:
    """A CPU at f_n Hz needing c_n cycles per sample, S samples per round (S = local steps x batch).

    time_n = c_n S / f_n; energy_n = kappa f_n^2 x c_n S (dynamic power kappa f^3 over that time).
    """

    def __init__(self, cpu_hz: np.ndarray, cycles_per_sample: np.ndarray, samples_per_round: int,
                 kappa: float):
        self.cpu_hz = np.asarray(cpu_hz, dtype=float)
        self.cycles = np.asarray(cycles_per_sample, dtype=float) * samples_per_round  # per round
        self.kappa = float(kappa)

    def compute_times(self, devices: np.ndarray, rng: np.random.Generator | None = None,
                      round_idx: int = 0) -> np.ndarray:
        """c_n S / f_n for each of ``devices``."""
        return self.cycles[devices] / self.cpu_hz[devices]

    def energy_j(self, devices: np.ndarray, round_idx: int = 0) -> np.ndarray:
        """kappa f_n^2 c_n S for each of ``devices``."""
        return self.kappa * self.cpu_hz[devices] ** 2 * self.cycles[devices]


class ShiftedExponentialCompute:
    """Random computation time shift + Exp(mean), drawn afresh per selected device and round.

    The common model of stragglers (e.g. coded computation literature): a deterministic part plus an
    exponential tail. Draws come from the engine's "compute" stream in ascending device order.
    """

    def __init__(self, shift_s: float, mean_s: float):
        self.shift_s, self.mean_s = float(shift_s), float(mean_s)

    def compute_times(self, devices: np.ndarray, rng: np.random.Generator, round_idx: int = 0) -> np.ndarray:
        """shift + Exp(mean) for each of ``devices``."""
        return self.shift_s + rng.exponential(self.mean_s, len(devices))

    def energy_j(self, devices: np.ndarray, round_idx: int = 0) -> np.ndarray:
        """No energy model: zeros."""
        return np.zeros(len(devices))


class WorkScaledCompute:
    """Computation proportional to each device's local work (spec 001 sec. 4: unequal local work).

    time_n = base_n x scale_n + step_time_s x steps_n, with steps_n = ``steps_fn(devices, round_idx)``
    the local steps device n runs this round (in gradient evaluations: FedShuffleMVR's count double) and scale_n = steps_n / ref_steps when ``scale_base`` (the base
    model assumed ref_steps steps, e.g. "cpu" with local_steps x batch_size samples), else 1.
    Energy scales like the base model's time. With FedShuffle's E ceil(|D_n| / B) steps, devices with
    more data become the stragglers.
    """

    def __init__(self, base, steps_fn, ref_steps: int, step_time_s: float = 0.0, scale_base: bool = True):
        self.base, self.steps_fn = base, steps_fn
        self.ref_steps, self.step_time_s, self.scale_base = max(int(ref_steps), 1), float(step_time_s), bool(scale_base)

    def _scale(self, devices: np.ndarray, round_idx: int) -> tuple[np.ndarray, np.ndarray]:
        steps = np.asarray(self.steps_fn(np.asarray(devices, dtype=np.int64), round_idx), dtype=float)
        return steps, (steps / self.ref_steps if self.scale_base else np.ones_like(steps))

    def compute_times(self, devices: np.ndarray, rng: np.random.Generator | None = None,
                      round_idx: int = 0) -> np.ndarray:
        """base time (scaled by steps / ref_steps) + step_time_s x steps for each of ``devices``."""
        steps, scale = self._scale(devices, round_idx)
        return self.base.compute_times(devices, rng) * scale + self.step_time_s * steps

    def energy_j(self, devices: np.ndarray, round_idx: int = 0) -> np.ndarray:
        """The base model's energy, scaled like its time."""
        return self.base.energy_j(devices) * self._scale(devices, round_idx)[1]


def make_compute(cfg: DevicesConfig, samples_per_round: int = 1):
    """The computation model named in the scenario (``samples_per_round`` is used by "cpu")."""
    n = cfg.count
    if cfg.compute == "cpu":
        f = np.asarray(cfg.cpu_hz_per_device) if cfg.cpu_hz_per_device else np.full(n, cfg.cpu_hz)
        c = (np.asarray(cfg.cycles_per_sample_per_device) if cfg.cycles_per_sample_per_device
             else np.full(n, cfg.cycles_per_sample))
        return CpuCompute(f, c, samples_per_round, cfg.kappa)
    if cfg.compute == "shifted_exponential":
        return ShiftedExponentialCompute(cfg.delay_shift_s, cfg.delay_mean_s)
    if cfg.compute_s_per_device:
        return ConstantCompute(np.asarray(cfg.compute_s_per_device))
    return ConstantCompute(np.full(cfg.count, cfg.compute_s))


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


def make_availability(cfg: DevicesConfig) -> MarkovAvailability | None:
    """The availability model of the scenario; None when every device is always available."""
    if cfg.p_on_to_off == 0:
        return None
    return MarkovAvailability(cfg.count, cfg.p_on_to_off, cfg.p_off_to_on)
