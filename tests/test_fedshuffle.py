"""FedShuffle family (spec 001): the paper's quadratic experiment and the FedShuffleGen settings."""
import numpy as np
import pytest

from wirelessfl.learning import quadratic as quad


def test_fedavg_closed_form_limit_point():
    # spec sec. 2.1 / 6: x~ = sum |D_i|^2 c_i / sum |D_i|^2 = (1,2,2,3,3,3)/14, ||x~ - x*||^2 = 30/1764
    p = quad.paper_problem()
    xt = quad.fedavg_limit_point(p)
    np.testing.assert_allclose(xt * 14, [1, 2, 2, 3, 3, 3])
    assert np.sum((xt - p.optimum) ** 2) == pytest.approx(30 / 1764)
    assert p.objective(xt) == pytest.approx(0.4252, abs=1e-4)
    assert p.objective(p.optimum) == pytest.approx(5 / 12)
    # the exact fixed point of E[x] at eta = 1/80 tends to x~ as eta -> 0
    fp = quad.expected_fixed_point("fedavg_rr", p, eta=1 / 80)
    assert np.sum((fp - p.optimum) ** 2) == pytest.approx(0.01689, abs=1e-5)
    fp_small = quad.expected_fixed_point("fedavg_rr", p, eta=1e-6)
    np.testing.assert_allclose(fp_small, xt, atol=1e-6)
    # FedShuffle's and FedAvgMin's fixed points are x* (up to O(eta) for FedShuffle)
    assert np.sum((quad.expected_fixed_point("fedshuffle", p, 1e-6) - p.optimum) ** 2) < 1e-12
    np.testing.assert_allclose(quad.expected_fixed_point("fedavg_min", p), p.optimum)


def test_so_fixed_point_matches_paper():
    # spec sec. 3 / 6: expected SO contributions 7/36, 16/45, 9/20 with 2 of 3 uniformly
    x = quad.so_fixed_point(cohort=2)
    np.testing.assert_allclose(x, [7 / 36, 8 / 45, 8 / 45, 3 / 20, 3 / 20, 3 / 20])
    assert np.sum((x - 1 / 6) ** 2) == pytest.approx(1.85e-3, rel=1e-2)


def test_quadratic_fedavg_stalls_fedshuffle_converges():
    # Fig. 1a settings: full participation, 1 epoch, batch 1, eta = 1/80, 1000 rounds, seed 123
    avg = quad.run("fedavg_rr", seed=123)
    shuf = quad.run("fedshuffle", seed=123)
    assert avg[0] == pytest.approx(1 / 6)
    assert avg[-1] == pytest.approx(0.0169, abs=3e-4)  # paper: ~1.7e-2 plateau
    assert abs(avg[-1] - avg[500]) < 1e-3  # stalled
    assert shuf[-1] < 1e-6  # paper: ~4e-7 at round 1000
    assert shuf[500] < 2e-6  # paper: ~1e-6 by round 500
    # it sits at its exact O(eta) fixed point
    fp = quad.expected_fixed_point("fedshuffle")
    assert shuf[-1] == pytest.approx(np.sum((fp - 1 / 6) ** 2), rel=0.2)


def test_quadratic_sum_one_biased_under_sampling():
    # Fig. 1c: 2 of 3 uniformly, eta = 1/160: SO stalls near 1.85e-3, unbiased keeps going down
    so = quad.run("fedshuffle_so", eta=1 / 160, cohort=2, rounds=600, seed=124)
    ub = quad.run("fedshuffle", eta=1 / 160, cohort=2, rounds=600, seed=124)
    assert so[-100:].mean() > 5e-4
    assert ub[-100:].mean() < so[-100:].mean() / 2
