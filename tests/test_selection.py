"""Selection probabilities: min sum a/q + b q on the simplex, q = 1 - (1 - omega)^m
(docs/papers/lyapunov.md, "Selection probabilities").

The exact solver is certified against an independent multi-start reference written here: SLSQP
in log(omega) (scale-free, so devices with tiny omega are resolved) from the uniform point, from
points with most of the mass on each of the cheapest devices, from a shared-mass point and from
random Dirichlet points, followed by a Newton polish of the KKT system (scipy.optimize.root).
"""
import math
import warnings

import numpy as np
import pytest
from scipy.optimize import brentq, minimize, root

from wirelessfl.scheduling import Simplex, inclusion_probability, selection_objective, solve_selection


def objective(w, a, b, m):
    q = -np.expm1(m * np.log1p(-w))
    return float(np.sum(a / q + b * q))


def gradient(w, a, b, m):
    L = np.log1p(-w)
    q = -np.expm1(m * L)
    return m * np.exp((m - 1) * L) * (b - a / q ** 2)


def second_derivative(w, a, b, m):
    L = np.log1p(-w)
    q = -np.expm1(m * L)
    return m * np.exp((m - 2) * L) * (-(m - 1) * (b - a / q ** 2) + 2 * a * m * np.exp(m * L) / q ** 3)


def _slsqp_log(a, b, m, w0):
    n = b.size

    def f(y):
        return objective(np.minimum(np.exp(y), 1 - 1e-16), a, b, m)

    def jac(y):
        w = np.minimum(np.exp(y), 1 - 1e-16)
        return w * gradient(w, a, b, m)

    cons = [{"type": "eq", "fun": lambda y: np.exp(y).sum() - 1.0, "jac": lambda y: np.exp(y)}]
    res = minimize(f, np.log(w0), jac=jac, method="SLSQP", bounds=[(-700.0, 0.0)] * n,
                   constraints=cons, options={"ftol": 1e-13, "maxiter": 80})
    w = np.exp(res.x)
    w /= w.sum()
    return objective(w, a, b, m), w


def reference(a, b, m, rng, n_random=1):
    """Best of multi-start SLSQP, then polished by Newton on g'(omega_n) = mu, sum omega = 1."""
    n = b.size
    if n == 1:
        return objective(np.ones(1), a, b, m), np.ones(1)
    order = np.argsort(b)
    starts = [np.full(n, 1.0 / n)]
    for i in order[: min(n, 4)]:
        x = np.full(n, 0.1 / (n - 1))
        x[i] = 0.9
        starts.append(x)
    if n > 2:
        x = np.full(n, 0.2 / (n - 2))
        x[order[:2]] = 0.4
        starts.append(x)
    starts += [rng.dirichlet(np.full(n, 0.5)) for _ in range(n_random)]
    best = (np.inf, None)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for x0 in starts:
            x0 = np.clip(x0, 1e-9, None)
            f, w = _slsqp_log(a, b, m, x0 / x0.sum())
            if f < best[0]:
                best = (f, w)
        f0, w0 = best
        mu0 = float(np.dot(w0, gradient(w0, a, b, m)))
        sol = root(lambda z: np.r_[gradient(z[:-1], a, b, m) - z[-1], z[:-1].sum() - 1.0],
                   np.r_[w0, mu0], method="hybr", options={"xtol": 1e-15})
        w = sol.x[:-1]
        if np.all(w > 0) and np.all(w < 1) and abs(w.sum() - 1.0) < 1e-12:
            f = objective(w / w.sum(), a, b, m)
            if f < f0:
                best = (f, w / w.sum())
    return best


def random_instance(rng, n_max=12, ms=(1, 2, 5, 10, 20)):
    n = int(rng.integers(2, n_max + 1))
    m = int(rng.choice(ms))
    a = 10 ** rng.uniform(-2, 2)
    kind = rng.random()
    if kind < 0.45:
        b = a * 10 ** rng.uniform(-3, 4, n)  # b from 1e-3 to 1e4 times a
    elif kind < 0.8:
        # Near-ties: where several local minima compete.
        b = a * 10 ** rng.uniform(0, 4) * (1 + 10 ** rng.uniform(-3, -0.5) * rng.random(n))
    else:
        b = a * 10 ** rng.uniform(-3, 4, n)
        b[: int(rng.integers(1, n + 1))] = b[0]  # exact ties
    if rng.random() < 0.1:
        b[rng.integers(n)] = 0.0
    return a, b, m


def check_feasible(res, n, m):
    assert res.success, res.message
    assert res.omega.shape == (n,) and res.q.shape == (n,)
    assert np.all(np.isfinite(res.omega)) and np.all(res.omega > 0)
    assert abs(res.omega.sum() - 1.0) <= 1e-12
    assert np.all((res.q > 0) & (res.q <= 1.0))
    assert np.allclose(res.q, inclusion_probability(res.omega, m), rtol=1e-12)
    assert math.isfinite(res.fun)


@pytest.mark.parametrize("seed", range(5))
def test_exact_is_certified_by_the_multistart_reference(seed):
    """100 instances per seed, 500 in all: exact <= reference within 1e-9 relative."""
    rng = np.random.default_rng(1000 + seed)
    agree = 0
    routes = set()
    for _ in range(100):
        a, b, m = random_instance(rng)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            res = solve_selection(a, b, m, method="exact")
        check_feasible(res, b.size, m)
        assert res.certificate["kind"] == "kkt-enumeration"
        assert res.fun == pytest.approx(selection_objective(res.omega, a, b, m), rel=1e-12)
        f_ref, _ = reference(a, b, m, rng)
        assert res.fun <= f_ref * (1 + 1e-9), (a, b.tolist(), m, res.fun, f_ref)
        agree += res.fun >= f_ref * (1 - 1e-9)
        routes.add(res.certificate["route"].split(":")[0])
    # The reference is strong: it reaches the same value almost always, so the bound above bites.
    assert agree >= 90
    assert {"convex", "scan of the concave branch", "monotone bracket of the concave branch",
            "monotone bracket", "m = 1"} <= routes


def _d_along_the_concave_branch(a, b, m):
    """D(t) = sum_{n != j} psi_n(mu(t)) - t, mu(t) = g_j'(1 - t), by bracketed root finding
    (brentq on g_n'' for the branch ends, on g_n' - mu for psi_n): shares no code with the solver.
    Returns D, R(0) and t_max = 1 - omega1_j."""
    j = int(np.argmin(b))
    others = np.delete(b, j)

    def omega0(bn):  # g_n' = 0 there (q = sqrt(a / b_n))
        return 1 - (1 - math.sqrt(a / bn)) ** (1 / m)

    ends = {}

    def branch_end(bn):  # g_n'' changes sign from + to - at omega1_n
        if bn not in ends:
            ends[bn] = brentq(lambda w: second_derivative(np.array([w]), a, np.array([bn]), m)[0],
                              omega0(bn), 1 - 1e-13, xtol=1e-15)
        return ends[bn]

    def psi(bn, mu):  # g_n' < 0 below omega0_n (half of it is safely below, rounding aside)
        return brentq(lambda w: gradient(np.array([w]), a, np.array([bn]), m)[0] - mu, 0.5 * omega0(bn),
                      branch_end(bn), xtol=1e-15)

    def D(t):
        mu = gradient(np.array([1.0 - t]), a, b[j:j + 1], m)[0]
        return sum(psi(bn, mu) for bn in others) - t

    r0 = sum(omega0(bn) for bn in others)
    return D, r0, 1.0 - branch_end(b[j])


def test_scan_bound_between_grid_points():
    """The bound that lets the scan exclude a cell: mu(t) and R(mu) both grow, so on a cell of
    width h, D(t_k) - h <= D(t) <= D(t_k+1) + h. Checked on a fine grid with an independent D."""
    rng = np.random.default_rng(21)
    for a, b, m in [(1.0, np.array([700.0, 750.0, 900.0, 2000.0, 5000.0]), 10),
                    (1.0, np.array([39.1, 39.1, 30.55, 38.9, 30.7, 37.9]), 3),
                    (0.3, 0.3 * 10 ** rng.uniform(1, 3, 4), 5)]:
        D, r0, t_max = _d_along_the_concave_branch(a, b, m)
        assert r0 < t_max  # the scan route: the concave branch is searched
        ts = np.linspace(r0, t_max, 11)
        h = ts[1] - ts[0]
        grid = [D(t) for t in ts[1:-1]]
        grid = [max(D(ts[0] + 1e-12), 0.0)] + grid + [D(t_max - 1e-12)]
        for k in range(10):
            inner = [D(t) for t in np.linspace(ts[k], ts[k + 1], 9)[1:-1]]
            assert min(inner) >= grid[k] - h - 1e-9
            assert max(inner) <= grid[k + 1] + h + 1e-9
        # In the paper's regime the bound alone clears every cell but the root's.
        if m == 10:
            res = solve_selection(a, b, m, bracket=False)
            assert res.certificate["cells_excluded_by_bound"] == 9
            assert res.certificate["concave_roots"] == 1


def paper_costs(rng, n=100):
    """b_n of the paper's setting (docs/papers/lyapunov.md, "The experiments") at empty queues: airtime
    term at Pmax."""
    sigma = np.linspace(0.1, 10, n)
    gains = np.maximum((sigma * rng.rayleigh(1.0, n)) ** 2, 1e-3)
    return 100 * 100 * 32 * 555178 / 22e6 / np.log2(1 + gains * 10 ** 3.5)


BRACKET = "monotone bracket of the concave branch"


def test_bracket_agrees_with_the_scan():
    """Where the monotone bracket settles an instance, the scan (bracket=False) finds the same
    optimum; in the paper's regime the bracket settles every instance."""
    rng = np.random.default_rng(17)
    settled = 0
    instances = [random_instance(rng, n_max=int(rng.choice([12, 40]))) for _ in range(300)]
    instances += [(1.0, paper_costs(rng) * 10 ** rng.uniform(-0.3, 0.3, 100), 10) for _ in range(10)]
    for i, (a, b, m) in enumerate(instances):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            res = solve_selection(a, b, m)
        paper = i >= 300
        if res.certificate["route"] != BRACKET:
            assert not paper
            continue
        settled += 1
        scan = solve_selection(a, b, m, bracket=False)
        assert scan.certificate["route"] == "scan of the concave branch"
        assert res.fun == pytest.approx(scan.fun, rel=1e-13, abs=0)
        assert res.certificate["bracket_width"] <= 1e-9
        g1 = gradient(res.omega, a, b, m)
        assert np.ptp(g1) <= 1e-7 * (np.max(np.abs(g1)) + a)  # g_n'(omega_n) = mu for every n
    assert settled >= 40


def test_bracket_holds_the_root_found_independently():
    """The bracket's point is the root of D(t) = sum_{n != j} psi_n(mu(t)) - t, computed here
    by brentq (module-independent), and D has no other sign change on the concave branch."""
    rng = np.random.default_rng(8)
    # Roots from next to R(0) (mu tiny, the paper's regime) to well inside the branch (m = 3).
    cases = [(1.0, np.array([700.0, 750.0, 900.0, 2000.0, 5000.0]), 10),
             (1.0, paper_costs(rng, n=12), 10),
             (0.5, 0.5 * 10 ** rng.uniform(2, 3, 6), 5),
             (1.0, 10 ** rng.uniform(1.5, 2.0, 8), 5),
             (1.0, 10 ** rng.uniform(1.2, 2.0, 8), 3)]
    for a, b, m in cases:
        res = solve_selection(a, b, m)
        assert res.certificate["route"] == BRACKET
        D, r0, t_max = _d_along_the_concave_branch(a, b, m)
        ts = np.linspace(r0, t_max - 1e-12, 201)  # D(R(0)) >= 0
        positive = np.array([D(t) for t in ts]) >= 0
        changes = np.flatnonzero(positive[:-1] != positive[1:])
        assert changes.size == 1 and positive[changes[0]]
        k = changes[0]
        t_ref = brentq(D, ts[k], ts[k + 1], xtol=1e-15)
        j = int(np.argmin(b))
        assert 1.0 - res.omega[j] == pytest.approx(t_ref, rel=1e-9)


def test_bracket_proves_an_empty_concave_branch():
    """Where the bracket's lower end climbs past t_max, D > 0 on the whole concave branch (checked
    with the independent D): the one KKT point has every device convex, found by Newton, equal
    to the scan's and the multi-start reference's."""
    cases = [(2.4279940539819065, np.array([4.546996147698247, 4.7211402390784905, 5.124583401154204,
                                            5.191420105970246, 4.722393335864002, 4.8524194415688395,
                                            5.597839794078078, 4.892667816035275]), 10),
             (32.57245665611154, np.array([174.51669804022748, 174.97010952584222, 175.24872535876122,
                                           175.31930317947476, 175.3398271387195, 174.81261466680326,
                                           175.582225442163]), 5)]
    for a, b, m in cases:
        res = solve_selection(a, b, m)
        assert res.certificate["route"] == "monotone bracket: no concave root"
        assert res.certificate["winner"] == "all-convex"
        assert res.certificate["bracket_iterations"] >= 1
        D, r0, t_max = _d_along_the_concave_branch(a, b, m)
        assert min(D(t) for t in np.linspace(r0, t_max - 1e-12, 101)) > 0
        scan = solve_selection(a, b, m, bracket=False)
        assert res.fun == pytest.approx(scan.fun, rel=1e-13, abs=0)
        f_ref, _ = reference(a, b, m, np.random.default_rng(0))
        assert res.fun <= f_ref * (1 + 1e-12)


def test_three_kkt_roots_on_the_concave_branch():
    """An instance whose concave branch has two local minima: the one next to omega1_j (two
    devices sharing the mass) beats the one where the cheapest device dominates."""
    b = np.array([39.10432367, 39.10432367, 39.10432367, 39.10432367, 39.10432367,
                  30.55289232, 38.91774694, 30.71507707, 37.86695419, 38.86855801])
    res = solve_selection(1.0, b, 3)
    f_ref, w_ref = reference(1.0, b, 3, np.random.default_rng(0))
    assert res.fun <= f_ref * (1 + 1e-12)
    # Two roots far apart: the bracket cannot shrink, and the scan finds both.
    assert res.certificate["route"] == "scan of the concave branch"
    assert res.certificate["concave_roots"] == 2
    assert res.omega[5] == pytest.approx(0.1753, abs=1e-3) and res.omega[7] == pytest.approx(0.1449, abs=1e-3)
    # The other local minimum is worse by ~3e-5 relative: a solver stopping at the first root fails.
    w_first = np.array([0.0781] * 5 + [0.2629, 0.0785, 0.1088, 0.0809, 0.0786])
    assert objective(w_first / w_first.sum(), 1.0, b, 3) > res.fun * (1 + 1e-5)


def test_exact_solution_satisfies_the_kkt_structure():
    rng = np.random.default_rng(5)
    for _ in range(100):
        a, b, m = random_instance(rng, ms=(2, 5, 10, 20))
        res = solve_selection(a, b, m)
        g1 = gradient(res.omega, a, b, m)
        scale = np.max(np.abs(g1)) + a
        assert np.ptp(g1) <= 1e-7 * scale  # g_n'(omega_n) = mu for every n
        concave = np.flatnonzero(second_derivative(res.omega, a, b, m) < 0)
        assert concave.size <= 1
        if concave.size:
            assert b[concave[0]] == b.min()


def test_manifold_solver_matches_the_reference():
    rng = np.random.default_rng(11)
    for _ in range(25):
        a, b, m = random_instance(rng, n_max=8)
        res = solve_selection(a, b, m, method="manifold")
        check_feasible(res, b.size, m)
        assert res.certificate["kind"] == "multistart-local"
        f_ref, _ = reference(a, b, m, rng)
        assert res.fun <= f_ref * (1 + 1e-6)


def test_exact_not_worse_than_manifold_at_n100():
    rng = np.random.default_rng(3)
    n = 100
    for _ in range(2):
        b = paper_costs(rng, n)
        for bb in (b, b * 10 ** rng.uniform(-1, 1, n)):
            exact = solve_selection(1.0, bb, 10)
            manifold = solve_selection(1.0, bb, 10, method="manifold")
            assert exact.fun <= manifold.fun * (1 + 1e-12)


@pytest.mark.parametrize("a,b,m", [
    (1.0, [5.0], 3),  # N = 1
    (1.0, [0.0, 0.0, 0.0, 0.0], 3),  # all b = 0
    (1.0, [0.0, 0.0, 1e4, 1e4], 10),
    (1.0, [1e4] * 6, 10),  # ties, concave branch
    (1.0, [1e4] * 6, 1),
    (1.0, [1e-3] * 3, 20),  # m >> N
    (1e-6, [1.0, 2.0, 3.0], 20),
    (1e6, [1.0, 2.0, 3.0], 20),
    (1.0, [1.0, 1.0 + 1e-12, 5.0], 7),
    (1.0, [3.0, 1e4, 1e4, 1e4], 50),
    (1.0, [1.0, 2.0, 5.0, 1e200, 3e200], 10),  # q ~ 1e-100 for the last two
    (1.0, [1e280, 2e280, 3e280], 10),
    (1.0, list(np.linspace(0.0, 1e4, 12)), 20),
])
def test_extremes_stay_feasible_and_finite(a, b, m):
    b = np.asarray(b, dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = solve_selection(a, b, m)
    check_feasible(res, b.size, m)
    if b.size == 1:
        assert res.omega.tolist() == [1.0] and res.q.tolist() == [1.0]
    if b.size > 1 and b.size <= 6 and np.max(b) < 1e100:
        f_ref, _ = reference(a, b, m, np.random.default_rng(0))
        assert res.fun <= f_ref * (1 + 1e-9)


def test_large_n_matches_the_m1_closed_form_and_scales():
    # m = 1: omega_n = sqrt(a / (b_n - mu)) exactly; check the KKT residual directly.
    rng = np.random.default_rng(2)
    b = 10 ** rng.uniform(-3, 4, 20000)
    res = solve_selection(1.0, b, 1)
    mu = b - 1.0 / res.omega ** 2
    assert np.ptp(mu) <= 1e-9 * np.max(np.abs(mu))
    res10 = solve_selection(1.0, b, 10)
    check_feasible(res10, b.size, 10)


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="exact.*manifold"):
        solve_selection(1.0, [1.0, 2.0], 2, method="newton")
    with pytest.raises(ValueError, match="a must"):
        solve_selection(0.0, [1.0, 2.0], 2)
    with pytest.raises(ValueError, match="b must"):
        solve_selection(1.0, [1.0, -2.0], 2)
    with pytest.raises(ValueError, match="b must"):
        solve_selection(1.0, [1.0, np.inf], 2)
    with pytest.raises(ValueError, match="m must"):
        solve_selection(1.0, [1.0, 2.0], 0)


# -- the simplex manifold ---------------------------------------------------------------------


def test_simplex_geometry():
    man = Simplex(6, rng=1)
    x = man.random_point()
    assert np.all(x > 0) and x.sum() == pytest.approx(1.0, abs=1e-15)
    u, v = man.random_tangent_vector(x), man.random_tangent_vector(x)
    assert abs(u.sum()) < 1e-15 and man.norm(x, u) == pytest.approx(1.0)
    assert man.inner_product(x, u, v) == pytest.approx(np.sum(u * v / x))
    # Projection: tangent, idempotent and orthogonal for the Fisher metric.
    e = np.random.default_rng(0).standard_normal(6)
    pe = man.projection(x, e)
    assert abs(pe.sum()) < 1e-14 and np.allclose(man.projection(x, pe), pe)
    assert man.inner_product(x, e - pe, u) == pytest.approx(0.0, abs=1e-12)
    # Retraction stays on the open simplex and is first order: R(x, t v) = x + t v + O(t^2).
    for t in (1e-3, 1.0, 50.0):
        y = man.retraction(x, t * u)
        assert np.all(y > 0) and y.sum() == pytest.approx(1.0, abs=1e-14)
    t = 1e-6
    assert np.allclose((man.retraction(x, t * u) - x) / t, u, atol=1e-5)
    # Fisher-Rao distance: 0 to itself, symmetric, pi between (near) disjoint supports.
    y = man.random_point()
    assert man.dist(x, x) == pytest.approx(0.0, abs=1e-7)
    assert man.dist(x, y) == pytest.approx(man.dist(y, x))
    assert Simplex(2).dist(np.array([1 - 1e-16, 1e-16]), np.array([1e-16, 1 - 1e-16])) == pytest.approx(np.pi, rel=1e-6)
    # Same seed, same points.
    assert np.array_equal(Simplex(6, rng=3).random_point(), Simplex(6, rng=3).random_point())


def test_simplex_gradient_and_hessian_are_consistent():
    a, b, m = 1.0, np.array([400.0, 500.0, 800.0, 1200.0, 1500.0]), 10
    man = Simplex(b.size, rng=0)

    def f(w):
        return objective(w, a, b, m)

    x = man.random_point()
    v = man.random_tangent_vector(x)
    rgrad = man.euclidean_to_riemannian_gradient(x, gradient(x, a, b, m))
    assert abs(rgrad.sum()) < 1e-10
    # d/dt f(R(x, t v)) at t = 0 equals <grad f, v>_x.
    h = 1e-6
    fd = (f(man.retraction(x, h * v)) - f(man.retraction(x, -h * v))) / (2 * h)
    assert fd == pytest.approx(man.inner_product(x, rgrad, v), rel=1e-6)
    # The Riemannian Hessian is self-adjoint ...
    u = man.random_tangent_vector(x)

    def hess(p, d):
        return man.euclidean_to_riemannian_hessian(p, gradient(p, a, b, m),
                                                   second_derivative(p, a, b, m) * d, d)

    assert man.inner_product(x, hess(x, u), v) == pytest.approx(man.inner_product(x, u, hess(x, v)), rel=1e-8)
    # ... it is the Hessian of f(y^2 / 4) on the sphere |y| = 2 (y = 2 sqrt(x) is an isometry
    # from the Fisher simplex onto that sphere), at a point that is not critical ...
    y, r2 = 2.0 * np.sqrt(x), 4.0
    egrad_y = gradient(x, a, b, m) * y / 2.0

    def sphere_hess(xi):  # projected Euclidean Hessian minus the curvature (Weingarten) term
        z = (gradient(x, a, b, m) / 2.0 + x * second_derivative(x, a, b, m)) * xi
        return z - y * np.dot(y, z) / r2 - np.dot(y, egrad_y) / r2 * xi

    assert man.inner_product(x, hess(x, u), v) == pytest.approx(
        np.dot(sphere_hess(u / np.sqrt(x)), v / np.sqrt(x)), rel=1e-10)
    # ... and at a critical point it is the second derivative along any retraction curve.
    xs = solve_selection(a, b, m).omega
    v = man.random_tangent_vector(xs) * 1e-2
    h = 1e-4
    fd2 = (f(man.retraction(xs, h * v)) - 2 * f(xs) + f(man.retraction(xs, -h * v))) / h ** 2
    assert fd2 == pytest.approx(man.inner_product(xs, hess(xs, v), v), rel=1e-4)
