"""Fair client selection (spec 000): schedulers that choose exactly kappa distinct devices.

- :class:`RandomScheduler`: kappa devices uniformly without replacement.
- :class:`PowerOfChoiceScheduler`: d candidates uniformly without replacement, then the kappa with
  the largest current local loss (each candidate uploads one 32-bit loss).
- :class:`SubmodularScheduler`: DivFL (lam = mu = 0), SubTrunc (lam > 0) and UnionFL (mu > 0) by
  (stochastic) greedy over the stored gradients of a :class:`ClientStore`.

All draw from ``state.rng`` (the engine's "selection" stream), so runs are reproducible and
strategies that differ only in lam or mu consume the same random numbers. The Decision carries the
chosen devices in ``selected`` (the engine uses them instead of drawing) and the extra uplink
traffic they cost in ``pre_upload_bits`` (before the round: bootstrap gradients, loss scalars) and
``piggyback_bits`` (added to a selected device's model upload: its refreshed gradient and loss).

Power: every device transmits at P = min(Pmax, Pbar N / kappa), the uniform scheduler's
budget-matching rule with the inclusion rate q = kappa / N of random selection, so that the power
spent per round on average matches Pbar for Random and the comparison with uniform and lyapunov is
at the same budget. The Decision's q is that nominal kappa / N (it is recorded, not used to weigh
updates: these strategies average the kappa updates, see ``learning.algorithms.FedAvg`` with aggregation "mean").
"""
from __future__ import annotations

import math

import numpy as np

from .base import Decision, RoundState
from .client_store import ClientStore
from .schedulers import _available, _per_device
from .submodular import SelectionObjective, greedy, sample_size_rule

__all__ = ["FAIR_SCHEDULERS", "LOSS_BITS", "RandomScheduler", "PowerOfChoiceScheduler",
           "SubmodularScheduler", "PHI"]

FAIR_SCHEDULERS = ("random", "power_of_choice", "divfl", "subtrunc", "unionfl")
LOSS_BITS = 32.0
"""One float32 loss value on the uplink."""
PHI = {"log1p": np.log1p, "identity": lambda x: np.asarray(x, dtype=float)}
"""SubTrunc's phi: ln(1 + x) (the paper's default) or x."""


class _FairBase:
    """Shared parts: kappa, the power rule and building the Decision."""

    method = "fair"

    def __init__(self, num_devices: int, kappa: int, p_bar, p_max):
        self.num_devices = int(num_devices)
        if self.num_devices < 1:
            raise ValueError(f"num_devices must be >= 1, got {num_devices!r}")
        if int(kappa) != kappa or not 1 <= kappa <= self.num_devices:
            raise ValueError(f"kappa must be an integer in [1, {self.num_devices}], got {kappa!r}")
        self.kappa = self.m = int(kappa)
        self.p_bar = _per_device(p_bar, self.num_devices, "p_bar")
        self.p_max = _per_device(p_max, self.num_devices, "p_max")

    def _decision(self, state: RoundState, avail: np.ndarray, selected: np.ndarray,
                  pre_bits: np.ndarray | None = None, piggyback_bits: np.ndarray | None = None,
                  **info) -> Decision:
        n = self.num_devices
        q = np.where(avail, min(1.0, self.kappa / max(int(avail.sum()), 1)), 0.0)
        power = np.where(avail, np.minimum(self.p_max, self.p_bar / np.where(q > 0, q, 1.0)), 0.0)
        omega = q / max(q.sum(), 1e-300) if q.any() else np.zeros(n)
        return Decision(omega=omega, q=q, power=power, queue=np.zeros(n), m=self.kappa,
                        info={"method": self.method, "scheduled": int(avail.sum()), **info},
                        selected=np.sort(np.asarray(selected, dtype=np.int64)),
                        pre_upload_bits=pre_bits, piggyback_bits=piggyback_bits)


def _rng(state: RoundState) -> np.random.Generator:
    if state.rng is None:
        raise ValueError("this scheduler draws from state.rng (the engine's 'selection' stream); got None")
    return state.rng


class RandomScheduler(_FairBase):
    """kappa available devices uniformly without replacement (spec 000 sec. 2.7b)."""

    method = "random"

    def decide(self, state: RoundState) -> Decision:
        """Draw the devices; no extra traffic."""
        avail = _available(state, self.num_devices)
        pool = np.flatnonzero(avail)
        sel = _rng(state).choice(pool, size=min(self.kappa, pool.size), replace=False) if pool.size else pool
        return self._decision(state, avail, sel)


class PowerOfChoiceScheduler(_FairBase):
    """pi_pow-d (Cho et al.; spec 000 sec. 2.7c): d candidates uniformly without replacement receive
    the model, compute their local loss and upload it (32 bits each, before the round); the kappa
    with the largest losses are selected. ``candidates`` None: d = N (the DivFL code's choice)."""

    method = "power_of_choice"

    def __init__(self, num_devices: int, kappa: int, p_bar, p_max, store: ClientStore,
                 candidates: int | None = None):
        super().__init__(num_devices, kappa, p_bar, p_max)
        d = self.num_devices if candidates is None else int(candidates)
        if not self.kappa <= d <= self.num_devices:
            raise ValueError(f"candidates must lie in [kappa, N] = [{self.kappa}, {self.num_devices}], got {d}")
        self.candidates = d
        self.store = store

    def decide(self, state: RoundState) -> Decision:
        """Sample candidates, refresh their losses through the store, take the top kappa."""
        avail = _available(state, self.num_devices)
        pool = np.flatnonzero(avail)
        if self.candidates < pool.size:
            cand = np.sort(_rng(state).choice(pool, size=self.candidates, replace=False))
        else:
            cand = pool
        self.store.refresh(cand, with_gradients=False, round_idx=state.round)
        # stable sort on -loss: equal losses go to the lower index
        order = np.argsort(-self.store.losses[cand], kind="stable")
        sel = cand[order[: self.kappa]]
        pre = np.zeros(self.num_devices)
        pre[cand] = LOSS_BITS
        return self._decision(state, avail, sel, pre_bits=pre)


class SubmodularScheduler(_FairBase):
    """DivFL, SubTrunc and UnionFL (spec 000 secs. 2.1-2.6) over a :class:`ClientStore`.

    lam, budget (b), phi: SubTrunc's term lam min(b, sum phi(loss)); mu, window: UnionFL's penalty on
    devices selected in the last ``window`` rounds. ``greedy``: "stochastic" (r candidates per step,
    r = ``sample_size`` or max(kappa, 0.1 N)) or "naive". ``freshness``: "selected_only" (all
    devices upload gradient and loss in the first round; afterwards each selected device's gradient
    and loss at x_t ride on its upload) or "all_every_round" (every device uploads them every round
    before selection: the oracle). ``normalize_distances`` divides d by its maximum (an ablation).
    """

    method = "submodular"

    def __init__(self, num_devices: int, kappa: int, p_bar, p_max, store: ClientStore, *,
                 name: str = "divfl", lam: float = 0.0, budget: float = 1.10, phi: str = "log1p",
                 mu: float = 0.0, window: int = 5, greedy: str = "stochastic",
                 sample_size: int | None = None, freshness: str = "selected_only",
                 normalize_distances: bool = False, gradient_bits: float = 0.0):
        super().__init__(num_devices, kappa, p_bar, p_max)
        if phi not in PHI:
            raise ValueError(f"unknown phi {phi!r}; allowed: {', '.join(PHI)}")
        if greedy not in ("stochastic", "naive"):
            raise ValueError(f"greedy must be 'stochastic' or 'naive', got {greedy!r}")
        if freshness not in ("selected_only", "all_every_round"):
            raise ValueError(f"freshness must be 'selected_only' or 'all_every_round', got {freshness!r}")
        for label, v in (("lam", lam), ("mu", mu), ("budget", budget)):
            if not (v >= 0 and not math.isnan(v)):
                raise ValueError(f"{label} must be >= 0, got {v!r}")
        if int(window) != window or window < 0:
            raise ValueError(f"window must be an integer >= 0, got {window!r}")
        self.method = name
        self.store = store
        self.lam, self.budget, self.phi, self.mu = float(lam), float(budget), phi, float(mu)
        self.window = int(window)
        self.greedy = greedy
        self.sample_size = sample_size_rule(self.num_devices, self.kappa) if sample_size is None else int(sample_size)
        self.freshness = freshness
        self.normalize_distances = bool(normalize_distances)
        self.gradient_bits = float(gradient_bits)
        # the last `window` selections, one row each (-1 pads short rows): a plain array for checkpoints
        self.history = np.full((0, self.kappa), -1, dtype=np.int64)

    def reset(self) -> None:
        """Forget the selection history (start of a new run)."""
        self.history = np.full((0, self.kappa), -1, dtype=np.int64)

    def decide(self, state: RoundState) -> Decision:
        """Refresh the store where the freshness policy says so, then greedy over the objective."""
        n = self.num_devices
        avail = _available(state, n)
        pre = np.zeros(n)
        if self.freshness == "all_every_round" or not self.store.bootstrapped:
            everyone = np.arange(n)
            self.store.refresh(everyone, with_gradients=True, round_idx=state.round)
            self.store.bootstrapped = True
            pre[:] = self.gradient_bits + LOSS_BITS
        dist = self.store.dist
        if self.normalize_distances and dist.max(initial=0.0) > 0:
            dist = dist / dist.max()
        in_union = np.zeros(n, dtype=bool)
        if self.mu and self.window:
            recent = self.history[-self.window:]
            in_union[recent[recent >= 0]] = True
        objective = SelectionObjective(dist, phi_loss=PHI[self.phi](self.store.losses), lam=self.lam,
                                       budget=self.budget, in_union=in_union, mu=self.mu)
        r = self.sample_size if self.greedy == "stochastic" else None
        sel = greedy(objective, self.kappa, eligible=avail, rng=_rng(state) if r is not None else None,
                     sample_size=r)
        row = np.full(self.kappa, -1, dtype=np.int64)
        row[: sel.size] = sel
        keep = max(self.window, 1)
        self.history = np.vstack([self.history, row[None]])[-keep:]
        piggy = None
        if self.freshness == "selected_only":
            piggy = np.zeros(n)
            piggy[sel] = self.gradient_bits + LOSS_BITS
        return self._decision(state, avail, sel, pre_bits=pre if pre.any() else None,
                              piggyback_bits=piggy, objective=objective.value(),
                              store_refresh="gradient" if piggy is not None else "none",
                              union_size=int(in_union.sum()))
