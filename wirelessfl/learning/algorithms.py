"""The learning-algorithm seam: what the selected devices compute and how the server combines it.

Like Flower's ``Strategy`` the interface is narrow. An algorithm is a plain object with

* ``aggregation_weights(selected, q, num_devices) -> weights``: the server's weight for each
  selected device's delta, given the marginal inclusion probabilities q the scheduler used;
* ``round(trainer, selected, q, num_devices, round_idx) -> dict``: one round's learning work on
  the trainer (local updates, then aggregation); returns a few facts worth recording.

The engine calls ``round`` once per round with the devices that were drawn. Other algorithms
(FedShuffle, SAFARI, Per-FedAvg) implement the same two methods, typically by subclassing
:class:`FedAvg` and changing the weights or the local rule (``Trainer.local_updates`` accepts
per-device step counts and step sizes).
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from wirelessfl.learning.trainer import Trainer

__all__ = ["AGGREGATIONS", "Algorithm", "FedAvg", "Safari"]


AGGREGATIONS = ("unbiased", "mean", "data_size")


@runtime_checkable
class Algorithm(Protocol):
    """What the engine needs from a learning algorithm."""

    def aggregation_weights(self, selected: np.ndarray, q: np.ndarray, num_devices: int) -> np.ndarray: ...

    def round(self, trainer: Trainer, selected: np.ndarray, q: np.ndarray, num_devices: int, round_idx: int) -> dict: ...


class FedAvg:
    """FedAvg with unbiased aggregation under arbitrary participation probabilities (spec 002 sec. 1).

    x_{t+1} = x_t + server_lr * (1/N) * sum_{n selected} (1/q_n) (y_K^n - x_t).
    With server_lr = 1 (the paper) and q_n = 1 for all n this is plain full-participation FedAvg.

    ``aggregation="mean"``: x_{t+1} = x_t + server_lr * (1/|S|) sum_{n in S} (y_K^n - x_t), the
    unweighted average over the distinct devices that trained (spec 003 Algorithm 1, line 11; spec 000
    Alg. 1 for schedulers that choose their devices themselves, where q is unused).
    ``aggregation="data_size"``: weights server_lr |D_n| / sum_{j in S} |D_j| (``data_sizes`` needed).
    """

    def __init__(self, server_lr: float = 1.0, aggregation: str = "unbiased", data_sizes=None):
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation = {aggregation!r}: must be one of {', '.join(AGGREGATIONS)}")
        if aggregation == "data_size" and data_sizes is None:
            raise ValueError("aggregation 'data_size' needs data_sizes")
        self.server_lr = float(server_lr)
        self.aggregation = aggregation
        self.data_sizes = None if data_sizes is None else np.asarray(data_sizes, dtype=np.float64)

    def aggregation_weights(self, selected: np.ndarray, q: np.ndarray, num_devices: int) -> np.ndarray:
        """Weights server_lr / (N q_n) (or the mean / data-size shares), aligned with ``selected``.

        A device that appears more than once in ``selected`` counts once (the indicator 1_n, not
        the number of draws): its first occurrence gets the weight, later ones get 0.
        """
        selected = np.asarray(selected, dtype=np.int64).reshape(-1)
        first = np.zeros(selected.size, dtype=bool)
        first[np.unique(selected, return_index=True)[1]] = True
        if self.aggregation != "unbiased":
            raw = np.ones(selected.size) if self.aggregation == "mean" else self.data_sizes[selected]
            raw = np.where(first, raw, 0.0)
            return self.server_lr * raw / raw.sum() if raw.size else raw
        q = np.asarray(q, dtype=np.float64)
        if q.shape != (num_devices,):
            raise ValueError(f"q must have shape ({num_devices},), got {q.shape}")
        if selected.size and (selected.min() < 0 or selected.max() >= num_devices):
            raise ValueError(f"selected devices must lie in [0, {num_devices}), got {selected}")
        qs = q[selected]
        if np.any(~(qs > 0)):
            raise ValueError(f"selected devices need q > 0 for unbiased weights, got q = {qs}")
        return np.where(first, self.server_lr / (num_devices * qs), 0.0)

    def round(self, trainer: Trainer, selected: np.ndarray, q: np.ndarray, num_devices: int, round_idx: int) -> dict:
        """Train the distinct selected devices from x_t and apply the weighted sum of their deltas."""
        devices = np.unique(np.asarray(selected, dtype=np.int64))  # each device trains once
        weights = self.aggregation_weights(devices, q, num_devices)
        if devices.size:
            deltas = trainer.local_updates(devices, round_idx)
            trainer.aggregate(deltas, weights)
        return {"num_trained": int(devices.size), "weight_sum": float(weights.sum())}


class Safari(FedAvg):
    """SAFARI, server-assisted FedAvg (spec 003): client rounds are FedAvg rounds; a server round is
    SGD on the server's auxiliary set T and involves no device.

    Which kind a round is (Bernoulli(q)) is decided by the engine, which calls ``round`` for a
    client round and ``server_round`` for a server round. ``server_steps`` None: one epoch over T in
    minibatches of min(B, |T|) (the spec's default); 1: the paper's Algorithm 1 (one SGD step).
    ``server_lr`` None: the devices' step size (eta_s = eta_c = 0.1 in the paper).
    """

    def __init__(self, aux_indices: np.ndarray, server_lr: float | None = None,
                 server_steps: int | None = None, global_lr: float = 1.0, aggregation: str = "unbiased",
                 data_sizes=None):
        super().__init__(server_lr=global_lr, aggregation=aggregation, data_sizes=data_sizes)
        self.aux_indices = np.asarray(aux_indices, dtype=np.int64).reshape(-1)
        self.eta_s = None if server_lr is None else float(server_lr)
        self.server_steps = None if server_steps is None else int(server_steps)

    def server_round(self, trainer: Trainer, round_idx: int) -> dict:
        """x_{r+1} = x_r after SGD on T (no communication)."""
        steps = trainer.server_sgd(self.aux_indices, round_idx, steps=self.server_steps, lr=self.eta_s)
        return {"server_steps": steps}
