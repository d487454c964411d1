"""Every model of time, radio and link against its exact result (docs/validation.md).

The cases live in benchmarks/validation.py, which also prints the page's tables and draws its
figures. Here each runs at a size that takes seconds (``QUICK``), and in the slow suite at the
page's size (scale 1, the numbers the page quotes). A measured value must lie within 4 standard
errors of the exact one, the standard error estimated from the sample itself (batch means of one
run, the sample's variance, a binomial count at the exact probability): the bound follows from the
sample size, with no tolerance tuned by hand. A replay of a run's records (a closed form evaluated on
the draws the run made) must agree to rounding (1e-9 relative; 1e-6 for a float32 model).

The exact sides are checked too, each against an independent route (a birth-death chain, an
embedded Markov chain, numerical integration), so an agreement cannot come from a wrong formula that
the code happens to share.
"""
from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate

REPO = Path(__file__).resolve().parents[1]


def _load():
    """benchmarks/validation.py as the module ``validation`` (the name its test-only access scheme is
    found by: ``link.access = "validation:ExponentialAirtime"``)."""
    if "validation" in sys.modules and getattr(sys.modules["validation"], "CASES", None) is not None:
        return sys.modules["validation"]
    spec = importlib.util.spec_from_file_location("validation", REPO / "benchmarks" / "validation.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["validation"] = module
    spec.loader.exec_module(module)
    return module


validation = _load()

pytestmark = pytest.mark.usefixtures("one_torch_thread")

QUICK = {
    "queue": 0.03, "shared_band": 0.05, "semi_sync": 0.05, "sync_round": 0.05, "rayleigh_outage": 0.1,
    "fading_moments": 0.1, "path_loss": 0.1, "jakes": 0.05, "arq": 0.1, "fading_upload": 0.05, "aircomp": 0.05,
    "mobility": 0.1, "fedavg": 1.0, "fedbuff_weights": 0.05, "unbiased": 0.05,
}
"""Each case's sample sizes in the quick suite, as a share of the page's (a few seconds or less each)."""


def assert_agrees(result) -> None:
    """Every check of ``result`` within its bound; the message lists those that are not."""
    off = [f"{c.what}: measured {c.measured:.6g}, exact {c.exact:.6g}, se {c.se:.3g} (bound {c.bound():.3g})"
           for c in result.checks if not c.agrees()]
    assert result.checks and not off, "\n".join(off)


def test_every_case_has_a_quick_size():
    assert set(QUICK) == set(validation.CASES)


@pytest.mark.parametrize("name", list(validation.CASES))
def test_the_model_agrees_with_its_exact_result(name):
    assert_agrees(validation.CASES[name](QUICK[name]))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(validation.CASES))
def test_the_model_agrees_with_its_exact_result_at_the_page_s_size(name):
    assert_agrees(validation.CASES[name](1.0))


# --- the exact sides, each against an independent route ------------------------------------------


@pytest.mark.parametrize("c", [1, 2, 5, 16])
def test_the_finite_source_formula_is_the_birth_death_chain_for_exponential_service(c):
    """M/M/1//C: P(k at the server) proportional to C! / (C - k)! (lam / mu)^k (Kleinrock, Queueing
    Systems vol. 1 (1975), the finite-population single server)."""
    for lam in (0.05, 0.3, 1.0):
        weights = [math.factorial(c) / math.factorial(c - k) * lam ** k for k in range(c + 1)]
        p0 = 1 / sum(weights)
        busy = sum(k * w for k, w in enumerate(weights)) * p0  # mean at the server
        got = validation.finite_source_queue(c, lam, lambda s: 1 / (1 + s), 1.0)
        assert got["utilisation"] == pytest.approx(1 - p0, rel=1e-12)
        assert got["wait"] + 1.0 == pytest.approx(busy / got["throughput"], rel=1e-9)  # Little at the server


@pytest.mark.parametrize("c", [1, 3, 8, 16])
def test_the_finite_source_formula_is_the_embedded_chain_for_constant_service(c):
    for lam in (0.02, 0.25, 1.5):
        got = validation.finite_source_queue(c, lam, lambda s: math.exp(-s), 1.0)
        assert got["utilisation"] == pytest.approx(validation.md1_embedded_chain(c, lam, 1.0), rel=1e-9)


def test_one_device_never_waits_and_cycles_through_computation_and_airtime():
    got = validation.finite_source_queue(1, 0.25, lambda s: math.exp(-s), 1.0)
    assert got["throughput"] == pytest.approx(1 / (4 + 1)) and got["wait"] == pytest.approx(0, abs=1e-12)


@pytest.mark.parametrize("k, m", [(1, 1), (1, 10), (3, 10), (10, 10), (4, 7)])
def test_order_statistic_moments_are_the_integrals_of_its_distribution(k, m):
    mean, var = validation.order_statistic_moments(k, m, 2.0)
    survival = lambda t: 1 - validation.order_statistic_cdf(t, k, m, 2.0)  # noqa: E731
    first = integrate.quad(survival, 0, np.inf)[0]
    second = integrate.quad(lambda t: 2 * t * survival(t), 0, np.inf)[0]
    assert mean == pytest.approx(first, rel=1e-7)
    assert var == pytest.approx(second - first ** 2, rel=1e-6)


@pytest.mark.parametrize("k", [0.0, 1.0, 5.0])
def test_rician_moments_are_the_integrals_of_the_rice_law(k):
    from scipy import stats

    omega = 1.28
    nu, s = math.sqrt(k / (k + 1) * omega), math.sqrt(omega / (2 * (k + 1)))
    law = stats.rice(b=nu / s, scale=s)
    for order in (1, 2, 3):
        assert validation.rician_moment(order, omega, k) == pytest.approx(law.moment(2 * order), rel=1e-9)
    if k == 0:  # Rayleigh: Nakagami m = 1, n! omega^n
        assert [validation.rician_moment(n, omega, 0.0) for n in (1, 2, 3)] == pytest.approx(
            [omega, 2 * omega ** 2, 6 * omega ** 3])


@pytest.mark.parametrize("snr", [0.05, 1.0, 40.0])
def test_the_ergodic_capacity_is_the_integral_over_the_exponential_gain(snr):
    want = integrate.quad(lambda x: math.log2(1 + snr * x) * math.exp(-x), 0, np.inf)[0]
    assert float(validation.ergodic_log2(snr)) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("p, limit", [(0.3, 1), (0.3, 4), (0.8, 6)])
def test_the_truncated_geometric_law_by_enumeration(p, limit):
    probs = [p ** (a - 1) * (1 - p) for a in range(1, limit)] + [p ** (limit - 1)]
    law = validation.truncated_geometric(p, limit)
    assert sum(probs) == pytest.approx(1.0)
    assert law["mean"] == pytest.approx(sum(a * q for a, q in zip(range(1, limit + 1), probs)))
    assert law["lost"] == pytest.approx(p ** limit)


def test_the_billiard_from_the_centre_runs_along_a_diameter():
    t = np.linspace(0, 100, 1001)
    d = validation.billiard_distance(np.zeros(2), np.array([0.0, 2.0]), 10.0, t)
    # out to the wall in 5 s, back through the centre at 10 s, to the other wall at 15 s: |triangle wave|
    np.testing.assert_allclose(d, np.abs(np.mod(2 * t + 10, 20) - 10), atol=1e-12)


def test_the_shared_band_rule_by_hand():
    """Two uploads of 6 bits on B = 1, N0 = 1, gains 3 and 7 at P = 1: together each gets B / 2 at SNR
    2 g, rates log2(7) / 2 and log2(15) / 2; the second ends first, then the first has the band alone."""
    rates = validation.fdma_rates(np.array([3.0, 7.0]), np.ones(2), 1.0, 1.0)
    ends = validation.shared_band_ends(np.zeros(2), np.full(2, 6.0), rates)
    t1 = 6 / (math.log2(15) / 2)
    left = 6 - t1 * math.log2(7) / 2
    assert ends[1] == pytest.approx(t1) and ends[0] == pytest.approx(t1 + left / math.log2(4))


def test_the_makespan_of_one_transmitter_by_hand():
    # ready at 0, 1, 10 with airtimes 3, 3, 1: the second waits till 3, ends at 6; the third at 11
    assert validation.tdma_makespan(np.array([1.0, 0.0, 10.0]), np.array([3.0, 3.0, 1.0])) == 11.0
    assert validation.tdma_makespan(np.zeros(3), np.array([1.0, 2.0, 3.0])) == 6.0  # all at once: the sum


def test_a_check_s_bound_is_k_standard_errors_plus_rounding():
    c = validation.Check("x", 1.0 + 3.9e-3, 1.0, 1e-3)
    assert c.agrees() and not validation.Check("x", 1.0 + 4.1e-3, 1.0, 1e-3).agrees()
    assert validation.Check("replay", 5e-10, 0.0).agrees() and not validation.Check("replay", 2e-9, 0.0).agrees()
