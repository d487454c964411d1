"""Unbiased aggregation: with m draws with replacement and weights 1/(N q_n), the expected update
equals full participation's (1/N) sum_n delta_n (docs/papers/lyapunov.md, "Sampling with
replacement")."""
import numpy as np

from wirelessfl.learning import FedAvg
from wirelessfl.scheduling import draw_devices, inclusion_probability


def aggregated_updates(omega, m, deltas, weights_fn, draws, seed=0):
    rng = np.random.default_rng(seed)
    n = len(omega)
    q = inclusion_probability(omega, m)
    out = np.empty((draws, deltas.shape[1]))
    for t in range(draws):
        sel = draw_devices(omega, m, rng)
        out[t] = weights_fn(sel, q, n) @ deltas[sel]
    return out


def test_unbiased_weights_match_full_participation():
    rng = np.random.default_rng(1)
    n, m = 6, 3
    omega = np.array([0.5, 0.2, 0.1, 0.1, 0.05, 0.05])
    deltas = rng.normal(size=(n, 3)) + np.arange(n)[:, None]  # devices differ systematically
    full = deltas.mean(0)
    samples = aggregated_updates(omega, m, deltas, FedAvg().aggregation_weights, draws=40000)
    se = samples.std(0) / np.sqrt(len(samples))
    assert np.all(np.abs(samples.mean(0) - full) < 4 * se), (samples.mean(0), full, se)


def test_naive_average_is_detectably_biased():
    # the same statistical check rejects plain averaging over the selected devices
    rng = np.random.default_rng(1)
    n, m = 6, 3
    omega = np.array([0.5, 0.2, 0.1, 0.1, 0.05, 0.05])
    deltas = rng.normal(size=(n, 3)) + np.arange(n)[:, None]
    full = deltas.mean(0)
    naive = aggregated_updates(omega, m, deltas, lambda sel, q, n: np.full(len(sel), 1 / len(sel)), 20000)
    se = naive.std(0) / np.sqrt(len(naive))
    assert np.any(np.abs(naive.mean(0) - full) > 10 * se)
