"""Edge servers and the cloud above them (hierarchy.tiers = "edge"), what both tiered engines share:
the sync one (wirelessfl.sim.sync.tiers) and the event one (wirelessfl.sim.events.tiers) differ in
when the cloud aggregates, not in how an edge trains on a model of its own (:class:`EdgeLearner`),
how the cloud weighs the edges, what its row of rounds.csv holds, how it reads the edges' accuracy,
or what it adds to the summary."""
from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["EdgeLearner", "cloud_row", "data_weights", "edge_accuracy", "tiers_summary"]


class EdgeLearner:
    """The training side as one edge server has it: its own model, averaged over its ``num_devices``
    devices (the learner's calls run on it, and the learner's own model is left as it was)."""

    def __init__(self, learner, num_devices: int):
        self.learner, self.num_devices = learner, num_devices
        self.params = learner.params

    def _on_own_model(self, call, *args, **kwargs):
        kept, self.learner.params = self.learner.params, self.params
        try:
            out = call(*args, **kwargs)
            self.params = self.learner.params
        finally:
            self.learner.params = kept
        return out

    def train_round(self, selected: np.ndarray, decision, round_idx: int) -> dict:
        # unbiased weights 1 / (N_edge q_n) over the edge's devices: q scaled by N_edge / N, as the
        # algorithm weighs by 1 / (N q_n) over all N
        scaled = dataclasses.replace(decision, q=decision.q * (self.num_devices / len(decision.q)))
        return self._on_own_model(self.learner.train_round, selected, scaled, round_idx)

    def reports(self, request, round_idx: int):
        return self._on_own_model(self.learner.reports, request, round_idx)

    def uplink(self, facts) -> None:
        self.learner.uplink(facts)

    def local_updates(self, devices: np.ndarray, key: int, *start) -> list:
        """Event edges: the deltas of ``devices`` trained from this edge's model (or ``start``)."""
        return self._on_own_model(self.learner.local_updates, devices, key, *start)

    def apply_updates(self, devices: np.ndarray, deltas: list, weights: np.ndarray, staleness: np.ndarray,
                      starts: list | None = None) -> dict:
        """Event edges: one aggregation into this edge's model."""
        return self._on_own_model(self.learner.apply_updates, devices, deltas, weights, staleness, starts)

    def sample_counts(self):
        return self.learner.sample_counts()


def data_weights(learner, serving: np.ndarray, count: int) -> list[float]:
    """Each edge's weight in the cloud's average: its devices' share of the training samples (timing
    only: of the devices)."""
    if learner is not None:
        samples = np.asarray(learner.sample_counts(), dtype=float)
        data = np.array([samples[serving == c].sum() for c in range(count)])
    else:
        data = np.array([(serving == c).sum() for c in range(count)], dtype=float)
    return (data / data.sum()).tolist()


def edge_accuracy(learner, models: list) -> list[float]:
    """The test accuracy of each of ``models`` (parameters), the learner's own model kept as it was."""
    kept, out = learner.params, []
    for params in models:
        learner.params = params
        out.append(float(learner.evaluate()["accuracy"]))
    learner.params = kept
    return out


def cloud_row(row: int, t_start: float, t_end: float, updates: int, edges: str, edge_round: int, backhaul_s: float,
              accuracy: list[float] | None) -> dict:
    """A cloud aggregation's row of rounds.csv: ``updates`` edges' models (``edges``: which, or "" for
    all), the aggregations before it (``edge_round``), the backhaul's one-way time, and each edge's
    model's accuracy where an evaluation is due (space-separated; None: not due)."""
    return {"round": row, "t_start": t_start, "t_end": t_end, "downlink_s": 0.0, "comp_s": 0.0, "comm_s": 0.0,
            "num_selected": 0, "energy_j": 0.0, "num_updates": updates, "tier": "cloud", "edge": edges,
            "edge_round": edge_round, "backhaul_s": backhaul_s,
            "edge_accuracy": "" if accuracy is None else " ".join(f"{a:.6g}" for a in accuracy)}


def tiers_summary(cloud_aggregations: int, edge_rounds: list[int], selected: int) -> dict:
    """summary.json's numbers of the tiers: ``tiers`` (cloud aggregations, each edge's rounds) and the
    devices per edge round (``selected``: the devices the rounds drew, in all)."""
    return {"tiers": {"cloud_aggregations": cloud_aggregations, "edge_rounds": edge_rounds},
            "mean_distinct_per_round": selected / max(sum(edge_rounds), 1)}
