"""The manifold route of the selection problem: pymanopt on the probability simplex, as the paper
does with Manopt. Imported only when asked for: pymanopt pulls in its autodiff backends (torch).

``Simplex``: the positive probability simplex as a pymanopt manifold (Fisher metric).

pymanopt has no simplex; this is the port of Manopt's ``multinomialfactory(n)``: points are
vectors x > 0 with sum(x) = 1, tangent vectors are v with sum(v) = 0, and the metric is the
Fisher information metric <u, v>_x = sum(u v / x). Because the metric blows up at the boundary,
Riemannian gradient steps never leave the open simplex, which suits objectives such as
sum a / q(omega) that are infinite on the boundary.
"""
from __future__ import annotations

import numpy as np
import pymanopt
from pymanopt.manifolds.manifold import Manifold
from pymanopt.optimizers import ConjugateGradient, TrustRegions

from .base import inclusion_probability

# Keep every coordinate strictly positive after a retraction (the metric divides by x);
# Manopt uses the same floor (eps).
_FLOOR = np.finfo(float).eps


class Simplex(Manifold):
    """Open probability simplex {x in R^n : x > 0, sum x = 1} with the Fisher metric.

    Args:
        n: number of coordinates (the manifold has dimension n - 1).
        rng: seed or ``numpy.random.Generator`` used by ``random_point`` and
            ``random_tangent_vector`` (pymanopt calls them without an rng argument).
    """

    def __init__(self, n: int, *, rng=None):
        if int(n) < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        self._n = int(n)
        self._rng = np.random.default_rng(rng)
        super().__init__(f"Probability simplex in R^{self._n} (Fisher metric)", self._n - 1)

    @property
    def typical_dist(self):
        # Manopt: m * pi / 2 for m columns; the Fisher-Rao diameter of the simplex is pi.
        return np.pi / 2

    def inner_product(self, point, tangent_vector_a, tangent_vector_b):
        return float(np.sum(tangent_vector_a * tangent_vector_b / point))

    def norm(self, point, tangent_vector):
        return float(np.sqrt(self.inner_product(point, tangent_vector, tangent_vector)))

    def dist(self, point_a, point_b):
        # Fisher-Rao distance: the sphere map x -> 2 sqrt(x) is an isometry onto a radius-2 sphere.
        cos = np.clip(np.sum(np.sqrt(point_a * point_b)), -1.0, 1.0)
        return float(2.0 * np.arccos(cos))

    def projection(self, point, vector):
        # Orthogonal projection for the Fisher metric onto {v : sum v = 0}.
        return vector - np.sum(vector) * point

    to_tangent_space = projection

    def euclidean_to_riemannian_gradient(self, point, euclidean_gradient):
        return point * (euclidean_gradient - np.sum(point * euclidean_gradient))

    def euclidean_to_riemannian_hessian(self, point, euclidean_gradient, euclidean_hessian,
                                        tangent_vector):
        # Manopt multinomialfactory.ehess2rhess: derivative of the Riemannian gradient along
        # the tangent vector plus the Koszul correction for the non-constant metric, projected.
        x, eg, eh, eta = point, euclidean_gradient, euclidean_hessian, tangent_vector
        lam = -np.sum(x * eg)
        rgrad = x * eg + lam * x
        lam_dot = -np.sum(eta * eg) - np.sum(x * eh)
        rgrad_dot = eta * eg + x * eh + lam_dot * x + lam * eta
        correction = -0.5 * eta * rgrad / x
        return self.projection(x, rgrad_dot + correction)

    def retraction(self, point, tangent_vector):
        # x * exp(v / x), renormalised; shifting the exponent by its max avoids overflow.
        e = tangent_vector / point
        y = point * np.exp(e - np.max(e))
        y = np.maximum(y / np.sum(y), _FLOOR)
        return y / np.sum(y)

    def transport(self, point_a, point_b, tangent_vector_a):
        # Vector transport by projection onto the tangent space at point_b (as Manopt).
        return self.projection(point_b, tangent_vector_a)

    def random_point(self):
        x = self._rng.random(self._n) + _FLOOR
        return x / np.sum(x)

    def random_tangent_vector(self, point):
        v = self.projection(point, self._rng.standard_normal(self._n) * np.sqrt(point))
        nv = self.norm(point, v)
        return v / nv if nv > 0 else v

    def zero_vector(self, point):
        return np.zeros(self._n)


MANIFOLD_OPTIMIZERS = ("trust-regions", "conjugate-gradient")


def solve_manifold(a, b, m, *, optimizer="trust-regions", n_cheapest=3, mass=0.9,
                    min_gradient_norm=None, max_iterations=None, rng=0):
    """pymanopt on the Fisher simplex from the uniform point and from points putting ``mass`` on
    each of the ``n_cheapest`` devices with the smallest b; the best end point wins."""
    if optimizer not in MANIFOLD_OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; allowed values: {', '.join(MANIFOLD_OPTIMIZERS)}")
    n = b.size
    if n == 1:
        return np.ones(1), {"kind": "trivial", "route": "N = 1: omega = [1]", "iterations": 0}
    manifold = Simplex(n, rng=rng)

    def parts(w):
        L = np.log1p(-np.minimum(w, 1.0))
        return L, -np.expm1(m * L)

    @pymanopt.function.numpy(manifold)
    def cost(w):
        L, q = parts(w)
        return float(np.sum(a / q + b * q))

    @pymanopt.function.numpy(manifold)
    def egrad(w):
        L, q = parts(w)
        return m * np.exp((m - 1) * L) * (b - a / q ** 2)

    @pymanopt.function.numpy(manifold)
    def ehess(w, v):
        # The objective is separable: the Euclidean Hessian is diagonal with entries g_n''.
        L, q = parts(w)
        g2 = m * np.exp((m - 2) * L) * (-(m - 1) * (b - a / q ** 2) + 2 * a * m * np.exp(m * L) / q ** 3)
        return g2 * v

    # Gradient tolerance relative to the objective's scale at the uniform point (units of F).
    scale = float(np.sum(a / inclusion_probability(np.full(n, 1.0 / n), m) + b))
    gtol = 1e-9 * scale if min_gradient_norm is None else float(min_gradient_norm)
    if optimizer == "trust-regions":
        problem = pymanopt.Problem(manifold, cost, euclidean_gradient=egrad, euclidean_hessian=ehess)
        opt = TrustRegions(verbosity=0, min_gradient_norm=gtol,
                           max_iterations=200 if max_iterations is None else max_iterations)
    else:
        problem = pymanopt.Problem(manifold, cost, euclidean_gradient=egrad)
        opt = ConjugateGradient(verbosity=0, min_gradient_norm=gtol, min_step_size=1e-14,
                                max_iterations=2000 if max_iterations is None else max_iterations)
    starts = [np.full(n, 1.0 / n)]
    for i in np.argsort(b, kind="stable")[: min(n_cheapest, n)]:
        x = np.full(n, (1.0 - mass) / (n - 1))
        x[i] = mass
        starts.append(x)
    best = None
    total_iterations = 0
    for x0 in starts:
        # pymanopt's truncated CG computes 0/0 once its residual vanishes exactly (a NaN step that
        # the trust-region test then rejects): not worth a warning.
        with np.errstate(invalid="ignore", divide="ignore"):
            res = opt.run(problem, initial_point=x0)
        total_iterations += res.iterations
        if best is None or res.cost < best.cost:
            best = res
    w = np.asarray(best.point, dtype=float)
    w = w / w.sum()
    return w, {"kind": "multistart-local", "starts": len(starts), "optimizer": optimizer,
               "iterations": total_iterations, "stopping_criterion": best.stopping_criterion}
