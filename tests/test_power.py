"""optimal_power against references that share no code with it (docs/papers/lyapunov.md, "Power (the
paper's Theorem 2)", with its erratum).

Two independent references for the exact rule:
- the root of dcost/dP (scipy brentq, in log P, no Lambert W): pins P itself to 1e-9;
- brute-force minimisation of the cost (fine log grid, then bounded Brent between the grid
  neighbours of the best point): pins the *cost* (P cannot be pinned this way beyond ~1e-8, the
  cost being flat to second order at its minimum).
"""
import math
import warnings

import numpy as np
import pytest
from scipy.optimize import brentq, minimize_scalar
from scipy.special import lambertw

from wirelessfl.scheduling.power import POWER_RULES, _lambertw_of_exp, optimal_power

LN2 = math.log(2.0)


def cost(p, g, z, c, n0):
    """c / log2(1 + g P / N0) + Z P."""
    return c * LN2 / math.log1p(g * p / n0) + z * p


def stationarity(u, g, z, c, n0):
    """Sign of dcost/dP at P = e^u, in logs so that tiny P neither underflows nor divides by 0:
    dcost/dP = Z - c ln2 (g/N0) / ((1 + x) ln(1 + x)^2), x = g P / N0."""
    x = g * math.exp(u) / n0
    return math.log(z) + math.log1p(x) + 2.0 * math.log(math.log1p(x)) - math.log(c * LN2 * g / n0)


def random_instance(rng):
    return dict(
        gain=10 ** rng.uniform(-3, 3),
        queue=10 ** rng.uniform(-4, 4),
        V=10 ** rng.uniform(-2, 4),
        lam=10 ** rng.uniform(-2, 3),
        model_bits=10 ** rng.uniform(4, 8),
        bandwidth_hz=10 ** rng.uniform(5, 8),
        noise_power=10 ** rng.uniform(-2, 1),
        p_max=10 ** rng.uniform(0, 4),
    )


def call(inst, rule="exact", **over):
    kw = {**inst, **over}
    return float(optimal_power(np.array([kw.pop("gain")]), np.array([kw.pop("queue")]), rule=rule, **kw)[0])


def reference_root(inst):
    """P from the stationarity condition alone, or Pmax when the cost still decreases there."""
    g, z, n0, pmax = inst["gain"], inst["queue"], inst["noise_power"], inst["p_max"]
    c = inst["V"] * inst["lam"] * inst["model_bits"] / inst["bandwidth_hz"]
    hi = math.log(pmax)
    if stationarity(hi, g, z, c, n0) <= 0:
        return pmax
    lo = hi - 100.0
    while stationarity(lo, g, z, c, n0) > 0:  # move left until the slope is negative
        lo -= 100.0
    return math.exp(brentq(lambda u: stationarity(u, g, z, c, n0), lo, hi, xtol=1e-15, rtol=1e-15))


def reference_brute(inst):
    g, z, n0, pmax = inst["gain"], inst["queue"], inst["noise_power"], inst["p_max"]
    c = inst["V"] * inst["lam"] * inst["model_bits"] / inst["bandwidth_hz"]
    grid = np.exp(np.linspace(math.log(pmax) - 60.0, math.log(pmax), 4001))
    vals = c * LN2 / np.log1p(g * grid / n0) + z * grid
    i = int(np.argmin(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = minimize_scalar(lambda p: cost(p, g, z, c, n0), bounds=(lo, hi), method="bounded",
                          options={"xatol": 1e-14 * hi})
    best = min((res.fun, res.x), (vals[i], grid[i]))
    return best[1], best[0], c


def test_exact_rule_matches_the_stationarity_root_and_brute_force():
    rng = np.random.default_rng(2022)
    clipped = interior = 0
    for _ in range(300):
        inst = random_instance(rng)
        p = call(inst)
        p_root = reference_root(inst)
        assert p == pytest.approx(p_root, rel=1e-9)
        p_brute, f_brute, c = reference_brute(inst)
        f = cost(p, inst["gain"], inst["queue"], c, inst["noise_power"])
        assert f <= f_brute * (1 + 1e-12)
        assert p == pytest.approx(p_brute, rel=1e-5)
        clipped += p == inst["p_max"]
        interior += p < inst["p_max"]
    # The instances must exercise both the interior stationary point and the clip at Pmax.
    assert clipped > 30 and interior > 100


def test_paper_rule_is_the_printed_formula():
    rng = np.random.default_rng(7)
    for _ in range(200):
        inst = random_instance(rng)
        g, z, n0 = inst["gain"], inst["queue"], inst["noise_power"]
        A = inst["V"] * inst["lam"] * inst["model_bits"] * g * LN2 ** 2 / (n0 * inst["bandwidth_hz"] * z)
        if not 1e-200 < A < 1e250:  # where the printed formula can be evaluated directly
            continue
        w = lambertw(math.sqrt(A / 4.0)).real
        printed = min(max(n0 / g * ((A / 4.0) / w ** 2 - 1.0), 0.0), inst["p_max"])
        assert call(inst, rule="paper") == pytest.approx(printed, rel=1e-10, abs=1e-300)


def test_paper_rule_is_below_the_exact_rule_by_the_ln2_factor():
    # Same as exact with A scaled by ln 2 < 1: strictly less power wherever neither is clipped.
    kw = dict(V=100.0, lam=100.0, model_bits=32 * 555178, bandwidth_hz=22e6, noise_power=1.0, p_max=1e9)
    g, z = np.array([0.5, 2.0, 30.0]), np.array([1.0, 3.0, 10.0])
    exact = optimal_power(g, z, rule="exact", **kw)
    paper = optimal_power(g, z, rule="paper", **kw)
    assert np.all(paper < exact)
    assert np.allclose(optimal_power(g, z / LN2, rule="exact", **kw), paper, rtol=1e-12)


def test_zero_queue_gives_pmax_and_clipping():
    kw = dict(V=100.0, lam=100.0, model_bits=32 * 555178, bandwidth_hz=22e6, noise_power=1.0)
    p = optimal_power(np.array([1e-3, 1.0, 50.0]), np.zeros(3), p_max=10 ** 3.5, **kw)
    assert np.all(p == 10 ** 3.5)
    # Per-device Pmax, tiny queues: the stationary point is far beyond Pmax.
    pmax = np.array([1.0, 2.0, 3.0])
    assert np.array_equal(optimal_power(np.array([1.0, 1.0, 1.0]), np.full(3, 1e-9), p_max=pmax, **kw), pmax)
    # lam = 0: the cost is Z P alone.
    p = optimal_power(np.array([1.0, 1.0]), np.array([0.0, 2.0]), p_max=5.0,
                      **{**kw, "lam": 0.0})
    assert p.tolist() == [5.0, 0.0]


@pytest.mark.parametrize("rule", POWER_RULES)
def test_numerically_safe_at_the_extremes(rule):
    gains = np.array([1e-3, 1e-3, 1.0, 1e3, 1e3, 1e-3, 1e6])
    queues = np.array([0.0, 1e-300, 1e-12, 1.0, 1e300, 1e300, 1e-300])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for V in (1e-6, 1.0, 1e9):
            for lam in (0.0, 1e-6, 1e6):
                p = optimal_power(gains, queues, V=V, lam=lam, model_bits=32 * 555178,
                                  bandwidth_hz=22e6, noise_power=1.0, p_max=10 ** 3.5, rule=rule)
                assert np.all(np.isfinite(p)) and np.all((p >= 0) & (p <= 10 ** 3.5))
                assert p[0] == 10 ** 3.5  # Z = 0
                # Monotone in Z for equal gains (more queue, less power).
                assert p[0] >= p[1] >= p[5]
    # Tiny A (Z huge): P ~ (N0/g) sqrt(A), still positive and accurate, through the series branch.
    inst = dict(gain=1.0, queue=1e250, V=1.0, lam=1.0, model_bits=1e6, bandwidth_hz=1e6,
                noise_power=1.0, p_max=1.0)
    assert call(inst) == pytest.approx(reference_root(inst), rel=1e-9)
    assert 0 < call(inst) < 1e-100


def test_lambert_w_of_exp_matches_scipy():
    # W0(e^s) from s = -20 (where the series takes over) to s = 700 (e^s near the float limit),
    # and beyond, where W0 + ln W0 = s is the definition.
    s = np.linspace(-20.0, 700.0, 20001)
    assert np.allclose(_lambertw_of_exp(s), lambertw(np.exp(s)).real, rtol=1e-14, atol=0)
    big = np.array([710.0, 1e4, 1e300])
    w = _lambertw_of_exp(big)
    assert np.allclose(w + np.log(w), big, rtol=1e-15)


def test_continuous_across_the_lambert_w_branches():
    # log(sqrt(A)/2) = -20 is where the series replaces lambertw; no jump across it.
    base = dict(gain=1.0, V=1.0, lam=1.0, model_bits=1.0, bandwidth_hz=1.0, noise_power=1.0, p_max=1e300)
    z_switch = LN2 / (4.0 * math.exp(-40.0))  # A = 4 e^-40
    for factor in (0.999999, 1.0, 1.000001):
        inst = {**base, "queue": z_switch * factor}
        assert call(inst) == pytest.approx(reference_root(inst), rel=1e-9)


def test_rejects_unknown_rule_and_bad_inputs():
    kw = dict(V=1.0, lam=1.0, model_bits=1.0, bandwidth_hz=1.0, noise_power=1.0, p_max=1.0)
    with pytest.raises(ValueError, match="exact.*paper"):
        optimal_power(np.ones(2), np.ones(2), rule="printed", **kw)
    with pytest.raises(ValueError, match="gain"):
        optimal_power(np.array([0.0, 1.0]), np.ones(2), **kw)
    with pytest.raises(ValueError, match="queue"):
        optimal_power(np.ones(2), np.array([-1.0, 1.0]), **kw)
