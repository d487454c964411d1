"""Submodular client selection (docs/papers/fair_selection.md): DivFL's facility location, SubTrunc's
truncated loss term, UnionFL's window penalty, their marginal gains and (stochastic) greedy
maximisation.

Numpy only. The set functions are written twice: from scratch (``*_value``, for tests and reports)
and incrementally (:class:`SelectionObjective`, which keeps the coverage vector c_i = min_{j in S} d_ij,
the loss mass F_S and the history union, and is what the greedy uses).
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["pairwise_distances", "facility_location_value", "subtrunc_value", "unionfl_value",
           "SelectionObjective", "greedy", "sample_size_rule"]


def pairwise_distances(vectors: np.ndarray, squared: bool = False) -> np.ndarray:
    """d_ij = ||v_i - v_j|| (Euclidean norm, docs/papers/fair_selection.md, "Setting and notation") for
    the rows of ``vectors``; d_ii = 0."""
    v = np.asarray(vectors, dtype=np.float64)
    sq = np.einsum("ij,ij->i", v, v)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (v @ v.T), 0.0)  # clip rounding below 0
    np.fill_diagonal(d2, 0.0)
    return d2 if squared else np.sqrt(d2)


def _d0(dist: np.ndarray) -> float:
    # min over the empty set := D0 = max d (docs/papers/fair_selection.md: DivFL); it never changes an argmax
    return float(dist.max(initial=0.0))


def facility_location_value(dist: np.ndarray, selected, d0: float | None = None) -> float:
    """G(S) = sum_i D0 - sum_i min(D0, min_{j in S} d_ij), evaluated from scratch (DivFL, eq. 10)."""
    dist = np.asarray(dist, dtype=np.float64)
    d0 = _d0(dist) if d0 is None else float(d0)
    sel = np.asarray(list(selected), dtype=np.int64)
    cover = np.full(dist.shape[0], d0) if sel.size == 0 else np.minimum(dist[:, sel].min(axis=1), d0)
    return float(dist.shape[0] * d0 - cover.sum())


def subtrunc_value(dist: np.ndarray, selected, phi_loss: np.ndarray, lam: float, budget: float,
                   d0: float | None = None) -> float:
    """W(S) = G(S) + lam min(b, sum_{i in S} phi(loss_i)) from scratch (SubTrunc, eqs. 11-13)."""
    sel = list(selected)
    mass = float(np.sum(np.asarray(phi_loss, dtype=np.float64)[sel])) if sel else 0.0
    return facility_location_value(dist, sel, d0) + lam * min(budget, mass)


def unionfl_value(dist: np.ndarray, selected, in_union: np.ndarray, mu: float,
                  d0: float | None = None) -> float:
    """h(S) = G(S) - mu |U cap S| from scratch (UnionFL, eq. 14); ``in_union``: boolean mask of U."""
    sel = list(selected)
    hits = int(np.sum(np.asarray(in_union, dtype=bool)[sel])) if sel else 0
    return facility_location_value(dist, sel, d0) - mu * hits


class SelectionObjective:
    """Incremental marginal gains of G + lam min(b, F) - mu |U cap S| (docs/papers/fair_selection.md,
    "Marginal gains and the scale of the regularisers").

    lam = 0 and mu = 0 give DivFL; lam > 0 SubTrunc; mu > 0 UnionFL (both at once is allowed but is
    not in the paper). ``phi_loss``: phi(loss_i) per device (needed when lam > 0); ``in_union``:
    boolean mask of the devices selected in the look-back window (needed when mu > 0).
    """

    def __init__(self, dist: np.ndarray, *, phi_loss: np.ndarray | None = None, lam: float = 0.0,
                 budget: float = math.inf, in_union: np.ndarray | None = None, mu: float = 0.0,
                 d0: float | None = None):
        self.dist = np.asarray(dist, dtype=np.float64)
        n = self.dist.shape[0]
        if self.dist.shape != (n, n):
            raise ValueError(f"dist must be square, got shape {self.dist.shape}")
        self.d0 = _d0(self.dist) if d0 is None else float(d0)
        self.cover = np.full(n, self.d0)
        self.lam, self.budget, self.mu = float(lam), float(budget), float(mu)
        self.phi_loss = np.zeros(n) if phi_loss is None else np.asarray(phi_loss, dtype=np.float64)
        self.in_union = np.zeros(n, dtype=bool) if in_union is None else np.asarray(in_union, dtype=bool)
        self.mass = 0.0
        self.selected: list[int] = []

    def facility_gains(self, candidates: np.ndarray) -> np.ndarray:
        """Delta_G(e | S) = sum_i max(0, c_i - d_ie): the facility-location part of the gain alone."""
        cand = np.asarray(candidates, dtype=np.int64)
        return np.maximum(self.cover[:, None] - self.dist[:, cand], 0.0).sum(axis=0)

    def gains(self, candidates: np.ndarray) -> np.ndarray:
        """Delta(e | S) for each candidate e: Delta_G plus SubTrunc's Delta_H minus UnionFL's penalty."""
        cand = np.asarray(candidates, dtype=np.int64)
        gain = self.facility_gains(cand)
        if self.lam:
            capped = min(self.budget, self.mass)
            gain = gain + self.lam * (np.minimum(self.budget, self.mass + self.phi_loss[cand]) - capped)
        if self.mu:
            gain = gain - self.mu * self.in_union[cand]
        return gain

    def add(self, e: int) -> None:
        """S <- S + {e}: c_i <- min(c_i, d_ie), F_S <- F_S + phi(loss_e)."""
        e = int(e)
        np.minimum(self.cover, self.dist[:, e], out=self.cover)
        self.mass += float(self.phi_loss[e])
        self.selected.append(e)

    def value(self) -> float:
        """The objective of the current S (from the incremental state)."""
        g = float(self.dist.shape[0] * self.d0 - self.cover.sum())
        hits = int(self.in_union[self.selected].sum()) if self.selected else 0
        return g + self.lam * min(self.budget, self.mass) - self.mu * hits


def sample_size_rule(num_devices: int, k: int) -> int:
    """r = max(k, floor(0.1 n)), the DivFL code's stochastic-greedy sample size
    (docs/papers/fair_selection.md, "Greedy selection")."""
    return max(int(k), int(0.1 * num_devices))


def greedy(objective: SelectionObjective, k: int, *, eligible: np.ndarray | None = None,
           rng: np.random.Generator | None = None, sample_size: int | None = None,
           trace: list | None = None) -> np.ndarray:
    """Pick k devices one at a time by the largest marginal gain; returns them in pick order.

    Stochastic greedy (docs/papers/fair_selection.md, "Greedy selection") when ``sample_size`` r is
    given and r < |remaining|: each step looks only at r candidates drawn afresh without replacement
    from the remaining ones with ``rng``. The draws depend only on n, k and r, never on the gains, so
    objectives differing only in lam or mu consume the same random numbers. Ties go to the lowest
    device index. Always returns min(k, |eligible|) devices, also when the best gain is negative
    (UnionFL is not monotone).

    ``trace``: a list to which each step appends what it saw (a diagnostic; it changes no pick):
    the candidates, their facility-location gains Delta_G ("facility"), their whole gains
    ("total": Delta_G plus the regularisers' part), the loss mass F_S before the step and the pick.
    """
    n = objective.dist.shape[0]
    remaining = np.arange(n) if eligible is None else np.flatnonzero(np.asarray(eligible, dtype=bool))
    picks = []
    for _ in range(min(int(k), remaining.size)):
        if sample_size is not None and sample_size < remaining.size:
            if rng is None:
                raise ValueError("stochastic greedy needs an rng")
            cand = np.sort(rng.choice(remaining, size=int(sample_size), replace=False))
        else:
            cand = remaining
        total = objective.gains(cand)
        e = int(cand[int(np.argmax(total))])  # argmax: first (lowest) on ties
        if trace is not None:
            trace.append({"candidates": np.array(cand), "facility": objective.facility_gains(cand),
                          "total": total, "mass": objective.mass, "pick": e})
        objective.add(e)
        picks.append(e)
        remaining = remaining[remaining != e]
    return np.asarray(picks, dtype=np.int64)
