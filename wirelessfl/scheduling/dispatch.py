"""Channel- and age-aware drift-plus-penalty dispatch for the event protocols (docs/dispatch.md).

Slots are aggregations: device n's power use in the slot that ends at an aggregation is e_n, the
sum of the transmit powers of its uploads started in that slot (the event counterpart of the round
rule's P_n q_n), with the budget (1/T) sum_t e_n(t) <= Pbar_n. Its virtual queue is

    Z_n <- max(Z_n + e_n - Pbar_n, 0)    at every aggregation.

When s slots free, the rule starts the s idle, available devices with the smallest

    J_n = min_{0 <= P <= Pmax} [ V lam l / (B log2(1 + g_n P / N0)) + Z_n P ]  -  V mu A_n,

where g_n is the device's mean gain (the fading of the upload is drawn when it starts), the
first term is the airtime its upload will hold the shared uplink, priced as the round rule prices
it and minimised by the same Lambert-W power (wirelessfl.scheduling.pricing: under fdma and ofdma
each of the devices in flight is charged a B / k share of the band), and A_n = version -
last_applied_n is the number of aggregations the model has gone without the device's data (its
age). Ties go to the lower device index. mu = 0 is channel-aware dispatch alone.
"""
from __future__ import annotations

import math

import numpy as np

from .base import DispatchState
from .pricing import priced_power_and_airtime

__all__ = ["DispatchQueues", "dispatch_costs"]


def dispatch_costs(state: DispatchState, queue: np.ndarray, p_max: np.ndarray, *, V: float, lam: float,
                   mu: float, rule: str = "exact") -> tuple[np.ndarray, np.ndarray]:
    """(J_n, P_n) of every device (J = +inf where it cannot be started or cannot send). The airtime
    is priced as the access scheme says for the devices in flight once these start sending together
    (an upper bound on those on the air at once)."""
    in_flight = int(state.num_busy) + int(state.slots)
    power, airtime = priced_power_and_airtime(state, state.mean_gains, queue, p_max, V=V, lam=lam,
                                              k=max(in_flight, 1), rule=rule)
    cost = airtime + queue * power - V * mu * (state.version - state.last_applied)
    eligible = ~state.busy if state.available is None else state.available & ~state.busy
    bad = np.flatnonzero(eligible & np.isfinite(airtime) & ~np.isfinite(cost))
    if bad.size:  # an overflowed age term would leave the device out as if it could not send
        from ..fields import ConfigError

        i = int(bad[0])
        raise ConfigError(f"scheduler.V = {V:g}, scheduler.age_weight = {mu:g}: device {i}'s dispatch cost is "
                          f"{float(cost[i])!r} (age {int(state.version - state.last_applied[i])}), not a finite number; "
                          "choose smaller V or age_weight")
    return np.where(eligible, cost, np.inf), power


class DispatchQueues:
    """Virtual queues of a per-slot budget (the power queues Z with P̄; the computation-energy queues
    Y with ē when the rule also chooses CPU frequencies) and what each device spent in the current slot."""

    def __init__(self, budget: np.ndarray):
        self.budget = np.asarray(budget, dtype=float)  # per device and slot: P̄, or ē
        self.spent = np.zeros(self.budget.size)
        self.version = 0

    def advance(self, queue: np.ndarray, version: int) -> np.ndarray:
        """The queues after the aggregations since the last call (one update per slot)."""
        while self.version < version:
            queue = np.maximum(queue + self.spent - self.budget, 0.0)
            self.spent = np.zeros_like(self.spent)
            self.version += 1
        return queue

    def spend(self, devices: np.ndarray, amounts: np.ndarray) -> None:
        """``devices`` spend ``amounts`` in the current slot."""
        np.add.at(self.spent, devices, amounts)

    def choose(self, state: DispatchState, queue: np.ndarray, p_max: np.ndarray, *, V: float, lam: float,
               mu: float, rule: str, extra: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, dict]:
        """(devices, powers, info) of the s = state.slots cheapest devices (``extra``: a cost per
        device added to J_n, e.g. its computation's); their powers count toward this slot's use."""
        cost, power = dispatch_costs(state, queue, p_max, V=V, lam=lam, mu=mu, rule=rule)
        if extra is not None:
            cost = cost + extra
        finite = int(np.count_nonzero(np.isfinite(cost)))
        k = min(int(state.slots), finite)
        if k <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0), {"method": "lyapunov_dispatch", "dispatch_cost": math.nan}
        order = np.argsort(cost, kind="stable")[:k]  # stable: ties to the lower index
        self.spent[order] += power[order]
        return order.astype(np.int64), power[order], {"method": "lyapunov_dispatch",
                                                       "dispatch_cost": float(cost[order[0]])}

    def state_dict(self) -> dict:
        return {"spent": self.spent.copy(), "version": self.version}

    def load_state(self, state: dict) -> None:
        self.spent = np.asarray(state["spent"], dtype=float).copy()
        self.version = int(state["version"])
