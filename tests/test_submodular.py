"""Submodular selection maths (spec 000 sec. 2): incremental gains against from-scratch set
functions, greedy against brute force, and the gradient store's distance bookkeeping."""
import itertools
import math

import numpy as np
import pytest

from wirelessfl.scheduling.client_store import ClientStore
from wirelessfl.scheduling.submodular import (SelectionObjective, facility_location_value, greedy,
                                              pairwise_distances, sample_size_rule, subtrunc_value,
                                              unionfl_value)


def instance(n, dim=4, seed=0):
    rng = np.random.default_rng(seed)
    g = rng.normal(size=(n, dim)) * rng.uniform(0.2, 3.0, size=(n, 1))  # unequal norms
    return g, rng.uniform(0.05, 2.5, size=n), rng.random(n) < 0.4


def brute_distances(g):
    return np.array([[np.linalg.norm(a - b) for b in g] for a in g])


def test_pairwise_distances_match_a_double_loop():
    g, _, _ = instance(9, dim=6)
    d = pairwise_distances(g)
    np.testing.assert_allclose(d, brute_distances(g), atol=1e-10)
    assert np.all(np.diag(d) == 0) and np.allclose(d, d.T)
    np.testing.assert_allclose(pairwise_distances(g, squared=True), brute_distances(g) ** 2, atol=1e-9)


@pytest.mark.parametrize("kind", ["divfl", "subtrunc", "unionfl"])
@pytest.mark.parametrize("seed", range(4))
def test_incremental_gains_equal_from_scratch_differences(kind, seed):
    n = 10
    g, loss, in_union = instance(n, seed=seed)
    d = pairwise_distances(g)
    phi = np.log1p(loss)
    lam, budget, mu = (0.8, 1.7, 0.0) if kind == "subtrunc" else (0.0, math.inf, 2.5 if kind == "unionfl" else 0.0)

    def value(S):
        if kind == "subtrunc":
            return subtrunc_value(d, S, phi, lam, budget)
        if kind == "unionfl":
            return unionfl_value(d, S, in_union, mu)
        return facility_location_value(d, S)

    rng = np.random.default_rng(100 + seed)
    obj = SelectionObjective(d, phi_loss=phi, lam=lam, budget=budget, in_union=in_union, mu=mu)
    S = []
    for _ in range(6):
        rest = np.array([e for e in range(n) if e not in S])
        expected = [value(S + [int(e)]) - value(S) for e in rest]
        np.testing.assert_allclose(obj.gains(rest), expected, rtol=1e-12, atol=1e-9)
        assert obj.value() == pytest.approx(value(S), abs=1e-9)
        e = int(rng.choice(rest))
        obj.add(e)
        S.append(e)
    # the truncation binds somewhere along the way for SubTrunc (else the test would not cover it)
    if kind == "subtrunc":
        assert phi[S].sum() > budget


def test_first_divfl_pick_is_the_argmin_of_column_sums():
    g, _, _ = instance(12, seed=3)
    d = pairwise_distances(g)
    first = greedy(SelectionObjective(d), 1)[0]
    assert first == int(np.argmin(d.sum(axis=0)))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("kind", ["divfl", "subtrunc"])
def test_greedy_reaches_one_minus_one_over_e_of_the_brute_force_optimum(kind, seed):
    n, k = 8, 3
    g, loss, _ = instance(n, dim=3, seed=seed)
    d = pairwise_distances(g)
    phi = np.log1p(loss)
    lam, budget = (5.0, 1.5) if kind == "subtrunc" else (0.0, math.inf)

    def value(S):
        return subtrunc_value(d, S, phi, lam, budget)

    best = max(value(list(S)) for S in itertools.combinations(range(n), k))
    picks = greedy(SelectionObjective(d, phi_loss=phi, lam=lam, budget=budget), k)
    assert len(set(picks.tolist())) == k
    assert value(list(picks)) >= (1 - 1 / math.e) * best - 1e-12
    assert value(list(picks)) <= best + 1e-12


def test_unionfl_greedy_returns_k_devices_even_with_negative_gains():
    g, _, _ = instance(6, seed=1)
    d = pairwise_distances(g)
    in_union = np.array([True] * 5 + [False])
    picks = greedy(SelectionObjective(d, in_union=in_union, mu=1e6), 3)
    assert picks[0] == 5 and len(set(picks.tolist())) == 3  # the unpenalised device first


def test_stochastic_greedy_draws_do_not_depend_on_the_objective():
    g, loss, in_union = instance(40, seed=2)
    d = pairwise_distances(g)
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    greedy(SelectionObjective(d), 5, rng=a, sample_size=6)
    greedy(SelectionObjective(d, phi_loss=np.log1p(loss), lam=50.0, budget=9.0), 5, rng=b, sample_size=6)
    assert a.bit_generator.state == b.bit_generator.state


def test_stochastic_greedy_picks_the_best_of_its_sample():
    g, _, _ = instance(30, seed=4)
    d = pairwise_distances(g)
    rng = np.random.default_rng(11)
    picks = greedy(SelectionObjective(d), 4, rng=rng, sample_size=5)
    # replay: the same draws, then the argmax among them by from-scratch values
    replay, S = np.random.default_rng(11), []
    remaining = np.arange(30)
    for _ in range(4):
        cand = np.sort(replay.choice(remaining, size=5, replace=False))
        vals = [facility_location_value(d, S + [int(e)]) for e in cand]
        S.append(int(cand[int(np.argmax(vals))]))
        remaining = remaining[remaining != S[-1]]
    assert picks.tolist() == S


def test_eligible_mask_limits_the_selection():
    g, _, _ = instance(10, seed=5)
    eligible = np.zeros(10, dtype=bool)
    eligible[[1, 4, 7]] = True
    picks = greedy(SelectionObjective(pairwise_distances(g)), 5, eligible=eligible)
    assert sorted(picks.tolist()) == [1, 4, 7]


def test_sample_size_rule():
    assert sample_size_rule(100, 10) == 10 and sample_size_rule(1000, 10) == 100 and sample_size_rule(50, 20) == 20


def test_store_updates_keep_distances_equal_to_a_recomputation():
    rng = np.random.default_rng(0)
    store = ClientStore(12, 7)
    store.update(np.arange(12), rng.random(12), rng.normal(size=(12, 7)), round_idx=0)
    for r in range(1, 4):
        dev = rng.choice(12, size=3, replace=False)
        store.update(dev, rng.random(3), rng.normal(size=(3, 7)), round_idx=r)
    np.testing.assert_allclose(store.dist, brute_distances(store.vectors.astype(np.float64)), atol=1e-5)
    assert store.stored_floats == 12 * 7


def test_projected_store_keeps_distances_within_jl_tolerance():
    rng = np.random.default_rng(1)
    n, d, k = 20, 2000, 400
    g = rng.normal(size=(n, d)).astype(np.float32)
    store = ClientStore(n, d, projection_dim=k, rng=np.random.default_rng(2))
    store.update(np.arange(n), np.zeros(n), g)
    assert store.vectors.shape == (n, k) and store.stored_floats == n * k
    exact = brute_distances(g.astype(np.float64))
    off = ~np.eye(n, dtype=bool)
    ratio = store.dist[off] / exact[off]
    assert np.all(np.abs(ratio - 1) < 0.2)  # JL: relative error O(1/sqrt(k)) = 0.05
    assert abs(ratio.mean() - 1) < 0.03
