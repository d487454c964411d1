"""The exact solver of the selection problem (see selection.py for the problem).

Structure used by the exact solver (docs/papers/lyapunov.md, "Selection probabilities",
worked out here):

Write g_n(w) = a / q(w) + b_n q(w). Its derivative is g_n'(w) = m (1-w)^(m-1) (b_n - a/q^2); it
tends to -inf as w -> 0, so every coordinate is interior and KKT reads g_n'(omega_n) = mu for all n.
For m > 1 and b_n > a, g_n' rises to a maximum M_n at w1_n and falls back to 0 at w = 1: g_n is
convex on (0, w1_n] (the "convex branch") and concave above. q1_n = q(w1_n) is the real root of
the cubic k b q^3 + (2 - k) a q - 2 a = 0, k = (m-1)/m. For b_n <= a (or m = 1) g_n is convex.

1. At most one coordinate is concave at a local minimum: in q-coordinates the Hessian of the
   Lagrangian at a KKT point is diag(2a/q_n^3 - mu w''(q_n)), w(q) = 1 - (1-q)^(1/m), whose sign
   equals that of g_n''(omega_n); the entry decreases in q_n with a threshold common to all n, so the
   negative entries are those with the largest q_n, and two of them give a descent direction.
2. At the global minimum q is ordered opposite to b (swapping two coordinates changes F by
   (b_j - b_k)(q_k - q_j)), so the concave coordinate, if any, is a device j with the smallest b.
3. Parametrise by the mass t = 1 - omega_j of everyone else. mu(t) = g_j'(1 - t) is explicit, every
   other device sits on its convex branch at psi_n(mu) (the inverse of g_n' there, found by a
   vectorised safeguarded Newton iteration), and the KKT points are the roots of
   D(t) = sum_{n != j} psi_n(mu(t)) - t on (0, 1). D has the sign of dF/d omega_j along the curve of
   partial minimisers, so the local minima are exactly the roots where D changes from + to - as t
   grows. D(0+) > 0 and D(1-) < 0.
4. On [1 - w1_j, 1) (j on its convex branch) D is decreasing: at most one root, the "all convex"
   candidate, which exists iff D(1 - w1_j) >= 0. If sum_n w(sqrt(a/b_n)) >= 1 the problem is
   convex in disguise (mu <= 0 at the optimum) and that root is the answer. Otherwise mu > 0 and
   D(t) >= R(0) - t on the concave branch (R(mu) = sum psi_n grows with mu), so every concave root
   lies in t in (R(0), 1 - w1_j). That interval is scanned on a grid t_0 < ... < t_G of step h.
   mu(t) grows with t on the concave branch and R grows with mu, so on a cell [t_k, t_k+1]
   D(t_k) - h <= D(t) <= D(t_k+1) + h: a cell with D(t_k) > h or D(t_k+1) < -h provably holds no
   root ("excluded by the bound"). Any other cell of one sign is tested by its cubic Hermite
   interpolant (values and derivatives of D) for a root pair hiding inside, and every + to - root
   is refined by safeguarded Newton. Several can exist (e.g. tests/test_selection.py: two local
   minima on the concave branch, 3e-5 apart), so all of them are compared with the all-convex
   one. The certificate counts the cells excluded each way; the Hermite test has a finite
   resolution, and the tests check the result against a multi-start reference.
5. Before the scan, a bracket that needs no inner solve (``_Exact._bracket``): the KKT points on
   the concave branch are the fixed points of the increasing map T(t) = R(mu(t)), so if they all
   lie in [t_lo, t_hi] they lie in [T(t_lo), T(t_hi)]. T is bounded on both sides in closed form
   (bounds on each psi_n from bounds on (1 - q_n)^-k), and iterating from [R(0), t_max] shrinks
   the bracket onto every KKT point at once. When it shrinks to 1e-9 relative, the point inside
   is the optimum (no all-convex candidate: T(t_max) < t_max) and the route is "monotone bracket
   of the concave branch". When its lower end climbs past t_max, D > 0 on the whole branch: the
   all-convex root is the only KKT point ("monotone bracket: no concave root"). When it stops
   shrinking (two roots far apart, or both kinds of candidate) the scan above runs. In the
   paper's setting the bracket settles a round in 3 to 4 passes of about 15 numpy calls on
   arrays of 2N.

Inner variables keep full relative precision: theta = logit(omega_n) for mu < 0, and
x = log(q_n / q0_n) for mu > 0 (b q^2 - a = a expm1(2x) next to the zero q0 of g'). Outer
iterations run in tau = logit(omega_j), exact for both omega_j and 1 - omega_j.

One module of about 750 lines, above the 500 the project aims for: its steps (bracket, scan, inner
Newton solves, candidates) read and update the state of one problem (``_Exact``) and are read
against the derivation above, which split across files they would not be.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import expit, log_expit

from .base import inclusion_probability

_QUAD_GAP = 0.5  # use the quadratic start when log(M_n / mu) is below this


# ----------------------------------------------------------------------------------------------
# scalar helpers (the concave candidate j is a single device: plain floats are much faster)


def _log_expit(x: float) -> float:
    """log(1 / (1 + e^-x)) without overflow."""
    if x >= 0:
        return -math.log1p(math.exp(-x))
    return x - math.log1p(math.exp(x))


def _expit(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _logit_of_q(q, m):
    """logit(omega) for omega = 1 - (1 - q)^(1/m), accurate for tiny q and for q near 1."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lq = np.log1p(-q) / m  # log(1 - omega)
        return np.log(-np.expm1(lq)) - lq


def _logit_of_q_scalar(q: float, m: int) -> float:
    """_logit_of_q for one q in (0, 1)."""
    lq = math.log1p(-q) / m
    return math.log(-math.expm1(lq)) - lq


def _branch_q1(a: float, b, m: int):
    """q at which g' peaks (end of the convex branch): root of k b q^3 + (2-k) a q - 2a = 0.

    Only meaningful for b > a (then q1 < 1). Cardano gives the unique real root of the depressed
    cubic (both coefficients positive), written as u - p/(3u), then polished by a Newton step.
    """
    k = (m - 1) / m
    r = (2.0 * a / k) / b
    h = 1.0 - 0.5 * k  # p = h r
    # sqrt(r^2/4 + p^3/27) = r sqrt(1/4 + (h^3/27) r)
    u = np.cbrt(r * (0.5 + np.sqrt(0.25 + (h ** 3 / 27.0) * r)))
    # For b > a, p^3/27 <= r^2/16 (m >= 2): u - p/(3u) >= u/2, no cancellation.
    q = u - (h / 3.0) * r / u
    p = h * r
    q2 = q * q
    return q - ((q2 + p) * q - r) / (3.0 * q2 + p)


# ----------------------------------------------------------------------------------------------
# the exact solver


class _Exact:
    """KKT solver state for one instance with m > 1 and N > 1."""

    def __init__(self, a: float, b: np.ndarray, m: int, grid: int, tol: float, maxiter: int,
                 bracket: bool = True):
        self.a = a
        self.m = m
        self.k = (m - 1) / m
        self.log_m = math.log(m)
        self.grid = grid
        self.tol = tol
        self.maxiter = maxiter
        self.use_bracket = bracket
        self.b = b
        self.n = b.size
        self.j = int(np.argmin(b))
        self.bj = float(b[self.j])
        self.bo = np.concatenate((b[: self.j], b[self.j + 1:]))  # every other device
        self.evaluations = 0
        self.inner_iterations = 0
        self.q0o = np.minimum(np.sqrt(a / self.bo), 1.0)
        # omega0: where g' = 0 (q = sqrt(a/b)); 1 where b <= a (g' < 0 on all of (0, 1)).
        self.w0o = -np.expm1(np.log1p(-self.q0o) / m)

    def _prepare_positive(self):
        """The convex-branch ends q1_n of every device (mu > 0 means all b > a): device j's ends
        its concave branch, everyone else's bounds psi_n from above."""
        q1 = _branch_q1(self.a, self.b, self.m)
        j = self.j
        self.q1j = float(q1[j])
        self.q1o = np.concatenate((q1[:j], q1[j + 1:]))

    def _prepare_newton(self):
        """What the Newton iterations of psi_n need when mu > 0 (only the scan uses them).

        For mu > 0 the inner variable is x = log(q / q0) in (0, x1]: b q^2 - a = a expm1(2x) keeps
        full precision next to q0, where g' vanishes and psi_n(mu) sits for small mu. The start
        x = -log(1 - mu r_n) / 2, r_n = (1 - q0)^-k / (m b), solves b - a/q^2 = (mu/m)(1 - q0)^-k:
        one fixed-point step from q0, so it lies below the root ((1 - q)^-k grows with q).
        """
        a, m, b, q1 = self.a, self.m, self.bo, self.q1o
        self.log_mb = np.log(m * b)
        self.r_coef = np.exp(-self.k * np.log1p(-self.q0o)) / (m * b)
        # Convex-branch ends x1 = log(q1 / q0), the peaks log M_n = log g_n'(omega1_n) and the
        # curvature there: Newton starts next to a peak, where the root is nearly double.
        self.x1o = np.log(q1) - np.log(self.q0o)
        omq = 1.0 - q1
        self.log_Mo = np.log(m * omq ** ((m - 1) / m) * (b - a / (q1 * q1)))  # M_n = g_n'(omega1_n)
        # -d2G/dx2 at the peak x1 (G = log g' - log mu): seeds Newton near a double root.
        e2 = np.expm1(2.0 * self.x1o)
        self.kappa = self.k * q1 / (omq * omq) + 4.0 * (e2 + 1.0) / (e2 * e2)

    def _bracket(self, t_lo: float, t_hi: float):
        """Every KKT point on j's concave branch, bracketed by monotone iteration (no inner solve).

        The KKT points are the fixed points of T(t) = R(mu(t)) on (R(0), t_max), and T grows with
        t. If they all lie in [t_lo, t_hi], they lie in [T(t_lo), T(t_hi)] too. T is bounded from
        both sides in closed form: on a convex branch (1 - q)^k (b - a/q^2) = c = mu/m, and
        (1 - q)^-k grows with q, so bounds Ql <= q <= Qu give
            sqrt(a / (b - c (1 - Ql)^-k)) <= q <= sqrt(a / (b - c (1 - Qu)^-k))
        (the right one where its denominator is positive). psi_n grows with mu, so bounds at the
        previous t_lo and t_hi stay valid at the new ones: starting from q0 <= q <= q1, one pass
        tightens the device bounds and the bracket together. Both shrink at the rate of T' and of
        the device maps, small in the usual regime (psi_n far below its peak). Returns
        (logit(omega_j), the other devices' omega) once every coordinate is pinned to ~1e-9
        relative; _NO_CONCAVE_ROOT once the lower end climbs past t_max (T(t) > t on the whole
        branch); else None (no contraction: the caller scans).
        """
        a, m, k, b = self.a, self.m, self.k, self.bo
        if not 0.0 < t_lo < t_hi < 1.0:  # omega1_j below rounding: t needs the scan's tau
            return None
        # One flat array (short arrays: numpy's cost is per call): lower bounds at mu(t_lo) in
        # the first half, upper bounds at mu(t_hi) in the second; u = log(1 - q).
        n = b.size
        Q = np.concatenate((self.q0o, self.q1o))
        bb = np.concatenate((b, b))
        c = np.empty(2 * n)
        lower, upper = Q[:n], Q[n:]
        u = np.log1p(-Q)
        ones = np.ones(n)
        c_of_t = self._c_of_t
        width = t_hi - t_lo
        t_max = t_hi
        for it in range(1, _BRACKET_MAXITER + 1):
            c[:n] = c_of_t(t_lo)
            c[n:] = c_of_t(t_hi)
            new = np.sqrt(a / (bb - c * np.exp(u * -k)))
            # Where the denominator is <= 0 there is no upper bound this pass: NaN or inf, which
            # fmin drops in favour of the old bound. The lower half's is positive (at least a/q^2
            # at the true q).
            np.fmin(new[n:], upper, out=new[n:])
            Q, lower, upper = new, new[:n], new[n:]
            u = np.log1p(-Q)
            e = np.expm1(u * (1.0 / m))  # -omega
            r_lo, r_hi = np.dot(e.reshape(2, n), ones).tolist()
            if -r_lo >= t_max:
                self.bracket = {"bracket_iterations": it}
                return _NO_CONCAVE_ROOT  # T(t) > t on all of [R(0), t_max]
            new_lo, new_hi = max(t_lo, -r_lo), min(t_hi, -r_hi)
            # While T(t_max) >= t_max is not ruled out the all-convex candidate may compete: the
            # bracket goes on only to see the lower end climb past t_max or the upper one drop.
            open_end = not new_hi < t_max
            new_width = new_hi - new_lo
            if not open_end and new_width <= _BRACKET_TOL * min(1.0 - new_hi, new_lo):
                if ((upper - lower) <= _BRACKET_TOL * lower).all():
                    t_lo, t_hi = new_lo, new_hi
                    break
            elif it > 1 and new_width > _BRACKET_RATE * width:
                return None  # the first pass only brings t_hi down to T(t_max)
            t_lo, t_hi, width = new_lo, new_hi, max(new_width, 0.0)
        else:
            return None
        self.bracket = {"bracket_iterations": it, "bracket_width": max(t_hi - t_lo, 0.0)}
        # One more pass of the device map at the midpoint's mu makes every g_n' agree with it
        # (the map contracts there); device j takes what is left of the mass. Any feasible point
        # this close to the KKT point has F within the square of the bracket's width.
        t = 0.5 * (t_lo + t_hi)
        q = np.sqrt(a / (b - c_of_t(t) * np.exp(-k * np.log1p(-0.5 * (lower + upper)))))
        w = -np.expm1(np.log1p(-q) * (1.0 / m))
        t = float(np.dot(w, ones))
        if not 0.0 < t < 1.0:  # False for NaN: rounding beat the bounds (b/a beyond ~1e30)
            return None
        return math.log1p(-t) - math.log(t), w

    def _c_of_t(self, t: float) -> float:
        """c = mu / m = g_j'(1 - t) / m for device j at t = 1 - omega_j."""
        lt = math.log(t)
        q = -math.expm1(self.m * lt)
        return math.exp((self.m - 1) * lt) * (self.bj - self.a / (q * q))

    # -- device j (scalar) -------------------------------------------------------------------

    def _j_terms(self, tau: float):
        """s = omega_j, t = 1 - s, mu = g_j'(s), g_j''(s), q_j at tau = logit(s)."""
        a, m, bj = self.a, self.m, self.bj
        lt = _log_expit(-tau)  # log t = log(1 - s)
        s = _expit(tau)
        t = _expit(-tau)
        one_minus_q = math.exp(m * lt)
        q = -math.expm1(m * lt)
        core = bj - a / (q * q)
        mu = m * math.exp((m - 1) * lt) * core
        g2 = m * math.exp((m - 2) * lt) * (-(m - 1) * core + 2.0 * a * m * one_minus_q / q ** 3)
        return s, t, q, mu, g2

    # -- other devices (vectorised) -----------------------------------------------------------

    def _psi(self, mu, state=None, tol=None):
        """psi_n(mu), the point of every other device's convex branch where g_n' = mu.

        mu: scalar or column (G, 1), all of one sign, nonzero. state: optional warm start
        (sign, z) from an earlier call. Returns (state, omega, domega/dmu, dz/dmu) broadcast
        against the devices, where state = (sign of mu, z) holds the Newton variable z (theta for
        mu < 0, x for mu > 0). Newton iterations on an increasing function G (log g' - log mu up to
        sign): plain steps from a warm start, else (or when those fail) steps safeguarded by a
        per-device bracket with bisection.
        """
        mu = np.asarray(mu, dtype=float)
        tol = self.tol if tol is None else tol
        sign = 1 if (mu > 0).all() else -1
        z0 = state[1] if state is not None and state[0] == sign else None
        if sign > 0:
            z, w, dw, dz = self._psi_pos(mu, z0, tol)
        else:
            z, w, dw, dz = self._psi_neg(mu, z0, tol)
        return (sign, z), w, dw, dz

    @staticmethod
    def _newton(evaluate, z, floor, tol, maxiter):
        """Plain vectorised Newton steps on an increasing function from z, kept >= floor (if not
        None); None unless the steps converge to a point with a positive slope."""
        # Stop on steps below tol relative to the largest |z|: rounding noise in G is ~ eps |z|.
        stop = tol * (1.0 + float(np.abs(z).max()))
        for it in range(maxiter):
            G, dG = evaluate(z)
            step = G / dG
            z = z - step
            if floor is not None:
                z = np.fmax(z, floor)  # fmax: a NaN step falls back to the floor
            if np.abs(step).max() <= stop:  # False for NaN
                break
        else:
            return None
        if not (dG > 0).all():
            return None
        return z, dG, it + 1

    @staticmethod
    def _safeguarded(evaluate, z, lo, hi, tol, maxiter):
        """Vectorised Newton on an increasing function; bisection when a step leaves [lo, hi]
        (hi may be +inf: then the step doubles away from lo)."""
        stop = tol * (1.0 + float(np.abs(z).max()))
        lo, hi = lo.copy(), hi.copy()
        for it in range(maxiter):
            G, dG = evaluate(z)
            new = z - G / dG
            neg = G < 0
            np.copyto(lo, z, where=neg)
            np.copyto(hi, z, where=~neg)
            bad = ~((new >= lo) & (new <= hi))  # also catches NaN
            if bad.any():
                mid = np.where(np.isfinite(hi), 0.5 * (lo + hi), lo + 2.0 * (1.0 + np.abs(lo)))
                np.copyto(new, mid, where=bad)
            done = np.abs(new - z).max() <= stop
            z = new
            if done:
                break
        return z, dG, it + 1

    def _psi_neg(self, mu, theta0, tol):
        """mu < 0 (q below q0): Newton in theta = logit(omega) on
        G = log|mu| - log m - (m-1) log(1-omega) - log(a - b q^2) + 2 log q."""
        a, m, k, b = self.a, self.m, self.k, self.bo
        amu = np.abs(mu)
        c0 = np.log(amu) - self.log_m
        two_am = 2.0 * a * m

        def evaluate(th):
            L = log_expit(-th)
            omq = np.exp(m * L)
            q = 1.0 - omq
            tq = a - b * q * q
            G = c0 - (m - 1) * L - np.log(tq) + 2.0 * np.log(q)
            w = -np.expm1(L)
            return G, w * (two_am * omq / (q * tq) + (m - 1))

        out = None
        if theta0 is not None:
            out = self._newton(evaluate, theta0 + 0.0 * mu, None, tol, 4)
        c = amu / m
        if out is None:
            # A fixed-point step a/q^2 = b + |c| (1 - q)^-k from the upper bound sqrt(a/(b + |c|))
            # lands below the root and, for small q, next to it: plain Newton from there.
            q_hi = np.sqrt(a / (b + c))
            start = _logit_of_q(np.sqrt(a / (b + c * np.exp(-k * np.log1p(-q_hi)))), m)
            out = self._newton(evaluate, start, None, tol, 8)
        if out is None:
            # a/q^2 = b + |c| (1-q)^-k  with (1-q)^-k in [1, 2^k] while q <= 1/2.
            q_raw = np.sqrt(a / (b + c * 2.0 ** k))
            q_lo = np.minimum(q_raw, 0.5)
            q_hi = np.sqrt(a / (b + c))
            lo = _logit_of_q(q_lo, m)
            # y = 1 - omega satisfies y^(m-1) = |c| / (a/q^2 - b) >= |c| / (a/q_lo^2 - b), where
            # a/q_lo^2 - b is |c| 2^k (unclipped; written so to avoid cancellation) or 4a - b.
            excess = np.where(q_raw <= 0.5, c * 2.0 ** k, 4.0 * a - b)
            log_y = (np.log(c) - np.log(excess)) / (m - 1)
            hi = np.where(q_hi < 1.0, _logit_of_q(np.minimum(q_hi, 1.0), m), np.inf)
            hi = np.minimum(hi, np.log(-np.expm1(log_y)) - log_y)
            # One fixed-point step a/q^2 = b + |c| (1 - q_b)^-k from q_b >= root lands in
            # [q_lo, root].
            q_b = np.minimum(np.minimum(q_hi, 1.0), -np.expm1(m * log_y))
            start = _logit_of_q(np.sqrt(a / (b + c * np.exp(-k * np.log1p(-q_b)))), m)
            if theta0 is not None:
                th0 = theta0 + 0.0 * mu
                start = np.where((th0 > lo) & (th0 < hi), th0, start)
            start = np.where((start > lo) & (start < hi), start,
                             np.where(np.isfinite(hi), 0.5 * (lo + hi), lo + 1.0))
            out = self._safeguarded(evaluate, start, lo, hi, tol, self.maxiter)
        th, dG, its = out
        self.inner_iterations += its
        L = log_expit(-th)
        w = -np.expm1(L)
        dth = 1.0 / (amu * dG)  # dtheta/dmu = 1 / (g'' omega (1 - omega)) = 1 / (|mu| dG/dtheta)
        return th, w, w * np.exp(L) * dth, dth

    def _psi_pos(self, mu, x0, tol):
        """0 < mu <= M_n (q between q0 and q1): Newton in x = log(q / q0) on
        G = log(m b / mu) + k log(1 - q) + log(expm1(2x)) - 2x, dG/dx = 2/expm1(2x) - k q/(1-q)."""
        m, k = self.m, self.k
        q0 = self.q0o
        c0 = self.log_mb - np.log(mu)

        def evaluate(x):
            q = q0 * np.exp(x)
            e2 = np.expm1(2.0 * x)
            G = c0 + k * np.log1p(-q) + np.log(e2) - 2.0 * x
            return G, 2.0 / e2 - k * q / (1.0 - q)

        out = None
        if x0 is not None:
            out = self._newton(evaluate, x0 + 0.0 * mu, None, tol, 4)
        if out is None:
            # G is increasing and concave in x (dG/dx falls): Newton from below the root climbs to
            # it monotonically, and a step from above lands below it. The fixed-point start is
            # below; next to a peak, where the root is nearly double and steps from below only
            # halve the distance, start from the quadratic model of G at the peak instead and
            # keep every iterate above the fixed-point start.
            floor = -0.5 * np.log1p(-mu * self.r_coef)
            gap = self.log_Mo - np.log(mu)
            near = gap < _QUAD_GAP
            start = floor
            if near.any():
                quad = self.x1o - np.sqrt(np.maximum(gap, 0.0) * (2.0 / self.kappa))
                start = np.where(near, np.fmax(quad, floor), floor)
            out = self._newton(evaluate, start, floor, tol, 8)
        if out is None:
            # Bracketed on (0, x1] from the same start pulled inside (start <= 0 only when mu/b
            # underflows: the root is then within rounding of q0; NaN only for mu at a peak).
            x1 = self.x1o + 0.0 * mu
            start = np.where(start < x1, np.maximum(start, 1e-300), np.where(gap <= 0, x1, 0.5 * x1))
            out = self._safeguarded(evaluate, start, np.zeros_like(x1), x1.copy(), tol, self.maxiter)
        x, dG, its = out
        self.inner_iterations += its
        q = q0 * np.exp(x)
        lw = np.log1p(-q) / m  # log(1 - omega)
        w = -np.expm1(lw)
        dx = 1.0 / (mu * dG)  # dx/dmu = 1 / (dmu/dx) = 1 / (mu dG/dx)
        # domega/dx = q (1 - omega) / (m (1 - q))
        return x, w, q * np.exp(lw) / (m * (1.0 - q)) * dx, dx

    def _omega0(self):
        """psi_n(0): the zero of g_n' (q = sqrt(a/b))."""
        return self.w0o

    # -- D along the curve of partial minimisers -----------------------------------------------

    def _phi(self, tau: float, state=None, mu_prev=None, dz=None):
        """Phi(tau) = sum_{n != j} psi_n(mu) - (1 - omega_j), omega_j = expit(tau), its
        tau-derivative, and the inner solution (state, mu, dz/dmu, omega, domega/dmu)."""
        self.evaluations += 1
        s, t, q, mu, g2 = self._j_terms(tau)
        if state is not None and mu_prev is not None and dz is not None:
            if abs(mu - mu_prev) <= 0.3 * abs(mu_prev):
                state = (state[0], state[1] + (mu - mu_prev) * dz)  # first-order predictor
            else:
                state = None  # too far away: the bracketed cold start is cheaper
        if mu == 0.0:
            w = self._omega0()
            dw = self._inv_g2_others(w)
            state, dz = None, None
        else:
            state, w, dw, dz = self._psi(mu, state)
        phi = float(w.sum()) - t
        dphi = s * t * (1.0 + float(dw.sum()) * g2)
        return phi, dphi, state, mu, dz, w, dw

    def _inv_g2_others(self, w):
        """1 / g_n''(w_n) for the other devices, as q^3 / (m y^(m-2) [2am(1-q) - (m-1) q (b q^2 - a)])
        so that tiny q (huge b) underflows harmlessly to 0 instead of dividing by 0."""
        a, m = self.a, self.m
        L = np.log1p(-w)
        q = -np.expm1(m * L)
        den = m * np.exp((m - 2) * L) * (2 * a * m * np.exp(m * L) - (m - 1) * q * (self.bo * q * q - a))
        return q ** 3 / den

    def _root(self, lo: float, hi: float, start: float, state=None, mu0=None, dz0=None):
        """Safeguarded Newton for Phi(tau) = 0 with Phi(lo) < 0 < Phi(hi); returns tau and the
        other devices' omega there."""
        tau = start
        if not lo < tau < hi:
            tau = 0.5 * (lo + hi)
        mu_prev, dz = mu0, dz0
        for _ in range(100):
            phi, dphi, state, mu_prev, dz, w, dw = self._phi(tau, state, mu_prev, dz)
            if phi < 0:
                lo = tau
            else:
                hi = tau
            newton = dphi > 0
            new = tau - phi / dphi if newton else 0.5 * (lo + hi)
            if not lo <= new <= hi:
                new, newton = 0.5 * (lo + hi), False
            scale = 1.0 + abs(tau)
            if abs(new - tau) <= 1e-14 * scale or hi - lo <= 1e-14 * scale:
                break
            if newton and abs(new - tau) <= 1e-7 * scale:
                # Quadratic convergence: the error after this step is ~ step^2, below 1e-14.
                # Take it without another evaluation; move the inner solution along by the
                # first-order predictor (its error is of the same order).
                mu_new = self._j_terms(new)[3]
                return new, w + (mu_new - mu_prev) * dw
            tau = new
        return tau, w

    def _candidate(self, tau: float, w_others):
        """The full omega (normalised) from omega_j = expit(tau) and everyone else's."""
        j = self.j
        w = np.empty(self.n)
        w[:j] = w_others[:j]
        w[j] = _expit(tau)
        w[j + 1:] = w_others[j:]
        return w / w.sum()

    def solve(self):
        a, m = self.a, self.m
        n = self.n
        w0 = self._omega0()
        r0 = float(w0.sum())  # R(0): everyone else at g' = 0
        convex_case = True
        if self.bj > a:
            q0j = math.sqrt(a / self.bj)
            w0j = -math.expm1(math.log1p(-q0j) / m)
            convex_case = w0j + r0 >= 1.0
        candidates = []
        info = {"convex_case": convex_case}
        if convex_case:
            # mu <= 0 at the optimum and omega_j in [1/N, omega0_j]: one root, no concave device.
            tau_lo = math.log(1.0 / (n - 1.0))  # omega_j = 1/N: Phi <= 0 there
            if self.bj > a:
                hi = float(_logit_of_q(math.sqrt(a / self.bj), m))
            else:
                # b_j <= a: mu < 0 for every omega_j. For t = 1 - omega_j <= 1/2, |c| <= 4 a t^(m-1)
                # <= 4a, so psi_n(mu) >= omega(min(sqrt(a / (b_n + 8a)), 1/2)) and Phi > 0 once t
                # is below half their sum.
                r_low = float(np.sum(expit(_logit_of_q(
                    np.minimum(np.sqrt(a / (self.bo + 8.0 * a)), 0.5), m))))
                t_h = 0.5 * min(0.5, r_low)
                hi = math.log1p(-t_h) - math.log(t_h)
            tau, w_o = self._root(tau_lo, hi, self._surrogate_start())
            candidates.append(("all-convex", tau, w_o))
            info["route"] = "convex: mu <= 0"
        else:
            # mu > 0 and b_j > a: j has a concave branch t = 1 - omega_j in (0, t_max). D(t) >=
            # R(0) - t there (R grows with mu), so its roots lie in (R(0), t_max): bracket them
            # all, or scan them all where the bracket does not contract.
            self._prepare_positive()
            tau1 = _logit_of_q_scalar(self.q1j, m)  # logit(omega1_j)
            t_max = _expit(-tau1)
            found = self._bracket(r0, t_max) if self.use_bracket else None
            if found is _NO_CONCAVE_ROOT:
                # D > 0 on the whole concave branch: the one KKT point has j on its convex branch.
                self._prepare_newton()
                candidates.append(("all-convex", *self._all_convex_root(r0, q0j, tau1)))
                info["route"] = "monotone bracket: no concave root"
                info.update(self.bracket)
            elif found is not None:
                candidates.append(("one-concave", *found))
                info["route"] = "monotone bracket of the concave branch"
                info.update(self.bracket)
            else:
                self._scan_concave_branch(r0, q0j, tau1, t_max, candidates, info)
        best = None
        for kind, tau, w_o in candidates:
            w = self._candidate(tau, w_o)
            f = _objective(w, a, self.b, m) if len(candidates) > 1 else None
            if best is None or f < best[2]:
                best = (kind, w, f)
        info.update(candidates=len(candidates), winner=best[0], evaluations=self.evaluations,
                    inner_iterations=self.inner_iterations)
        return best[1], info

    def _all_convex_root(self, r0, q0j, tau1, phi1=None, warm=(None, None, None)):
        """(tau, other devices' omega) of the KKT point with every device convex and mu > 0.

        Phi increases on [tau0, tau1] = [logit(omega0_j), logit(omega1_j)], from Phi(tau0) =
        R(0) + omega0_j - 1 < 0 to Phi(tau1) = D(t_max) >= 0: a secant start where phi1 = D(t_max)
        is known, the midpoint otherwise; warm: the inner solve's state at tau1 (from the scan).
        """
        tau0 = _logit_of_q_scalar(q0j, self.m)
        phi0 = r0 + _expit(tau0) - 1.0
        if phi1 is not None and phi1 > phi0:
            start = tau0 + (tau1 - tau0) * (-phi0) / (phi1 - phi0)
        else:
            start = 0.5 * (tau0 + tau1)
        return self._root(tau0, tau1, start, *warm)

    def _scan_concave_branch(self, r0, q0j, tau1, t_max, candidates, info):
        """The scan route: every + to - root of D on (R(0), t_max), and the all-convex root
        where D(t_max) >= 0; appends the candidates and the scan's counts to info."""
        self._prepare_newton()
        tau0 = _logit_of_q_scalar(q0j, self.m)  # logit(omega0_j) < tau1
        brackets, (phi1, state1, mu1, dz1) = self._scan(r0, t_max, tau1)
        if phi1 >= 0:
            candidates.append(("all-convex", *self._all_convex_root(r0, q0j, tau1, phi1,
                                                                    (state1, mu1, dz1))))
        if phi1 < 0 and not brackets:  # cannot happen (D(R(0)) >= 0 > D(t_max)); stay safe
            t_hi = r0 * (1.0 + 1e-12)
            brackets = [(tau1, math.log1p(-t_hi) - math.log(t_hi), 0.5 * (tau1 + tau0), None, None, None)]
        for lo, hi, st, state0, mu0, dz0 in brackets:
            tau, w_o = self._root(lo, hi, st, state0, mu0, dz0)
            candidates.append(("one-concave", tau, w_o))
        info["route"] = "scan of the concave branch"
        info["concave_roots"] = len(brackets)
        info.update(self.cells)

    def _surrogate_start(self) -> float:
        """logit(omega_j) of the small-q approximation omega_n = sqrt(a'/(b_n - c)), a' = a/m^2."""
        a2 = self.a / self.m ** 2
        wj = math.sqrt(a2 / _m1_shift(a2, self.b))  # b_j is the minimum
        wj = min(max(wj, 1e-300), 1.0 - 1e-16)
        return math.log(wj) - math.log1p(-wj)

    def _scan(self, t_a: float, t_b: float, tau_b: float):
        """Brackets (in tau) of the + to - roots of D on [t_a, t_b], and (D, state, mu, dz/dmu)
        at t_b. D and dD/dt on a uniform grid of ``grid + 1`` points. A cell of one sign holds no
        root if the monotone bound excludes it (module docstring, step 4); otherwise a root pair
        hiding inside is caught by the cell's cubic Hermite interpolant and confirmed by one
        evaluation at the interpolant's extremum. Also counts the cells excluded each way."""
        G = self.grid
        m, a = self.m, self.a
        h = (t_b - t_a) / G
        ts = t_a + h * np.arange(G + 1)
        lt = np.log(ts)  # log t
        taus = np.log1p(-ts) - lt
        taus[-1] = tau_b  # t_b may round to 1 (omega1_j below eps): keep it exact in tau
        lt[-1] = _log_expit(-tau_b)
        # Device j on the grid (vectorised version of _j_terms).
        mlt = m * lt
        one_minus_q = np.exp(mlt)
        q = -np.expm1(mlt)
        core = self.bj - a / (q * q)
        y = m * np.exp((m - 2) * lt)  # m t^(m-2)
        # mu(t) > 0 on the branch; it can only underflow (t^(m-1) below 1e-308): keep it positive.
        mus = np.maximum(y * ts * core, np.finfo(float).tiny)
        g2s = y * (2.0 * a * m * one_minus_q / (q * q * q) - (m - 1) * core)
        (sign, z), w, dw, dz = self._psi(mus[:, None], tol=1e-7)
        self.evaluations += G + 1
        D = w.sum(axis=1) - ts
        # D(t_a) >= R(0) - t_a = 0 in exact arithmetic; keep rounding from flipping its sign.
        D[0] = max(D[0], np.finfo(float).tiny)
        dD = -dw.sum(axis=1) * g2s - 1.0  # dD/dt = R'(mu) mu'(t) - 1, mu'(t) = -g_j''(1 - t)
        if not np.isfinite(dD).all():
            # A device tied with j sits at its peak M_n at the branch end, where domega/dmu = inf
            # and g_j'' = 0 (inf x 0 = NaN): use the one-sided secant slope there instead.
            secant = np.diff(D) / h
            dD = np.where(np.isfinite(dD), dD, np.append(secant, secant[-1]))
            dD = np.where(np.isfinite(dD), dD, 0.0)
        # Cubic Hermite interpolants of every cell at once, sampled at 31 interior points.
        Da, Db = D[:-1], D[1:]
        P = np.array((Da, Db, h * dD[:-1], h * dD[1:])).T @ _HERMITE
        pa, pb = Da > 0, Db > 0
        # The bound D(t_k) - h <= D <= D(t_k+1) + h, with a margin for the inner solves' tolerance.
        bounded = (Da > h + _BOUND_MARGIN) | (Db < -h - _BOUND_MARGIN)
        same = pa == pb
        suspect = same & ~bounded & np.where(pa, P.min(axis=1) < 0.05 * np.minimum(Da, Db),
                                             P.max(axis=1) > 0.05 * np.maximum(Da, Db))
        self.cells = {"cells_excluded_by_bound": int(bounded.sum()),
                      "cells_excluded_by_interpolation": int((same & ~bounded).sum() - suspect.sum())}
        # + to - cells hold a root; - to + cells a local maximum of F along the curve (skipped).
        flagged = np.flatnonzero((pa & ~pb) | suspect)
        brackets = []
        for i in flagged:
            ta, tb = ts[i], ts[i + 1]
            if pa[i] and not pb[i]:
                t_lo, t_hi = ta, tb
                t_guess = ta + h * Da[i] / (Da[i] - Db[i])
            elif pa[i]:
                tm = ta + h * _HX[int(np.argmin(P[i]))]
                if self._phi(math.log1p(-tm) - math.log(tm))[0] > 0:
                    continue
                t_lo, t_hi, t_guess = ta, tm, 0.5 * (ta + tm)
            else:
                tm = ta + h * _HX[int(np.argmax(P[i]))]
                if self._phi(math.log1p(-tm) - math.log(tm))[0] <= 0:
                    continue
                t_lo, t_hi, t_guess = tm, tb, 0.5 * (tm + tb)
            tau_neg = float(taus[i + 1]) if t_hi == tb else math.log1p(-t_hi) - math.log(t_hi)
            tau_pos = float(taus[i]) if t_lo == ta else math.log1p(-t_lo) - math.log(t_lo)
            start = math.log1p(-t_guess) - math.log(t_guess) if t_guess < 1.0 else 0.5 * (tau_neg + tau_pos)
            k = i if t_guess - t_lo < t_hi - t_guess else i + 1  # warm start: nearer grid point
            brackets.append((tau_neg, tau_pos, start, (sign, z[k]), float(mus[k]), dz[k]))
        return brackets, (float(D[-1]), (sign, z[-1]), float(mus[-1]), dz[-1])


# Cubic Hermite basis on 31 interior points of a cell (constants, used by _Exact._scan).
_HX = np.linspace(0.0, 1.0, 33)[1:-1]
_H00 = 2 * _HX ** 3 - 3 * _HX ** 2 + 1
_H10 = _HX ** 3 - 2 * _HX ** 2 + _HX
_H01 = -2 * _HX ** 3 + 3 * _HX ** 2
_H11 = _HX ** 3 - _HX ** 2
_BRACKET_TOL = 1e-9  # relative width at which the bracket pins omega
_BRACKET_RATE = 0.5  # give the bracket up when a pass shrinks it by less than this
_BRACKET_MAXITER = 40
_NO_CONCAVE_ROOT = "no concave root"
_BOUND_MARGIN = 1e-6  # D is a sum of probabilities, accurate to ~1e-8 on the scan's grid
_HERMITE = np.stack((_H00, _H01, _H10, _H11))  # rows: D(a), D(b), h D'(a), h D'(b)


def _m1_shift(a: float, b: np.ndarray) -> float:
    """tau = min(b) - mu where mu solves sum_n sqrt(a / (b_n - mu)) = 1 (m = 1 KKT condition).

    Returned as the shift tau > 0 rather than mu: b_n - mu = (b_n - min b) + tau keeps full
    precision when tau is tiny next to b.
    """
    bmin = float(np.min(b))
    d = b - bmin
    n = b.size
    # tau = bmin - mu lies in [a, n^2 a]; Newton on log(sum (d + tau)^-1/2) = log(a^-1/2) in log tau
    # is asymptotically linear at both ends.
    lo, hi = math.log(a), math.log(a) + 2.0 * math.log(n)
    target = -0.5 * math.log(a)
    # Start from Jensen's lower bound: sum (d + tau)^-1/2 >= n (mean(d) + tau)^-1/2, so
    # tau >= n^2 a - mean(d) (tight when the b are close).
    jensen = n * n * a - float(d.mean())
    x = min(max(math.log(jensen), lo), hi) if jensen > a else lo
    for _ in range(100):
        tau = math.exp(x)
        v = 1.0 / np.sqrt(d + tau)
        sv = float(v.sum())
        f = math.log(sv) - target
        if f > 0:
            lo = x
        else:
            hi = x
        df = -0.5 * tau * float(np.dot(v, v * v)) / sv
        new = x - f / df
        if not lo <= new <= hi:
            new = 0.5 * (lo + hi)
        if abs(new - x) <= 1e-15 * (1.0 + abs(x)):
            x = new
            break
        x = new
    return math.exp(x)


def _solve_m1(a: float, b: np.ndarray):
    """m = 1: q = omega, F convex, omega_n = sqrt(a / (b_n - mu))."""
    tau = _m1_shift(a, b)
    w = np.sqrt(a / ((b - np.min(b)) + tau))
    return w / w.sum()


def _objective(omega, a: float, b, m: int) -> float:
    """F(omega) = sum_n a / q_n + b_n q_n (as selection.selection_objective)."""
    q = inclusion_probability(omega, m)
    with np.errstate(divide="ignore"):
        return float(np.sum(a / q + b * q))


def solve_exact(a, b, m, *, grid=10, tol=1e-10, maxiter=80, bracket=True):
    """omega minimising the selection objective by KKT enumeration, and how optimality was established."""
    n = b.size
    if n == 1:
        return np.ones(1), {"kind": "kkt-enumeration", "route": "N = 1: omega = [1]"}
    if m == 1:
        w = _solve_m1(a, b)
        return w, {"kind": "kkt-enumeration", "route": "m = 1: convex, closed form with a scalar root"}
    # The caller silences floating-point warnings: overflow to inf and log(0) = -inf are part of
    # the arithmetic at the extremes (and NaN from a failed fast Newton start is caught and redone
    # bracketed).
    solver = _Exact(a, b, m, grid, tol, maxiter, bracket)
    w, info = solver.solve()
    info = {"kind": "kkt-enumeration", "concave_device": solver.j, **info}
    return w, info
