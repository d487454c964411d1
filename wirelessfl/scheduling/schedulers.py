"""Schedulers: plain objects with ``decide(state) -> Decision`` (no torch, no SimPy).

- UniformScheduler: omega = 1/N, powers that meet the average-power budget with equality (spec 002, sec. 5).
- LyapunovScheduler: drift-plus-penalty with virtual power queues (spec 002, sec. 4).
"""
from __future__ import annotations

import numpy as np

from .base import Decision, RoundState, inclusion_probability
from .power import optimal_power
from .selection import solve_selection

# Stands in for an infinite per-round cost (a device whose optimal power is 0 cannot send): large
# enough that such a device gets a negligible draw probability, finite so the solver stays exact.
_UNSENDABLE_COST = 1e300


def _mask(state: RoundState, n: int) -> np.ndarray:
    return np.ones(n, dtype=bool) if state.available is None else np.asarray(state.available, dtype=bool)


class UniformScheduler:
    """Every available device is drawn with probability 1/N_available per draw.

    Power P_n = min(Pmax, Pbar_n / q_n) meets the time-average power budget with equality where it
    can (expected power per round q_n P_n = Pbar_n). Unavailable devices get omega = q = 0 and are
    never selected.
    """

    def __init__(self, num_devices: int, m: int, p_bar, p_max: float):
        self.num_devices, self.m = int(num_devices), int(m)
        self.p_bar = np.broadcast_to(np.asarray(p_bar, dtype=float), (self.num_devices,))
        self.p_max = float(p_max)

    def decide(self, state: RoundState) -> Decision:
        n = self.num_devices
        avail = _mask(state, n)
        omega = np.where(avail, 1.0 / max(avail.sum(), 1), 0.0)
        q = inclusion_probability(omega, self.m)
        with np.errstate(divide="ignore"):
            power = np.where(avail, np.minimum(self.p_max, self.p_bar / q), 0.0)
        return Decision(omega=omega, q=q, power=power, queue=np.zeros(n), m=self.m,
                        info={"method": "uniform"})


class LyapunovScheduler:
    """Drift-plus-penalty scheduling with one virtual queue Z_n per device for its power budget.

    Each round: P = optimal_power(g, Z) (independent of q), then omega minimises
    sum_n a / q_n + b_n q_n with a = V / N and b_n = V lam l / (B log2(1 + g_n P_n / N0)) + Z_n P_n,
    then Z_n <- max(Z_n + P_n q_n - Pbar_n, 0). The Decision carries the Z it was made with.
    Unavailable devices are left out of the problem (omega = q = 0) and keep their queues.
    """

    def __init__(self, num_devices: int, m: int, V: float, lam: float, p_bar, p_max: float,
                 power_rule: str = "exact", solver: str = "exact"):
        self.num_devices, self.m = int(num_devices), int(m)
        self.V, self.lam = float(V), float(lam)
        self.p_bar = np.broadcast_to(np.asarray(p_bar, dtype=float), (self.num_devices,))
        self.p_max = float(p_max)
        self.power_rule, self.solver = power_rule, solver
        self.queue = np.zeros(self.num_devices)

    def decide(self, state: RoundState) -> Decision:
        n = self.num_devices
        avail = _mask(state, n)
        z = self.queue.copy()
        power = optimal_power(state.gains, z, V=self.V, lam=self.lam, model_bits=state.model_bits,
                              bandwidth_hz=state.bandwidth_hz, noise_power=state.noise_power,
                              p_max=self.p_max, rule=self.power_rule)
        spectral = np.log2(1.0 + state.gains * power / state.noise_power)
        with np.errstate(divide="ignore"):
            airtime_cost = np.where(spectral > 0, self.V * self.lam * state.model_bits
                                    / (state.bandwidth_hz * np.maximum(spectral, 1e-300)), _UNSENDABLE_COST)
        b = np.minimum(airtime_cost + z * power, _UNSENDABLE_COST)

        omega = np.zeros(n)
        result = solve_selection(self.V / n, b[avail], self.m, method=self.solver)
        omega[avail] = result.omega
        q = inclusion_probability(omega, self.m)
        self.queue = np.where(avail, np.maximum(z + power * q - self.p_bar, 0.0), z)
        return Decision(omega=omega, q=q, power=power, queue=z, m=self.m,
                        info={"method": result.method, "objective": float(result.fun)})
