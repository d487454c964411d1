"""Edge servers under the event protocols and a cloud, synchronous or asynchronous
(hierarchy.tiers = "edge" with protocol.name = "semi_sync", "fedbuff" or "fedasync").

Every cell's edge server is an event engine of its own (:class:`EdgeEngine`) on one shared clock:
its cell's devices (the others are never available to it; an availability model of its own steps
them), its own protocol (the scenario's, with its options: FedBuff's concurrency and buffer are per
edge), scheduler, model, random streams (each stream keyed by the cell) and uplink (cells on one
sub-band share one, :class:`SharedHost`). Edges never wait for the cloud:

- After every ``cloud_every`` (κ2) of its aggregations an edge sends up what it learned since it
  last sent, Δ_c = x_c − b_c, and sets b_c ← x_c; the message takes the backhaul's T_bh(ℓ).
- The cloud applies the edges' Δ weighted by their devices' data, w_c = |D_c| / Σ |D_c'|:
  ``hierarchy.cloud = "sync"``: when every edge's next Δ is in, x ← x + Σ_c w_c Δ_c (from one start,
  HierFAVG's average of the edges' models); ``"async"``: each Δ as it arrives, x ← x + w_c Δ_c.
- It sends x back down (T_bh(ℓ)) to the edges whose Δ it applied. An edge that receives x for the
  Δ it sent when its model was s_c goes on from x with what it learned since:
  x_c ← x_c + (x − s_c); b_c and the models of later messages still on the way shift by the same.

So nothing an edge learned is lost or counted twice, however the messages cross. Rows of rounds.csv
come in the order they end: an edge's aggregation carries ``tier`` = "edge", ``edge``, ``edge_round``
(its own count, which version_started and version_applied in updates.csv count too); a cloud
aggregation ``tier`` = "cloud", ``edge`` (the edges it applied, space-separated), ``edge_round`` (the
cloud's count) and ``backhaul_s``. The stop rule, the evaluations (of the cloud's model) and the
checkpoints count cloud aggregations. Dispatch numbers (updates.csv's ``update``) are the cell plus
the number of cells times the edge's own count.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from ...config import limits
from ...des.clock import RANK_STOP, RANK_TIMER, Clock, priority
from ...fields import ConfigError
from ...network.backhaul import or_no_backhaul
from ...participation import ExcludedAvailability
from ..records.recorder import Recorder
from ..round.cloud import EdgeLearner, cloud_row, data_weights, edge_accuracy, tiers_summary
from ..round.parts import EvalRule, StopRule
from .aggregations import after_aggregation, evaluate_version, final_evaluation
from .engine import EventEngine, EventStall
from .flights import REPORTS

__all__ = ["EdgeEngine", "TieredEvents"]

PILOT_ROWS = Recorder.PILOT_ROWS
"""The edges' rows whose pace estimates the rows to come before the cloud's first aggregation (and
again at every power of two rows after), as the recorder's pilot estimates a time budget's rows."""
_MESSAGES = 2 ** 61
"""Backhaul messages are ordered after the timers at one instant, by their number."""


class EdgeEngine(EventEngine):
    """One edge server's event engine (see the module docstring); after each aggregation it tells
    the tiers (``on_aggregated``)."""

    def __init__(self, cell: int, cells: int, on_aggregated: Callable[["EdgeEngine"], None], parts, protocol,
                 **common):
        super().__init__(parts, protocol, stop=StopRule(), evaluate=EvalRule(at_start=False), **common)
        self.cell, self.on_aggregated = cell, on_aggregated
        self.flights.first, self.flights.step = cell, cells
        self.shared_uplink = None  # cells that interfere: the uplink every edge sends on (an EdgeUplink)

    def event_uplink(self):
        return self.shared_uplink if self.shared_uplink is not None else super().event_uplink()

    def aggregated(self) -> None:
        super().aggregated()
        self.on_aggregated(self)

    def _evaluate(self) -> None:
        """Nothing: the cloud's model is the one evaluated."""


class SharedHost:
    """The host of the one uplink that edges whose cells interfere send on
    (wirelessfl.network.InterferedUplinks): a call about an update goes to its edge's engine."""

    def __init__(self, tiers: "TieredEvents"):
        self.tiers = tiers
        self.env = tiers.env

    def _edge(self, seq: int) -> EdgeEngine:
        edges = self.tiers.edges
        return edges[(seq - REPORTS if seq >= REPORTS else seq) % len(edges)]  # numbered apart (Flights.first)

    def start_transmission(self, u) -> None:
        self._edge(u.seq).start_transmission(u)

    def transmitted(self, u, seconds: float) -> None:
        self._edge(u.seq).transmitted(u, seconds)

    def update(self, seq: int):
        return self._edge(seq).update(seq)

    def next_queue_place(self) -> int:
        self.tiers.queue_places += 1
        return self.tiers.queue_places


class EdgeUplink:
    """An edge's view of the shared uplink: its uploads go on it; its state is the tiers' to keep."""

    def __init__(self, shared):
        self.shared = shared
        self.transmit, self.on_air_until = shared.transmit, shared.on_air_until

    def state_dict(self) -> dict:
        return {}

    def load_state(self, state: dict) -> None:
        """Nothing: the tiers restore the shared uplink once every edge has its updates back."""


@dataclasses.dataclass
class Message:
    """A model's way on the backhaul: ``up`` an edge's Δ (and its model s_c as it sent it), else the
    cloud's model x down to it; it arrives at ``at_s``."""

    number: int
    at_s: float
    up: bool
    cell: int
    model: object = None  # up: Δ_c; down: x
    sent_as: object = None  # the edge's model when it sent (down: the one this x answers)


class TieredEvents:
    """Edge servers on the event engine and a cloud (see the module docstring). The runner calls it
    as it calls an engine: ``run``, ``now``, ``rounds_done``, ``state_dict``/``load_state``,
    ``summary``."""

    def __init__(self, parts, make_protocol: Callable[[], object], schedulers: list, *, streams: dict,
                 streams_of: Callable, stop: StopRule, evaluate: EvalRule, learner=None, on_round, on_eval, on_update,
                 on_cloud, after_round=None, cloud_every: int, synchronous: bool, backhaul,
                 availability_period_s: float, availability_of: Callable[[], object] = lambda: None):
        self.parts, self.learner, self.stop, self.eval_rule = parts, learner, stop, evaluate
        self.on_round, self.on_eval, self.on_cloud, self.after_round = on_round, on_eval, on_cloud, after_round
        self.cloud_every, self.synchronous, self.backhaul = cloud_every, synchronous, or_no_backhaul(backhaul)
        cells = parts.cells
        count = cells.count
        self.interfering = cells.interfering  # one uplink for every edge (SharedHost)
        self.streams = streams  # the run's own: the shared uplink's draws (interferers' gains, fading blocks)
        if self.interfering:
            cells.use_streams(streams, parts.fading)
        self.queue_places = 0  # places in the cells' queues (a resume rebuilds the processes in this order)
        self.restored_uplink: dict | None = None
        serving = cells.serving
        empty = [c for c in range(count) if not (serving == c).any()]
        if empty:  # its edge would never aggregate: a sync cloud would wait for it forever
            raise ConfigError(f"hierarchy.tiers = 'edge': cell {empty[0]} serves no device, so its edge server would "
                              "never aggregate; place devices in every cell (network.placement = 'per_cell' with "
                              "devices.count >= network.cells)")
        self.edges: list[EdgeEngine] = []
        for c in range(count):
            mine = serving == c
            edge_parts = dataclasses.replace(
                parts, scheduler=schedulers[c], cells=None,
                access=cells.accesses[c],
                availability=ExcludedAvailability(~mine, availability_of()))  # its own chain, on its own stream
            edge_learner = EdgeLearner(learner, int(mine.sum())) if learner is not None else None
            self.edges.append(EdgeEngine(c, count, self._edge_aggregated, edge_parts, make_protocol(),
                                         streams=streams_of(c), learner=edge_learner,
                                         availability_period_s=availability_period_s,
                                         on_round=lambda rec, c=c: self._edge_row(c, rec),
                                         on_eval=lambda row: None, on_update=on_update))
        self.weights = data_weights(learner, serving, count)  # the cloud weighs each edge's Δ by its data
        self.version = 0  # cloud aggregations so far
        self.rows = 0  # rows of rounds.csv so far
        self.messages: list[Message] = []  # on the backhaul
        self.numbered = 0  # messages so far (their order at one instant)
        self.waiting: list[list[Message]] = [[] for _ in range(count)]  # sync: each edge's Δ at the cloud, in order
        self.base = [None] * count  # b_c: each edge's model when it last sent (training runs)
        self.sent: list[list] = [[] for _ in range(count)]  # s_c of the messages each edge awaits an answer to
        self.last_cloud_s = 0.0
        self.stopping, self._settle_pending = False, False
        self.evals_at: list[int] = []
        self.start_s = 0.0
        self.env: Clock | None = None

    # --- what the runner reads -------------------------------------------------------------

    @property
    def rounds_done(self) -> int:
        return self.version

    @property
    def now(self) -> float:
        return float(self.env.now) if self.env is not None else self.start_s

    # --- the run ---------------------------------------------------------------------------

    def run(self) -> None:
        env = self.env = Clock(initial_time=self.start_s)
        self._done = env.event()
        fresh = not self.messages and self.version == 0 and self.rows == 0
        if fresh and self.learner is not None:
            for c, edge in enumerate(self.edges):
                edge.learner.params = self.learner.params
                self.base[c] = self.learner.params
            if self.eval_rule.at_start:
                self._evaluate()
        if self.stop.done(self.version, env.now):
            return
        if self.interfering:
            from ...network.interference import InterferedUplinks

            uplink = InterferedUplinks(SharedHost(self), self.parts.cells)
            for edge in self.edges:
                edge.shared_uplink = EdgeUplink(uplink)
        for edge in self.edges:
            edge.start(env)
        if self.restored_uplink is not None:  # once every edge has its updates back
            self.edges[0].shared_uplink.shared.load_state(self.restored_uplink)
            self.restored_uplink = None
        for m in self.messages:
            self._arm(m)
        if self.stop.time_budget_s is not None:
            env.at(max(self.stop.time_budget_s, env.now), priority(RANK_STOP)).callbacks.append(self.finish_run)
        if not env.run_until(self._done):
            raise EventStall(f"hierarchy.tiers: nothing left to happen at t = {env.now:.6g} s after {self.version} "
                             "cloud aggregations: no edge has a device in flight or a timer armed")
        for edge in self.edges:
            edge.wrap_up()
        final_evaluation(self)

    def finish_run(self, _=None) -> None:
        if not self.stopping:
            self.stopping = True
            for edge in self.edges:
                edge.stopping = True
            self._done.succeed()

    def _edge_row(self, cell: int, rec) -> None:
        """An edge's aggregation: the next row, labelled with its tier and edge."""
        rec.labels = {"tier": "edge", "edge": cell, "edge_round": rec.round}
        rec.round = self.rows
        self.rows += 1
        self.on_round(rec)
        if self.version == 0 and self.rows >= PILOT_ROWS and self.rows & (self.rows - 1) == 0:
            self._check_pace()

    def _check_pace(self) -> None:
        """Before the cloud's first aggregation, at the pace of the edges' first rows (and again at
        every power of two rows after): the rows they would make while the first Δ is on the
        backhaul. Edges never wait for the cloud, so a backhaul of 1e9 s is a run of ~1e11 rows."""
        if not self.backhaul.timed or self.stop.rounds is None:
            return
        horizon = self._transfer_s()
        if self.stop.time_budget_s is not None:
            horizon = min(horizon, self.stop.time_budget_s)
        h = self.backhaul
        field, value = (("hierarchy.backhaul_latency_s", h.latency_s) if h.latency_s >= horizon / 2
                        else ("hierarchy.backhaul_rate_bps", h.rate_bps))
        limits.check_pace(field, value, self.rows, float(self.env.now), horizon,
                          f"an edge's first update reaches the cloud after {horizon:.3g} s on the backhaul")

    # --- the backhaul ----------------------------------------------------------------------

    def _transfer_s(self) -> float:
        return self.backhaul.transfer_s(self.parts.downlink_bits)

    def _send(self, up: bool, cell: int, model=None, sent_as=None) -> None:
        m = Message(self.numbered, self.env.now + self._transfer_s(), up, cell, model, sent_as)
        self.numbered += 1
        self.messages.append(m)
        self._arm(m)

    def _arm(self, m: Message) -> None:
        event = self.env.at(max(m.at_s, self.env.now), priority(RANK_TIMER, _MESSAGES + m.number))
        event.callbacks.append(lambda _: self._arrived(m))

    def _arrived(self, m: Message) -> None:
        if self.stopping:
            return
        self.messages.remove(m)
        if m.up:
            self._at_cloud(m)
        else:
            self._at_edge(m)

    def _edge_aggregated(self, edge: EdgeEngine) -> None:
        """Every cloud_every aggregations an edge sends up what it learned since it last sent."""
        if self.stopping or edge.version % self.cloud_every:
            return
        c = edge.cell
        delta = sent_as = None
        if self.learner is not None:
            sent_as = edge.learner.params.clone()
            delta = sent_as - self.base[c]
            self.base[c] = sent_as
            self.sent[c].append(sent_as)
        self._send(True, c, delta, sent_as)

    def _at_cloud(self, m: Message) -> None:
        if not self.synchronous:
            self._aggregate([m])
            return
        self.waiting[m.cell].append(m)
        if all(self.waiting):
            self._aggregate([w.pop(0) for w in self.waiting])

    def _aggregate(self, arrived: list[Message]) -> None:
        """The cloud applies the edges' Δ (weighted by their data) and sends x back to each; where an
        evaluation is due, the row gives each edge's model as it sent it (``edge_accuracy``)."""
        now = float(self.env.now)
        due = self.learner is not None and self.eval_rule.due(self.version + 1, now)
        accuracy = edge_accuracy(self.learner, [m.sent_as for m in arrived]) if due else None
        if self.learner is not None:
            self.learner.params = self.learner.params + sum(self.weights[m.cell] * m.model for m in arrived)
        self.on_cloud(cloud_row(self.rows, self.last_cloud_s, now, len(arrived), " ".join(str(m.cell) for m in arrived),
                                self.version, self._transfer_s(), accuracy))
        self.rows += 1
        self.version += 1
        self.last_cloud_s = now
        for m in arrived:
            self._send(False, m.cell, self.learner.params if self.learner is not None else None, m.sent_as)
        if due:
            self._evaluate()
        after_aggregation(self, now)

    def _at_edge(self, m: Message) -> None:
        """The cloud's x for the Δ the edge sent as s_c: the edge goes on from x with what it learned since."""
        if self.learner is None:
            return
        c, edge = m.cell, self.edges[m.cell]
        sent = self.sent[c].pop(0)
        shift = m.model - sent
        edge.learner.params = edge.learner.params + shift
        self.base[c] = self.base[c] + shift
        self.sent[c] = [s + shift for s in self.sent[c]]

    def _evaluate(self) -> None:
        evaluate_version(self)

    # --- records and checkpoints ----------------------------------------------------------

    def summary(self, selected: int) -> dict:
        """summary.json's numbers of the tiers (as wirelessfl.sim.sync.tiers.TieredEngine.summary)."""
        return tiers_summary(self.version, self.edge_rounds(), selected)

    def edge_rounds(self) -> list[int]:
        """Each edge's aggregations so far, in cell order."""
        return [edge.version for edge in self.edges]

    def uplink_busy_s(self, now: float) -> float:
        """How long the edges' uplinks carried a model upload, summed over the cells."""
        return sum(edge.busy.busy_s(now) for edge in self.edges)

    @staticmethod
    def rows_in_state(state: dict) -> int:
        return int(state["tiers"]["rows"])

    def state_dict(self) -> dict:
        """Each edge's engine, scheduler and model, the cloud's count, what each edge sent and
        awaits, and the messages on the backhaul."""
        return {"rounds_done": self.version, "now_s": self.now, "target_reached": self.stop.reached,
                "eval_next_s": self.eval_rule.next_s, "evals_at": list(self.evals_at),
                "tiers": {"rows": self.rows, "numbered": self.numbered, "last_cloud_s": self.last_cloud_s,
                          "edges": [edge.state_dict() for edge in self.edges],
                          "schedulers": [edge.parts.scheduler.state_dict() for edge in self.edges],
                          "models": [edge.learner.params if edge.learner is not None else None
                                     for edge in self.edges],
                          "base": list(self.base), "sent": [list(s) for s in self.sent],
                          "waiting": [[m.number for m in w] for w in self.waiting],
                          "messages": [dataclasses.asdict(m) for m in [*self.messages,
                                                                      *(m for w in self.waiting for m in w)]],
                          **({"uplink": self.edges[0].shared_uplink.shared.state_dict(),
                              "queue_places": self.queue_places,
                              "streams": {name: g.bit_generator.state for name, g in self.streams.items()},
                              "cells": self.parts.cells.state_dict()} if self.interfering else {})}}

    def load_state(self, state: dict) -> None:
        tiers = state["tiers"]
        self.version, self.start_s = int(state["rounds_done"]), float(state["now_s"])
        self.stop.reached, self.eval_rule.next_s = bool(state["target_reached"]), float(state["eval_next_s"])
        self.evals_at = list(state["evals_at"])
        self.rows, self.numbered = int(tiers["rows"]), int(tiers["numbered"])
        self.last_cloud_s = float(tiers["last_cloud_s"])
        for edge, kept, scheduler, model in zip(self.edges, tiers["edges"], tiers["schedulers"], tiers["models"]):
            edge.load_state(kept)
            edge.parts.scheduler.load_state(scheduler)
            if edge.learner is not None:
                edge.learner.params = model
        self.base, self.sent = list(tiers["base"]), [list(s) for s in tiers["sent"]]
        by_number = {m["number"]: Message(**m) for m in tiers["messages"]}
        self.waiting = [[by_number.pop(n) for n in w] for w in tiers["waiting"]]
        self.messages = sorted(by_number.values(), key=lambda m: m.number)
        for edge in self.edges:  # the engine's own start time, as each edge's state holds it
            edge.start_s = self.start_s
        if self.interfering:  # the shared uplink, its queue order and the cells' SINR losses
            self.restored_uplink, self.queue_places = tiers["uplink"], int(tiers["queue_places"])
            self.parts.cells.load_state(tiers["cells"])
            for name, g in self.streams.items():
                g.bit_generator.state = tiers["streams"][name]
