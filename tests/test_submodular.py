"""Submodular selection maths (docs/papers/fair_selection.md, "DivFL" to "Greedy selection"):
incremental gains against from-scratch set functions, greedy against brute force, and the gradient
store's distance bookkeeping."""
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


# --- a hand-computed instance where SubTrunc and UnionFL must choose differently from DivFL --------
#
# Four clients with 2-D gradients A = (0, 5), B = (0, -5), C = (0, 0), D = (12, 0) (indices 0-3),
# kappa = 2. Distances (3-4-5 and 5-12-13 triangles, exact in floating point):
#     d_AB = 10, d_AC = 5, d_AD = 13, d_BC = 5, d_BD = 13, d_CD = 12;  D0 = max d = 13, n D0 = 52.
# Gbar(S) = sum_i min_{j in S} d_ij (per client A, B, C, D), G(S) = 52 - Gbar(S):
#     {A,B}: 0 + 0 + 5 + 13 = 18 -> 34      {B,C}: 5 + 0 + 0 + 12 = 17 -> 35
#     {A,C}: 0 + 5 + 0 + 12 = 17 -> 35      {B,D}: 10 + 0 + 5 + 0 = 15 -> 37
#     {A,D}: 0 + 10 + 5 + 0 = 15 -> 37      {C,D}: 5 + 5 + 0 + 0 = 10 -> 42   <- DivFL's optimum
# SubTrunc, lambda = 1, b = 8, phi(loss) = (8, 0.5, 0.5, 0.5): F(S) = 8.5 for every pair with A (truncated
# to 8), 1.0 for the others; W = G + min(8, F):
#     {A,B}: 34 + 8 = 42   {A,C}: 35 + 8 = 43   {A,D}: 37 + 8 = 45 <- SubTrunc's optimum
#     {B,C}: 35 + 1 = 36   {B,D}: 37 + 1 = 38   {C,D}: 42 + 1 = 43
# UnionFL, mu = 10, U = {B, C} (e.g. last round's selection, W = 1): h = G - 10 |S cap U|:
#     {A,B}: 34 - 10 = 24  {A,C}: 35 - 10 = 25  {A,D}: 37 <- UnionFL's optimum
#     {B,C}: 35 - 20 = 15  {B,D}: 37 - 10 = 27  {C,D}: 42 - 10 = 32
# Greedy (naive, exact here), first step: Delta_G(e | {}) = 52 - sum_i d_ie = 52 - (28, 28, 22, 38)
# = (24, 24, 30, 14).
#   DivFL:    C (30); then c = d(., C) = (5, 5, 0, 12): Delta_G = A 5, B 5, D 12 -> D.     {C, D}
#   SubTrunc: Delta_H = min(8, phi_e) = (8, .5, .5, .5): totals (32, 24.5, 30.5, 14.5) -> A; then F = 8 = b,
#             so Delta_H = 0 and c = d(., A) = (0, 10, 5, 13): Delta_G = B 10, C 5 + 5 + 1 = 11, D 13 -> D.  {A, D}
#   UnionFL:  totals (24, 24 - 10, 30 - 10, 14) -> A; then B 10 - 10, C 11 - 10, D 13 -> D.     {A, D}

HAND_G = np.array([[0.0, 5.0], [0.0, -5.0], [0.0, 0.0], [12.0, 0.0]])
HAND_PHI = np.array([8.0, 0.5, 0.5, 0.5])
HAND_UNION = np.array([False, True, True, False])
PAIRS = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
HAND_VALUES = {  # the tables above, in PAIRS order
    "divfl": [34, 35, 37, 35, 37, 42],
    "subtrunc": [42, 43, 45, 36, 38, 43],
    "unionfl": [24, 25, 37, 15, 27, 32],
}


def hand_objective(kind, lam=1.0, budget=8.0, mu=10.0):
    d = pairwise_distances(HAND_G)
    if kind == "subtrunc":
        return SelectionObjective(d, phi_loss=HAND_PHI, lam=lam, budget=budget)
    if kind == "unionfl":
        return SelectionObjective(d, in_union=HAND_UNION, mu=mu)
    return SelectionObjective(d)


def hand_value(kind, S, lam=1.0, budget=8.0, mu=10.0):
    d = pairwise_distances(HAND_G)
    if kind == "subtrunc":
        return subtrunc_value(d, S, HAND_PHI, lam, budget)
    if kind == "unionfl":
        return unionfl_value(d, S, HAND_UNION, mu)
    return facility_location_value(d, S)


def test_hand_instance_distances():
    d = pairwise_distances(HAND_G)
    expected = np.array([[0, 10, 5, 13], [10, 0, 5, 13], [5, 5, 0, 12], [13, 13, 12, 0]], dtype=float)
    np.testing.assert_array_equal(d, expected)


@pytest.mark.parametrize("kind, chosen", [("divfl", [2, 3]), ("subtrunc", [0, 3]), ("unionfl", [0, 3])])
def test_hand_instance_objectives_and_exact_greedy(kind, chosen):
    values = [hand_value(kind, list(S)) for S in PAIRS]
    assert values == pytest.approx(HAND_VALUES[kind], abs=1e-12)  # the hand-computed tables
    # brute force over all subsets of size kappa: a unique optimum, the one the comments name
    best = PAIRS[int(np.argmax(values))]
    assert sorted(values)[-1] > sorted(values)[-2] and list(best) == chosen
    # exact (naive) greedy reaches it, and in the order the comments derive
    picks = greedy(hand_objective(kind), 2)
    assert sorted(picks.tolist()) == chosen
    assert picks.tolist() == {"divfl": [2, 3], "subtrunc": [0, 3], "unionfl": [0, 3]}[kind]


def test_hand_instance_step_gains_with_the_truncation_binding_after_the_first_pick():
    steps = []
    picks = greedy(hand_objective("subtrunc"), 2, trace=steps)
    assert picks.tolist() == [0, 3]
    assert steps[0]["candidates"].tolist() == [0, 1, 2, 3]
    np.testing.assert_allclose(steps[0]["facility"], [24, 24, 30, 14], atol=1e-12)
    np.testing.assert_allclose(steps[0]["total"], [32, 24.5, 30.5, 14.5], atol=1e-12)
    # after A the loss mass is 8 = b: the fairness term adds nothing for any candidate
    assert steps[1]["mass"] == 8.0 and steps[1]["candidates"].tolist() == [1, 2, 3]
    np.testing.assert_allclose(steps[1]["facility"], [10, 11, 13], atol=1e-12)
    np.testing.assert_allclose(steps[1]["total"], steps[1]["facility"], atol=1e-12)
    # tracing changes nothing
    assert greedy(hand_objective("subtrunc"), 2).tolist() == picks.tolist()


def test_hand_instance_small_budget_gives_divfl_even_with_a_huge_lambda():
    # b = 0.5 <= every phi: H(S) = 100 min(0.5, F(S)) = 50 for every non-empty S, so W = G + 50 and the
    # optimum is DivFL's {C, D} (42 + 50). Untruncated, lambda = 100 would pick A first (24 + 800).
    values = [hand_value("subtrunc", list(S), lam=100.0, budget=0.5) for S in PAIRS]
    assert values == pytest.approx([v + 50 for v in HAND_VALUES["divfl"]], abs=1e-9)
    assert greedy(hand_objective("subtrunc", lam=100.0, budget=0.5), 2).tolist() == [2, 3]
    assert greedy(hand_objective("subtrunc", lam=100.0, budget=1e9), 2)[0] == 0


def test_hand_instance_lambda_0_and_mu_0_give_divfl():
    assert greedy(hand_objective("subtrunc", lam=0.0), 2).tolist() == [2, 3]
    assert greedy(hand_objective("unionfl", mu=0.0), 2).tolist() == [2, 3]
    # the paper's mu = 1 is too small to move this instance: h(C, D) = 41 > h(A, D) = 37
    assert greedy(hand_objective("unionfl", mu=1.0), 2).tolist() == [2, 3]

