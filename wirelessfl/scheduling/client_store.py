"""The server's memory of every device for fair selection (docs/papers/fair_selection.md, "The
server's gradient store and its uplink cost"): one stored gradient (or model-delta proxy) and one loss
per device, and the pairwise distances between the gradients.

Numpy only: the training side computes gradients and losses, the scheduler receives them as reports
and stores them here. Memory: N x d float32 for the vectors plus N x N float64 for the distances.
With ``projection_dim`` k the vectors are stored as R v with a seeded Gaussian R (k x d, entries
N(0, 1/k)): N x k floats instead of N x d, and distances are preserved up to a factor 1 +- O(1/sqrt(k))
(Johnson-Lindenstrauss). The projection matrix itself takes k x d floats, once. The vector length d
is learnt from the first vectors stored (timing-only runs store none: every distance stays 0).
"""
from __future__ import annotations

import numpy as np

__all__ = ["ClientStore"]


class ClientStore:
    """Per-device vectors and losses, as fresh as the last report of each device.

    num_devices: N. dim: d, the length of a stored vector (None: learnt from the first update).
    projection_dim: k < d stores projected vectors (None: store them whole). rng: draws the
    projection (the scenario's "projection" stream) when the first vectors arrive.
    """

    def __init__(self, num_devices: int, dim: int | None = None, *, projection_dim: int | None = None,
                 rng: np.random.Generator | None = None):
        self.num_devices = int(num_devices)
        if projection_dim is not None and rng is None:
            raise ValueError("a projection needs an rng")
        self.projection_dim, self._rng = projection_dim, rng
        self.dim: int | None = None
        self._proj: np.ndarray | None = None
        self.vectors: np.ndarray | None = None
        self.losses = np.zeros(self.num_devices)
        self.fresh_round = np.full(self.num_devices, -1, dtype=np.int64)  # round of the last refresh
        self.dist = np.zeros((self.num_devices, self.num_devices))
        if dim is not None:
            self._allocate(int(dim))

    def _allocate(self, dim: int) -> None:
        self.dim = dim
        if self.projection_dim is not None and self.projection_dim < dim:
            # float32 N(0, 1/k) entries: E||R v||^2 = ||v||^2
            k = int(self.projection_dim)
            self._proj = self._rng.standard_normal((k, dim), dtype=np.float32) / np.float32(np.sqrt(k))
        width = dim if self._proj is None else self._proj.shape[0]
        self.vectors = np.zeros((self.num_devices, width), dtype=np.float32)

    @property
    def stored_floats(self) -> int:
        """Floats held for the vectors (N x d, or N x k with a projection)."""
        return 0 if self.vectors is None else int(self.vectors.size)

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
        v = np.asarray(vectors, dtype=np.float32).reshape(dev.size, -1)
        if self.dim is None:
            self._allocate(v.shape[1])
        v = v.reshape(dev.size, self.dim)
        self.vectors[dev] = v if self._proj is None else v @ self._proj.T
        rows = self.vectors[dev].astype(np.float64)
        allv = self.vectors.astype(np.float64)
        d2 = ((rows ** 2).sum(1)[:, None] + (allv ** 2).sum(1)[None, :] - 2.0 * rows @ allv.T)
        d = np.sqrt(np.maximum(d2, 0.0))
        d[np.arange(dev.size), dev] = 0.0
        self.dist[dev, :] = d
        self.dist[:, dev] = d.T

    def state_dict(self) -> dict:
        """Everything stored (for checkpoints)."""
        return {"losses": self.losses.copy(), "fresh_round": self.fresh_round.copy(), "dist": self.dist.copy(),
                "vectors": None if self.vectors is None else self.vectors.copy(),
                "projection": None if self._proj is None else self._proj.copy()}

    def load_state(self, state: dict) -> None:
        """Restore what state_dict returned."""
        self.losses = np.asarray(state["losses"], dtype=float).copy()
        self.fresh_round = np.asarray(state["fresh_round"], dtype=np.int64).copy()
        self.dist = np.asarray(state["dist"], dtype=float).copy()
        if state["vectors"] is not None:
            self.vectors = np.asarray(state["vectors"], dtype=np.float32).copy()
            self._proj = None if state["projection"] is None else np.asarray(state["projection"], np.float32).copy()
            self.dim = self.vectors.shape[1] if self._proj is None else self._proj.shape[1]
