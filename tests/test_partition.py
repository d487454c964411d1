"""Partitioners: class mixes at the alpha limits, sizes, coverage, determinism."""
from __future__ import annotations

import numpy as np
import pytest

from wirelessfl.learning.partition import partition
from wirelessfl.rng import stream


@pytest.fixture(scope="module")
def labels():
    # 10 classes of unequal size, shuffled, like a real training set.
    sizes = [600, 550, 500, 650, 600, 580, 620, 500, 610, 590]
    return np.random.default_rng(0).permutation(np.repeat(np.arange(10), sizes))


def test_dirichlet_alpha_zero_one_class_per_device(labels):
    parts = partition(labels, 100, "dirichlet_per_device", rng=stream(1, "partition"), alpha=0.0)
    assert len(parts) == 100
    classes_used = set()
    for idx in parts:
        assert idx.size == 500 and idx.dtype == np.int64
        assert np.unique(labels[idx]).size == 1
        assert np.unique(idx).size == 500  # distinct samples within a device
        classes_used.add(int(labels[idx[0]]))
    assert len(classes_used) >= 8  # the class is uniformly random: 100 devices hit almost every class


def test_dirichlet_alpha_inf_is_iid(labels):
    parts = partition(labels, 100, "dirichlet_per_device", rng=stream(2, "partition"), alpha=np.inf)
    counts = np.stack([np.bincount(labels[idx], minlength=10) for idx in parts])
    assert np.all(counts.sum(1) == 500)
    # Each count is Binomial(500, 0.1): mean 50, sd 6.7; [20, 85] is beyond 4.4 sd on both sides.
    assert counts.min() >= 20 and counts.max() <= 85
    # Pooled over devices the mix is uniform within 2 %.
    assert np.allclose(counts.sum(0) / counts.sum(), 0.1, atol=0.02)


def test_dirichlet_alpha_one_is_heterogeneous(labels):
    parts = partition(labels, 50, "dirichlet_per_device", rng=stream(3, "partition"), alpha=1.0)
    shares = np.stack([np.bincount(labels[idx], minlength=10) / 500 for idx in parts])
    # Dir(1) mixes are far from uniform: the majority class averages ~0.29 (vs ~0.13 for iid draws).
    assert shares.max(1).mean() > 0.2
    # Samples may be shared across devices (drawn with replacement across devices).
    all_idx = np.concatenate(parts)
    assert np.unique(all_idx).size < all_idx.size


def test_label_dirichlet_covers_each_sample_once(labels):
    for alpha in (0.1, 1.0, 0.0, np.inf):
        parts = partition(labels, 20, "label_dirichlet", rng=stream(4, "partition"), alpha=alpha)
        assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(labels.size))
    # alpha = 0: each class goes whole to one device.
    parts = partition(labels, 20, "label_dirichlet", rng=stream(5, "partition"), alpha=0.0)
    owners = [{n for n, idx in enumerate(parts) if np.any(labels[idx] == k)} for k in range(10)]
    assert all(len(o) == 1 for o in owners)


def test_iid_disjoint_and_sized(labels):
    parts = partition(labels, 10, "iid", rng=stream(6, "partition"), samples_per_device=500)
    all_idx = np.concatenate(parts)
    assert all(p.size == 500 for p in parts) and np.unique(all_idx).size == 5000
    # Not enough data for 20 x 500: the whole set in near-equal disjoint parts.
    parts = partition(labels, 20, "iid", rng=stream(6, "partition"), samples_per_device=500)
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(labels.size))
    assert max(p.size for p in parts) - min(p.size for p in parts) <= 1


def test_deterministic_given_stream(labels):
    a = partition(labels, 10, "dirichlet_per_device", rng=stream(7, "partition"), alpha=0.5)
    b = partition(labels, 10, "dirichlet_per_device", rng=stream(7, "partition"), alpha=0.5)
    c = partition(labels, 10, "dirichlet_per_device", rng=stream(8, "partition"), alpha=0.5)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))


def test_bad_arguments(labels):
    with pytest.raises(ValueError, match="dirichlet_per_device, label_dirichlet, iid"):
        partition(labels, 10, "shards", rng=stream(0, "partition"))
    with pytest.raises(ValueError, match="alpha"):
        partition(labels, 10, "label_dirichlet", rng=stream(0, "partition"), alpha=-1)


@pytest.mark.parametrize("n,p", [(10, 1), (10, 2), (20, 1), (30, 2), (10, 5), (20, 5), (10, 10)])
@pytest.mark.parametrize("assignment", ["random", "ordered"])
def test_classes_per_device_balanced(labels, n, p, assignment):
    parts = partition(labels, n, "classes_per_device", rng=stream(4, "partition"), classes_per_device=p,
                      class_assignment=assignment)
    assert len(parts) == n and all(ix.dtype == np.int64 for ix in parts)
    everything = np.concatenate(parts)
    assert np.unique(everything).size == everything.size == labels.size  # disjoint and complete
    holders = np.zeros(10, dtype=int)
    for ix in parts:
        classes = np.unique(labels[ix])
        assert classes.size == p  # exactly p distinct classes per device
        holders[classes] += 1
    assert (holders == p * n // 10).all()  # every class held by p N / 10 devices
    for k in range(10):  # and split evenly among its holders
        counts = [np.sum(labels[ix] == k) for ix in parts if np.any(labels[ix] == k)]
        assert max(counts) - min(counts) <= 1


def test_classes_per_device_ordered_ties_classes_to_ids(labels):
    parts = partition(labels, 20, "classes_per_device", rng=stream(0, "partition"), classes_per_device=1,
                      class_assignment="ordered")
    assert [int(labels[ix[0]]) for ix in parts] == [n // 2 for n in range(20)]
    parts = partition(labels, 20, "classes_per_device", rng=stream(0, "partition"), classes_per_device=2,
                      class_assignment="ordered")
    assert [sorted(np.unique(labels[ix]).tolist()) for ix in parts[:5]] == [[0, 5], [0, 5], [0, 5], [0, 5], [1, 6]]


def test_classes_per_device_reproducible_from_partition_stream(labels):
    def run(seed):
        return partition(labels, 10, "classes_per_device", rng=stream(seed, "partition"), classes_per_device=2)

    a, b, c = run(3), run(3), run(4)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))
    # random class sets: different seeds give different class sets, not only a different split
    sets = lambda parts: [tuple(np.unique(labels[ix])) for ix in parts]
    assert sets(run(3)) != sets(run(4))


def test_classes_per_device_bad_arguments(labels):
    with pytest.raises(ValueError, match="multiple of 10"):
        partition(labels, 7, "classes_per_device", rng=stream(0, "partition"), classes_per_device=1)
    with pytest.raises(ValueError, match="1 <= p <= 10"):
        partition(labels, 10, "classes_per_device", rng=stream(0, "partition"), classes_per_device=11)
    with pytest.raises(ValueError, match="class assignment"):
        partition(labels, 10, "classes_per_device", rng=stream(0, "partition"), class_assignment="sorted")
