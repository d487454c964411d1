"""What an engine hands the recorder for each row of rounds.csv: a :class:`RoundRecord` (a round of
sync, semi_sync, a server round or an edge's round, kept as arrays over its selected devices) or an
:class:`AggregationRecord` (an aggregation of updates that arrived one by one, kept as the updates).
The engines fill them (wirelessfl.sim.round.pipeline, wirelessfl.sim.events.server); the recorder
reads them, and knows nothing of the engines.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...decisions import Decision

__all__ = ["AggregationRecord", "NO_LABELS", "RoundRecord"]


@dataclass
class RoundRecord:
    """Timing facts of one round; the engine fills it, the recorder stores it."""

    round: int
    t_start: float
    t_end: float
    downlink_s: float
    comp_s: float          # longest computation among the selected devices
    comm_s: float          # sum of the selected devices' airtimes, plus the pre-round uploads' time
    selected: np.ndarray   # distinct devices, ascending
    upload_order: np.ndarray  # devices in the order their uploads started
    airtime_s: np.ndarray  # per selected device (same order as ``selected``)
    energy_j: np.ndarray   # transmit energy per selected device: P x time actually on the air
    gains: np.ndarray
    decision: Decision
    compute_energy_j: np.ndarray | None = None  # per selected device, for the computation done
    arrived: np.ndarray | None = None    # per selected device: upload complete by the deadline
    dropped: np.ndarray | None = None    # per selected device: its update is gone (None: not arrived);
                                         # semi_sync's late uploads, carried to a later aggregation, are not
    available: np.ndarray | None = None  # per device (N,): could be scheduled (None: all)
    server_round: bool = False  # the server trained alone (no device took part)
    server_s: float = 0.0  # that round's server computation time
    idle_s: float = 0.0  # a round in which nothing took time lasts idle_round_s (a frame): the clock moves
    extra_airtime_s: float = 0.0  # uplink time of traffic other than the models (pre-uploads, piggy-backs)
    extra_energy_j: float = 0.0   # transmit energy of the pre-round uploads (all devices that sent)
    metrics: dict = field(default_factory=dict)  # the algorithm's numbers of this round
    ready_s: np.ndarray | None = None   # per selected device: when its computation ended
    tx_start: np.ndarray | None = None  # per selected device: when its upload started (nan: never)
    tx_end: np.ndarray | None = None    # and ended, where that is not tx_start + airtime (None: it is)
    attempts: np.ndarray | None = None  # per selected device: transmissions of its packets (None: one each)
    power: np.ndarray | None = None     # per selected device, the power it sent at (None: the decision's)
    q: np.ndarray | None = None         # likewise (NaN: dispatched, not drawn)
    staleness: np.ndarray | None = None  # per update applied (None: all fresh, sync)
    per_update: bool = False  # device totals come from the update records (event protocols)
    emptied_s: np.ndarray | None = None  # per selected device: when its battery ran out (NaN: it did not)
    downlink: Any = None  # what the timed downlink did for each selected device (wirelessfl.access.Delivery; None: fixed)
    labels: dict = field(default_factory=dict)  # columns of the row's own: an edge round's tier and edge, backhaul_s
    upload_counts: np.ndarray | None = None  # per selected device, the uplink's own counts (sync.uplink.upload_counts)
    bits: Any = 0.0  # the uploads' bits on the air: one number, or one per selected device (piggy-backs)


NO_LABELS: dict = {}
"""An aggregation's row without columns of its own (shared: a record with some gets a dict of its own)."""


class AggregationRecord:
    """One aggregation of updates that arrived one by one (the event protocols' ``server.apply``):
    the record of a row of rounds.csv, kept as the updates themselves (their rows are in
    updates.csv) rather than as arrays, so that an aggregation of one update costs little.

    round: the server version it produced - 1; t_start: the previous aggregation; updates: those
    applied, in arrival order (wirelessfl.sim.events.flight.Update, settled); staleness: one per update;
    info: the dispatch rule's latest facts; available: the availability now (None: all) and
    available_since: names that availability (it changes only with a step of the availability model)."""

    __slots__ = ("round", "t_start", "t_end", "downlink_s", "updates", "staleness", "metrics", "info", "available",
                 "available_since", "labels")
    per_update = True

    def __init__(self, round: int, t_start: float, t_end: float, downlink_s: float, updates: list, staleness: list,
                 metrics: dict, info: dict, available: np.ndarray | None, available_since):
        self.round, self.t_start, self.t_end, self.downlink_s = round, t_start, t_end, downlink_s
        self.updates, self.staleness, self.metrics, self.info = updates, staleness, metrics, info
        self.available, self.available_since = available, available_since
        self.labels = NO_LABELS  # columns of the row's own: an edge server's tier, edge and edge_round
