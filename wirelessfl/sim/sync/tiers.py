"""Edge servers and a cloud (hierarchy.tiers = "edge", HierFAVG): every cell's edge server runs
sync rounds on its own devices with its own scheduler and its own model, the cells in parallel on
one clock; after ``cloud_every`` rounds each edge sends its model up the backhaul, the cloud
averages the edges' models weighted by their devices' data, and sends the average back down, where
every edge continues from it.

The closed-form round of one edge is the sync engine's (``Engine._round`` with an :class:`Edge`).
Rows of rounds.csv come in the order they end: an edge round's row carries ``tier`` = "edge", its
``edge`` (the cell) and ``edge_round`` (that edge's count); a cloud aggregation's row ``tier`` =
"cloud", ``edge_round`` its count, ``backhaul_s`` the up transfer and, where an evaluation is due,
``edge_accuracy`` each edge's model's test accuracy as it came up. ``round`` numbers the rows
(and an edge round's updates in updates.csv carry its number as version_started). The
stop rule and the evaluations count cloud aggregations; checkpoints are taken at them, where every
edge holds the cloud's model."""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ...access.base import TimesEachDevice
from ...capabilities import provides
from ...network.backhaul import or_no_backhaul
from ..round.cloud import EdgeLearner, cloud_row, data_weights, edge_accuracy, tiers_summary
from .engine import Engine

__all__ = ["Edge", "EdgeLearner", "TieredEngine"]


@dataclasses.dataclass
class Edge:
    """One edge server: its cell, its parts (its own scheduler), its learner (None: timing only),
    its devices (a mask), its rounds so far. The scope of its rounds (wirelessfl.sim.sync.engine.RoundScope):
    parts, learner, ``available`` and ``labels``."""

    cell: int
    parts: Any
    learner: EdgeLearner | None
    devices: np.ndarray
    rounds: int = 0

    def available(self) -> np.ndarray:
        """Who its scheduler may draw: its cell's devices."""
        return self.devices.copy()

    @property
    def labels(self) -> dict:
        return {"tier": "edge", "edge": self.cell, "edge_round": self.rounds}


class TieredEngine(Engine):
    """The sync engine with an edge server per cell and a cloud (see the module docstring).

    schedulers: one per cell; cloud_every: edge rounds per cloud aggregation; backhaul: the sites'
    links to the cloud (wirelessfl.network.Backhaul) or None; on_cloud: the recorder's callback for a
    cloud aggregation's row."""

    def __init__(self, parts, *, schedulers: list, cloud_every: int, backhaul, on_cloud, **common):
        super().__init__(parts, **common)
        cells = parts.cells
        serving, count = cells.serving, cells.count
        learner = self.learner
        # an uplink timed per device (satellite passes) keeps its round's geometry: each edge its cell's own
        own = [{"access": cells.accesses[c]} if provides(cells.accesses[c], TimesEachDevice)
               else {} for c in range(count)]
        self.edges = [Edge(c, dataclasses.replace(parts, scheduler=schedulers[c], **own[c]),
                           EdgeLearner(learner, int((serving == c).sum())) if learner is not None else None,
                           serving == c) for c in range(count)]
        self.weights = data_weights(learner, serving, count)  # the cloud weighs each edge's model by its data
        self.cloud_every, self.backhaul, self.on_cloud = cloud_every, or_no_backhaul(backhaul), on_cloud
        self.rows = 0  # rows of rounds.csv so far (edge rounds and cloud aggregations)
        self.started = 0  # edge rounds begun (each one's index keys its draws)
        report = self.on_round

        def numbered(rec) -> None:  # an edge round's row gets the next number: rows come as rounds end
            rec.round = self.rows  # (its updates' version_started in updates.csv too)
            self.rows += 1
            report(rec)

        self.on_round = numbered

    def _transfer_s(self) -> float:
        return self.backhaul.transfer_s(self.parts.downlink_bits)

    def _step(self):
        """Every edge's period, side by side, then the cloud's aggregation (evaluated when due)."""
        start = self.env.now
        yield self.env.all_of([self.env.process(self._edge_period(edge)) for edge in self.edges])
        due = self.learner is not None and self.eval_rule.due(self.rounds_done + 1, self.env.now)
        self._cloud(start, self._edge_accuracy() if due else None)
        return due

    def _edge_period(self, edge: Edge):
        """An edge between two cloud aggregations: the cloud's model down (after the first), its
        rounds, its model up."""
        if self.rounds_done > 0 and self._transfer_s() > 0:
            yield self.env.timeout(self._transfer_s())
        for _ in range(self.cloud_every):
            index, self.started = self.started, self.started + 1
            yield from self._round(index, edge)
            edge.rounds += 1
        if self._transfer_s() > 0:
            yield self.env.timeout(self._transfer_s())

    def _edge_accuracy(self) -> list[float]:
        """Each edge's model's test accuracy, as its edge sends it up (before the cloud averages)."""
        return edge_accuracy(self.learner, [edge.learner.params for edge in self.edges])

    def _cloud(self, start: float, edge_accuracy: list[float] | None = None) -> None:
        """The cloud averages the edges' models (weighted by their devices' data); every edge goes on
        from the average; one row of rounds.csv (with each edge's model's accuracy when an evaluation
        is due: ``edge_accuracy``, space-separated in cell order)."""
        if self.learner is not None:
            cloud = sum(w * edge.learner.params for w, edge in zip(self.weights, self.edges))
            self.learner.params = cloud
            for edge in self.edges:
                edge.learner.params = cloud
        self.on_cloud(cloud_row(self.rows, start, float(self.env.now), len(self.edges), "", self.rounds_done,
                                self._transfer_s(), edge_accuracy))
        self.rows += 1
        self.rounds_done += 1

    def state_dict(self) -> dict:
        """The sync engine's, plus the rows, the edge rounds and each edge's scheduler (every edge
        holds the cloud's model: the learner's)."""
        return {**super().state_dict(), "tiers": {
            "rows": self.rows, "started": self.started, "edge_rounds": [e.rounds for e in self.edges],
            "schedulers": [e.parts.scheduler.state_dict() for e in self.edges]}}

    def summary(self, selected: int) -> dict:
        """summary.json's numbers of the tiers: ``tiers`` (cloud aggregations, each edge's rounds) and
        the devices per edge round (``selected``: the devices the rounds drew, in all)."""
        return tiers_summary(self.rounds_done, self.edge_rounds(), selected)

    def edge_rounds(self) -> list[int]:
        """Each edge's rounds so far, in cell order."""
        return [e.rounds for e in self.edges]

    @staticmethod
    def rows_in_state(state: dict) -> int:
        """The rows of rounds.csv a state stands for: edge rounds and cloud aggregations."""
        return int(state["tiers"]["rows"])

    def load_state(self, state: dict) -> None:
        super().load_state(state)
        tiers = state["tiers"]
        self.rows, self.started = int(tiers["rows"]), int(tiers["started"])
        for edge, rounds, kept in zip(self.edges, tiers["edge_rounds"], tiers["schedulers"]):
            edge.rounds = int(rounds)
            edge.parts.scheduler.load_state(kept)

    def run(self) -> None:
        """Every edge starts from the learner's model (the initial one, or after a resume the cloud's
        the checkpoint holds, restored after the engine's state), then the loop."""
        for edge in self.edges:
            if edge.learner is not None:
                edge.learner.params = self.learner.params
        super().run()
