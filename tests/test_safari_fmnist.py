"""The pieces of the spec 003 Fashion-MNIST reproduction (no dataset needed)."""
import numpy as np
import pytest
import torch

from wirelessfl.experiments.safari_fmnist import _epoch_batches, _sgd, balanced_class_partition


@pytest.mark.parametrize("M,p", [(10, 1), (10, 2), (30, 2), (20, 5)])
def test_balanced_partition(M, p):
    labels = np.repeat(np.arange(10), 100)
    parts = balanced_class_partition(labels, M, p, np.random.default_rng(0))
    assert len(parts) == M
    allidx = np.concatenate(parts)
    assert np.unique(allidx).size == allidx.size == labels.size  # disjoint and complete
    holders = np.zeros(10, dtype=int)
    for ix in parts:
        classes = np.unique(labels[ix])
        assert classes.size == p
        holders[classes] += 1
    assert (holders == p * M // 10).all()
    sizes = [len(ix) for ix in parts]
    assert max(sizes) - min(sizes) <= p


def test_epoch_batches_cover_each_pool_once():
    pools = [np.arange(10), np.arange(100, 103)]
    idx, mask = _epoch_batches(pools, 4, np.random.default_rng(1))
    assert idx.shape == (2, 3, 4) and mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert set(idx[0].ravel()) == set(range(10))
    assert set(idx[1, 0]) == {100, 101, 102}


def test_batched_sgd_matches_autograd():
    g = torch.Generator().manual_seed(0)
    X, Y = torch.randn(50, 6, generator=g), torch.randint(0, 10, (50,), generator=g)
    W0, b0 = torch.randn(1, 6, 10, generator=g) * 0.1, torch.zeros(1, 10)
    idx, mask = _epoch_batches([np.arange(20), np.arange(20, 50)], 8, np.random.default_rng(2))
    W, b = _sgd(W0, b0, X, Y, idx, mask, 0.3)
    for j in range(2):
        w, bb = W0[0].clone().requires_grad_(), b0[0].clone().requires_grad_()
        for t in range(idx.shape[1]):
            if mask[j, t]:
                ix = torch.from_numpy(idx[j, t])
                loss = torch.nn.functional.cross_entropy(X[ix] @ w + bb, Y[ix])
                gw, gb = torch.autograd.grad(loss, (w, bb))
                w, bb = (w - 0.3 * gw).detach().requires_grad_(), (bb - 0.3 * gb).detach().requires_grad_()
        assert torch.allclose(W[j], w, atol=1e-5) and torch.allclose(b[j], bb, atol=1e-5)
