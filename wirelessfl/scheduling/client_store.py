"""The server's memory of every device for fair selection (spec 000 sec. 3): one stored gradient
(or model-delta proxy) and one loss per device, and the pairwise distances between the gradients.

Numpy only: the training side computes gradients and losses and hands them over as float32 arrays;
the schedulers read them. Memory: N x d float32 for the vectors plus N x N float64 for the distances.
With ``projection_dim`` k the vectors are stored as R v with a seeded Gaussian R (k x d, entries
N(0, 1/k)): N x k floats instead of N x d, and distances are preserved up to a factor 1 +- O(1/sqrt(k))
(Johnson-Lindenstrauss). The projection matrix itself takes k x d floats, once.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["ClientStore"]

Probe = Callable[[np.ndarray, bool], tuple[np.ndarray | None, np.ndarray]]
"""probe(devices, with_gradients) -> (gradients (k, d) float32 or None, losses (k,)) at the current model."""


class ClientStore:
    """Per-device vectors and losses, as fresh as the last upload of each device.

    num_devices: N. dim: d, the length of an uploaded vector. projection_dim: k < d stores projected
    vectors (None: store them whole). rng: draws the projection (the scenario's "projection" stream).
    The learner installs ``probe`` so a scheduler can ask for fresh losses or gradients of given
    devices (which the scheduler then pays airtime for); without a probe (timing-only runs) the
    store keeps what it has: zeros at the start.
    """

    def __init__(self, num_devices: int, dim: int, *, projection_dim: int | None = None,
                 rng: np.random.Generator | None = None):
        self.num_devices, self.dim = int(num_devices), int(dim)
        if projection_dim is not None and projection_dim < self.dim:
            if rng is None:
                raise ValueError("a projection needs an rng")
            # float32 N(0, 1/k) entries: E||R v||^2 = ||v||^2
            self._proj = (rng.standard_normal((int(projection_dim), self.dim), dtype=np.float32)
                          / np.float32(np.sqrt(projection_dim)))
        else:
            self._proj = None
        width = self.dim if self._proj is None else self._proj.shape[0]
        self.vectors = np.zeros((self.num_devices, width), dtype=np.float32)
        self.losses = np.zeros(self.num_devices)
        self.fresh_round = np.full(self.num_devices, -1, dtype=np.int64)  # round of the last refresh
        self.dist = np.zeros((self.num_devices, self.num_devices))
        self.bootstrapped = False
        self.probe: Probe | None = None

    @property
    def stored_floats(self) -> int:
        """Floats held for the vectors (N x d, or N x k with a projection)."""
        return int(self.vectors.size)

    def update(self, devices, losses, vectors=None, round_idx: int = -1) -> None:
        """Store new losses (and vectors, projected if configured) of ``devices``; refresh their
        rows and columns of the distance matrix (O(|devices| N k))."""
        dev = np.asarray(devices, dtype=np.int64).reshape(-1)
        if dev.size == 0:
            return
        self.losses[dev] = np.asarray(losses, dtype=np.float64).reshape(-1)
        self.fresh_round[dev] = round_idx
        if vectors is None:
            return
        v = np.asarray(vectors, dtype=np.float32).reshape(dev.size, self.dim)
        self.vectors[dev] = v if self._proj is None else v @ self._proj.T
        rows = self.vectors[dev].astype(np.float64)
        allv = self.vectors.astype(np.float64)
        d2 = ((rows ** 2).sum(1)[:, None] + (allv ** 2).sum(1)[None, :] - 2.0 * rows @ allv.T)
        d = np.sqrt(np.maximum(d2, 0.0))
        d[np.arange(dev.size), dev] = 0.0
        self.dist[dev, :] = d
        self.dist[:, dev] = d.T

    def refresh(self, devices, with_gradients: bool, round_idx: int) -> bool:
        """Ask the learner (through ``probe``) for the current losses (and gradients) of ``devices``
        and store them. Returns False when there is no probe (nothing changes)."""
        if self.probe is None:
            return False
        dev = np.asarray(devices, dtype=np.int64).reshape(-1)
        grads, losses = self.probe(dev, with_gradients)
        self.update(dev, losses, grads if with_gradients else None, round_idx)
        return True
