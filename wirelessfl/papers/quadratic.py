"""The FedShuffle paper's quadratic experiment (docs/papers/fedshuffle.md, "The quadratic experiment
(eq. 36)"), pure numpy.

    min_{x in R^6} (1/12) sum_{j=1}^6 ||x - e_j||^2,   f_ij(x) = 1/2 ||x - e_j||^2,  grad = x - e_j.

Clients hold {e1}, {e2, e3}, {e4, e5, e6} (|D_i| = 1, 2, 3); x^0 = 0, x* = 1/6 * ones.
One local epoch, batch 1, 1000 rounds, full participation, base step eta = 1/80
(docs/papers/fedshuffle.md, "The quadratic experiment"): the local step is eta / |D_i| for FedShuffle
and eta / max_j |D_j| for the others.

Every method is a FedShuffleGen setting (docs/papers/fedshuffle.md, "The FedShuffle family as
algorithms"): a per-client local step size, a number of local steps, with or without random
reshuffling (RR), and per-client aggregation coefficients;
x^{r+1} = x^r + sum_{i in S} coef_i (y_i - x^r).

Because all f_ij share the Hessian I, one local run is affine in x with deterministic slope:
y_i = (1 - g_i)^{tau_i} x + (noise with mean (1 - (1 - g_i)^{tau_i}) c_i), c_i the client's centroid.
So E[x^r] follows a deterministic linear recursion and its fixed point is in closed form
(:func:`expected_fixed_point`); for small steps FedAvg's tends to
sum |D_i|^2 c_i / sum |D_i|^2 (:func:`fedavg_limit_point`).

It is the paper's own synthetic benchmark, not a simulation: ``wirelessfl reproduce fedshuffle:fig1``
(wirelessfl.papers.fedshuffle) runs it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "METHODS",
    "QuadraticProblem",
    "paper_problem",
    "method_setting",
    "run",
    "run_seeds",
    "expected_fixed_point",
    "fedavg_limit_point",
    "so_fixed_point",
]

METHODS = ("fedavg", "fedavg_rr", "fedavg_min", "fednova", "fednova_rr", "fedshuffle", "fedshuffle_so")
SEEDS = (123, 124, 125)


@dataclass(frozen=True)
class QuadraticProblem:
    """Clients' points: clients[i] is an (|D_i|, d) array; f_ij(x) = 1/2 ||x - clients[i][j]||^2."""

    clients: tuple[np.ndarray, ...]

    @property
    def sizes(self) -> np.ndarray:
        return np.array([len(c) for c in self.clients], dtype=np.int64)

    @property
    def dim(self) -> int:
        return self.clients[0].shape[1]

    @property
    def weights(self) -> np.ndarray:
        """w_i = |D_i| / |D|."""
        return self.sizes / self.sizes.sum()

    @property
    def centroids(self) -> np.ndarray:
        """c_i, the minimiser of f_i."""
        return np.stack([c.mean(axis=0) for c in self.clients])

    @property
    def optimum(self) -> np.ndarray:
        """x* = sum_i w_i c_i (the mean of all points)."""
        return self.weights @ self.centroids

    def objective(self, x: np.ndarray) -> float:
        """f(x) = (1 / (2 |D|)) sum_ij ||x - e_ij||^2."""
        pts = np.concatenate(self.clients)
        return float(0.5 * np.mean(np.sum((pts - x) ** 2, axis=1)))


def paper_problem(sizes=(1, 2, 3)) -> QuadraticProblem:
    """Eq. 36: unit vectors e_1..e_d split among clients in order; sizes (1,2,3) give d = 6."""
    d = int(sum(sizes))
    eye = np.eye(d)
    bounds = np.cumsum((0,) + tuple(sizes))
    return QuadraticProblem(tuple(eye[bounds[i]:bounds[i + 1]] for i in range(len(sizes))))


@dataclass(frozen=True)
class Setting:
    """One method as a FedShuffleGen setting for the quadratic (batch 1, one epoch)."""

    step: np.ndarray  # local step size per client
    steps: np.ndarray  # local steps per client (tau_i)
    rr: bool  # random reshuffling (else i.i.d. draws with replacement)
    coef: object  # coef(selected, p) -> coefficients of the selected clients' deltas


def method_setting(method: str, problem: QuadraticProblem, eta: float, p: np.ndarray | None = None) -> Setting:
    """Step sizes, step counts, sampling of samples and aggregation coefficients of ``method``.

    p: marginal inclusion probabilities (default: full participation, p = 1).
    """
    sizes, w = problem.sizes, problem.weights
    n = sizes.size
    p = np.ones(n) if p is None else np.asarray(p, dtype=np.float64)
    tau = sizes.copy()  # one epoch, batch 1
    common = np.full(n, eta / sizes.max())

    def so(sel, p):  # "sum one": w_i / sum_S w_j
        return w[sel] / w[sel].sum()

    if method in ("fedavg", "fedavg_rr"):
        return Setting(common, tau, method == "fedavg_rr", so)
    if method == "fedavg_min":  # K_min = 1 step; toy code: lr eta (= 3 eta / 3)
        k = np.full(n, tau.min())
        return Setting(np.full(n, eta * tau.min()), k, True, so)
    if method in ("fednova", "fednova_rr"):
        def nova(sel, p):  # rho_i tau_eff / tau_i, rho = SO, tau_eff = sum rho_i tau_i (Wang et al.)
            rho = so(sel, p)
            return rho * (rho @ tau[sel]) / tau[sel]
        return Setting(common, tau, method == "fednova_rr", nova)
    if method == "fedshuffle":
        return Setting(eta / tau, tau, True, lambda sel, p: w[sel] / p[sel])
    if method == "fedshuffle_so":
        def shuffle_so(sel, p):
            c = w[sel] / p[sel]
            return c / c.sum()
        return Setting(eta / tau, tau, True, shuffle_so)
    raise ValueError(f"unknown method {method!r}; choose from {METHODS}")


def run(
    method: str,
    problem: QuadraticProblem | None = None,
    *,
    eta: float = 1 / 80,
    rounds: int = 1000,
    seed: int = 123,
    cohort: int | None = None,
    momentum: float = 0.0,
    probs=None,
) -> np.ndarray:
    """||x^r - x*||^2 for r = 0..rounds.

    cohort: clients per round, drawn uniformly without replacement (p_i = cohort / n); None: all.
    momentum: 1 - a of the MVR global momentum (docs/papers/fedshuffle.md, "Global momentum and the
        local step direction"; the toy "momentum 0.9": FedShuffleMVR for "fedshuffle"; applied the
        same way to every method). Local direction
        d = grad_j(y) + (1 - a)(m^r - grad_j(x^r)); server momentum, lagged (notebook ordering)
        m^{r+1} = (1 - a) m^r + sum_S (w_i / p_i)(grad f_i(x^r) - (1 - a) grad f_i(x^{r-1})),
        always with data weights w_i / p_i; m^0 = 0 and x^{-1} = x^0.
    probs: sample exactly one client per round with these probabilities (p_i = probs_i; Fig. 1d:
        uniform vs importance sampling p ~ |D_i|); overrides ``cohort``.
    """
    problem = paper_problem() if problem is None else problem
    n = problem.sizes.size
    b = n if cohort is None else int(cohort)
    p = np.full(n, b / n)
    if probs is not None:
        p = np.asarray(probs, dtype=np.float64)
        if p.shape != (n,) or abs(p.sum() - 1) > 1e-12 or np.any(p <= 0):
            raise ValueError(f"probs must be {n} positive probabilities summing to 1, got {probs}")
    s = method_setting(method, problem, eta, p)
    rng = np.random.default_rng(seed)
    x = np.zeros(problem.dim)
    x_prev = x.copy()
    mom = np.zeros(problem.dim)
    beta = float(momentum)  # 1 - a
    w, cents = problem.weights, problem.centroids
    xs = problem.optimum
    out = np.empty(rounds + 1)
    out[0] = np.sum((x - xs) ** 2)
    for r in range(rounds):
        if probs is not None:
            sel = np.array([rng.choice(n, p=p)])
        else:
            sel = np.arange(n) if b == n else np.sort(rng.choice(n, size=b, replace=False))
        deltas = np.empty((sel.size, problem.dim))
        for k, i in enumerate(sel):
            pts = problem.clients[i]
            m = len(pts)
            steps = int(s.steps[i])
            if s.rr:
                order = np.concatenate([rng.permutation(m) for _ in range(-(-steps // m))])[:steps]
            else:
                order = rng.integers(0, m, size=steps)
            y = x.copy()
            g = s.step[i]
            if beta:
                for j in order:  # grad_j(y) - grad_j(x) = y - x for these quadratics
                    y -= g * ((y - pts[j]) + beta * (mom - (x - pts[j])))
            else:
                for j in order:
                    y -= g * (y - pts[j])
            deltas[k] = y - x
        if beta:  # full local gradients grad f_i(z) = z - c_i at x^r and x^{r-1}
            u = (x - cents[sel]) - beta * (x_prev - cents[sel])
            mom = beta * mom + (w[sel] / p[sel]) @ u
            x_prev = x
        x = x + s.coef(sel, p) @ deltas
        out[r + 1] = np.sum((x - xs) ** 2)
    return out


def run_seeds(method: str, seeds=SEEDS, **kw) -> np.ndarray:
    """Curves of ``run`` for each seed, shape (len(seeds), rounds + 1)."""
    return np.stack([run(method, seed=s, **kw) for s in seeds])


def expected_fixed_point(method: str, problem: QuadraticProblem | None = None, eta: float = 1 / 80) -> np.ndarray:
    """Exact fixed point of E[x^r] under full participation.

    A client's update is E[Delta_i] = a_i (c_i - x) with a_i = 1 - (1 - g_i)^{tau_i} for RR and
    with-replacement draws alike; with coefficients rho_i the fixed point is
    sum rho_i a_i c_i / sum rho_i a_i.
    """
    problem = paper_problem() if problem is None else problem
    s = method_setting(method, problem, eta)
    sel = np.arange(problem.sizes.size)
    rho = s.coef(sel, np.ones(sel.size))
    a = 1.0 - (1.0 - s.step) ** s.steps
    return (rho * a) @ problem.centroids / (rho * a).sum()


def fedavg_limit_point(problem: QuadraticProblem | None = None) -> np.ndarray:
    """FedAvg's small-step fixed point: sum |D_i|^2 c_i / sum |D_i|^2 (docs/papers/fedshuffle.md, "The
    quadratic experiment")."""
    problem = paper_problem() if problem is None else problem
    sq = problem.sizes.astype(float) ** 2
    return sq @ problem.centroids / sq.sum()


def so_fixed_point(problem: QuadraticProblem | None = None, cohort: int = 2) -> np.ndarray:
    """Small-step fixed point of FedShuffle with SO weights, ``cohort`` of n uniformly
    (docs/papers/fedshuffle.md, "The quadratic experiment").

    Client i's expected weight is E[1_{i in S} w_i / sum_S w_j] over all equally likely cohorts.
    """
    from itertools import combinations

    problem = paper_problem() if problem is None else problem
    w = problem.weights
    n = w.size
    e = np.zeros(n)
    cohorts = list(combinations(range(n), cohort))
    for sel in cohorts:
        sel = np.array(sel)
        e[sel] += w[sel] / w[sel].sum() / len(cohorts)
    return e @ problem.centroids / e.sum()
