"""Fairness metrics (docs/papers/fair_selection.md, "Metrics: accuracy, dissimilarity, worst-10 %
accuracy"): per-device test sets, per-device accuracy, client dissimilarity.

A device's test set is label-matched: ``samples`` test samples whose class counts follow the class
shares of the device's training data (largest-remainder rounding), drawn without replacement within
each class from the global test set (stream "device_test"). For the 3-classes-per-device split with
100 samples this is the 33/33/34 recipe of docs/papers/fair_selection.md; devices may share test
samples.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["device_test_sets", "fairness_metrics"]


def device_test_sets(train_labels: Sequence[np.ndarray], test_labels: np.ndarray, samples: int,
                     rng: np.random.Generator, num_classes: int | None = None) -> list[np.ndarray]:
    """One array of test indices per device, label-matched to its training labels."""
    test_labels = np.asarray(test_labels)
    k = int(test_labels.max()) + 1 if num_classes is None else int(num_classes)
    by_class = [np.flatnonzero(test_labels == c) for c in range(k)]
    out = []
    for labels in train_labels:
        hist = np.bincount(np.asarray(labels, dtype=np.int64), minlength=k)[:k].astype(float)
        hist = np.where([b.size > 0 for b in by_class], hist, 0.0)  # classes absent from the test set
        if hist.sum() == 0:
            out.append(np.empty(0, dtype=np.int64))
            continue
        exact = samples * hist / hist.sum()
        counts = np.floor(exact).astype(np.int64)
        rest = samples - counts.sum()
        counts[np.argsort(-(exact - counts), kind="stable")[:rest]] += 1  # largest remainders
        parts = [rng.choice(by_class[c], size=counts[c], replace=counts[c] > by_class[c].size)
                 for c in np.flatnonzero(counts)]
        out.append(np.sort(np.concatenate(parts)).astype(np.int64))
    return out


def fairness_metrics(accuracies: np.ndarray) -> dict[str, float]:
    """Summaries of per-device accuracies a_i (fractions).

    dissimilarity: population std sqrt(mean (a_i - mean a)^2) (the primary definition in the
        simulator's reading, docs/papers/fair_selection.md);
    pairwise_gap: mean |a_i - a_j| over all ordered pairs (i = j included, as (1/n^2) sum);
    device_acc_p10: the 10th percentile (worst-10% accuracy); min and range (max - min).
    """
    a = np.asarray(accuracies, dtype=np.float64)
    a = a[np.isfinite(a)]
    if a.size == 0:
        return {}
    s = np.sort(a)
    n = s.size
    # sum_{i,j} |a_i - a_j| = 2 sum_k (2k - n + 1) s_k for sorted s (k from 0)
    gap = 2.0 * float(np.sum((2 * np.arange(n) - n + 1) * s)) / n ** 2
    return {"device_acc_mean": float(a.mean()), "dissimilarity": float(a.std()),
            "device_acc_p10": float(np.percentile(a, 10)), "device_acc_min": float(s[0]),
            "device_acc_range": float(s[-1] - s[0]), "pairwise_gap": gap}
