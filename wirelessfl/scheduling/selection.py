"""Per-draw selection probabilities of the drift-plus-penalty problem (docs/papers/lyapunov.md,
"Selection probabilities (the paper's eq. 22)").

    minimise  F(omega) = sum_n a / q_n + b_n q_n,   q_n = 1 - (1 - omega_n)^m,
    over the open probability simplex (omega_n > 0, sum omega_n = 1), a > 0, b_n >= 0.

Two solvers:

* ``method="exact"``: a vectorised solver that enumerates the KKT points (below) and keeps the best.
* ``method="manifold"``: Riemannian optimisation on the simplex with the Fisher metric
  (pymanopt, as the paper does with Manopt), from several starting points.

The exact solver and the structure it uses are in ``exact.py``; the manifold route and the
``Simplex`` manifold in ``manifold.py``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .base import inclusion_probability


@dataclass(frozen=True)
class SelectionResult:
    """Result of :func:`solve_selection` (shaped like ``scipy.optimize.OptimizeResult``).

    omega: per-draw probabilities (sum 1). q: inclusion probabilities 1 - (1 - omega)^m in (0, 1].
    fun: objective sum a/q + b q. certificate: how optimality was established.
    """

    omega: np.ndarray
    q: np.ndarray
    fun: float
    method: str
    success: bool
    message: str
    certificate: dict = field(default_factory=dict)
    nit: int = 0

    @property
    def x(self) -> np.ndarray:
        """Alias of ``omega`` (scipy naming)."""
        return self.omega


def selection_objective(omega, a: float, b, m: int) -> float:
    """F(omega) = sum_n a / q_n + b_n q_n with q_n = 1 - (1 - omega_n)^m."""
    q = inclusion_probability(np.asarray(omega, dtype=float), m)
    with np.errstate(divide="ignore"):
        return float(np.sum(a / q + np.asarray(b, dtype=float) * q))


def _validate(a, b, m):
    try:
        a = float(a)
    except (TypeError, ValueError):
        raise ValueError(f"a must be a finite scalar > 0, got {a!r}") from None
    if not (math.isfinite(a) and a > 0):
        raise ValueError(f"a must be a finite scalar > 0, got {a!r}")
    b = np.asarray(b, dtype=float)
    if b.ndim != 1 or b.size == 0:
        raise ValueError(f"b must be a non-empty 1-D array, got shape {b.shape}")
    if not np.isfinite(b).all() or (b < 0).any():
        raise ValueError("b must be finite and >= 0")
    if int(m) != m or m < 1:
        raise ValueError(f"m must be an integer >= 1, got {m!r}")
    return float(a), b, int(m)


def _exact(a, b, m, **opts):
    from .exact import solve_exact  # scipy.special only when a selection is solved (0.2 s to import)

    return solve_exact(a, b, m, **opts)


def _manifold(a, b, m, **opts):
    from .manifold import solve_manifold  # pymanopt (and torch) only when asked for

    return solve_manifold(a, b, m, **opts)


SOLVERS: dict[str, Callable] = {"exact": _exact, "manifold": _manifold}
"""The selection methods by name: each maps (a, b, m, **opts) to (omega, certificate)."""
SELECTION_METHODS = tuple(SOLVERS)


def solve_selection(a: float, b, m: int, method: str = "exact", **opts: Any) -> SelectionResult:
    """Minimise sum_n a / q_n + b_n q_n over omega on the simplex, q_n = 1 - (1 - omega_n)^m.

    Parameters
    ----------
    a : weight of the convergence term (a = V / N in docs/papers/lyapunov.md), > 0.
    b : array (N,) of per-device weights (airtime and queue terms), finite, >= 0.
    m : number of draws with replacement, >= 1.
    method : "exact" (KKT enumeration, default) or "manifold" (pymanopt on the simplex).
    opts : for "exact": grid (cells on the concave branch, 10), tol (inner Newton, 1e-10),
        bracket (True: try the monotone bracket of the concave branch before scanning it).
        For "manifold": optimizer ("trust-regions" or "conjugate-gradient"), n_cheapest (3),
        mass (0.9), min_gradient_norm, max_iterations, rng (seed for the manifold's random points).

    Returns
    -------
    SelectionResult with omega (sum 1), q in (0, 1], fun, method, success, message, certificate.
    """
    if method not in SELECTION_METHODS:
        raise ValueError(f"unknown selection method {method!r}; allowed values: {', '.join(SELECTION_METHODS)}")
    a, b, m = _validate(a, b, m)
    return solve_checked(a, b, m, method, **opts)


def solve_checked(a: float, b: np.ndarray, m: int, method: str, **opts: Any) -> SelectionResult:
    """:func:`solve_selection` on checked input (a float > 0, b finite >= 0 1-D float, m int >= 1)."""
    # No warnings from inside the solvers: their success is judged below.
    with np.errstate(all="ignore"):
        w, info = SOLVERS[method](a, b, m, **opts)
        nit = int(info.get("evaluations", info.get("iterations", 0)))
        message = info.pop("stopping_criterion", "KKT candidates enumerated")
        # Both solvers return omega in [0, 1]: q = 1 - (1 - omega)^m lies in [0, 1]. Keep it
        # strictly positive: a coordinate can underflow only for absurd inputs.
        q = np.maximum(-np.expm1(m * np.log1p(-w)), np.finfo(float).tiny)
        fun = float((a / q + b * q).sum())
    # A NaN anywhere in omega makes fun NaN.
    ok = bool(math.isfinite(fun) and abs(w.sum() - 1.0) <= 1e-12)
    return SelectionResult(omega=w, q=q, fun=fun, method=method, success=ok, message=message,
                           certificate=info, nit=nit)
