"""The cloud's logic both tiered engines share (wirelessfl.sim.round.cloud), by hand."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from wirelessfl.sim.round.cloud import cloud_row, data_weights, edge_accuracy, tiers_summary


def test_edges_weigh_by_their_devices_data_or_their_devices():
    serving = np.array([0, 0, 1, 2, 2, 2])
    learner = SimpleNamespace(sample_counts=lambda: [10, 30, 20, 10, 10, 20])
    assert data_weights(learner, serving, 3) == [0.4, 0.2, 0.4]  # 40, 20, 40 of 100 samples
    assert data_weights(None, serving, 3) == [2 / 6, 1 / 6, 3 / 6]


def test_edge_accuracy_evaluates_each_model_and_keeps_the_learners():
    learner = SimpleNamespace(params=7)
    learner.evaluate = lambda: {"accuracy": learner.params / 10}
    assert edge_accuracy(learner, [1, 5]) == [0.1, 0.5] and learner.params == 7


def test_the_cloud_row_and_the_summary():
    row = cloud_row(9, 1.5, 2.0, 2, "0 2", 3, 0.25, [0.1234567, 0.5])
    assert (row["round"], row["num_updates"], row["edge"], row["edge_round"], row["edge_accuracy"]) == \
        (9, 2, "0 2", 3, "0.123457 0.5")
    assert row["tier"] == "cloud" and row["energy_j"] == 0.0 and cloud_row(0, 0, 0, 1, "", 0, 0, None)["edge_accuracy"] == ""
    assert tiers_summary(4, [3, 5], 24) == {"tiers": {"cloud_aggregations": 4, "edge_rounds": [3, 5]},
                                            "mean_distinct_per_round": 3.0}
