"""The server of the event engine: the model's version, when each device's update was last applied,
when the last aggregation was; it trains the updates started from the current model (in one
batched call per work key, just before the aggregation that needs them), applies a set of updates,
and settles each update's fate (its energies and its row of updates.csv)."""
from __future__ import annotations

import numpy as np

from ...des import ARRIVED, FINISHED
from ...outcomes import Outcome
from ..records.round_record import AggregationRecord
from ..round.pipeline import tell_uplink
from .flight import Update, arrived_facts

__all__ = ["Server"]


class Server:
    """The model's version and its aggregations, for the event engine (its collaborator)."""

    def __init__(self, engine, num_devices: int):
        self.engine = engine
        self.version = 0
        self.last_applied = np.zeros(num_devices, dtype=np.int64)  # the version a device's last applied update made
        self.last_aggregation_s = 0.0
        self.on_air_until = None  # the uplink's count of a stopped upload's time on the air, if it keeps one

    def use_uplink(self, uplink) -> None:
        """The run's uplink: its optional ``on_air_until(u, t)`` (EventUplink's docstring) says how
        long an upload stopped at t was on the air (default: since it began)."""
        self.on_air_until = getattr(uplink, "on_air_until", None)

    def advance(self, now: float) -> None:
        """An aggregation is done: the next version."""
        self.version += 1
        self.last_aggregation_s = now

    def train_pending(self, exclude=()) -> None:
        """Compute the updates of the devices started since the last aggregation: one batched call
        per work key, from the current model, or from the older model a device started from when it
        missed the current one (link.downlink_miss = "stale")."""
        e = self.engine
        if e.learner is None or not e.flights.untrained:
            return
        skip = {u.seq for u in exclude}
        pending = [u for u in e.flights.untrained if u.phase != FINISHED and u.seq not in skip]
        e.flights.untrained = []
        groups: dict[tuple, list[Update]] = {}
        for u in pending:
            groups.setdefault((u.key, u.version), []).append(u)
        for (key, version), group in groups.items():
            start = None if version == self.version else group[0].start  # a stale start: its older model
            devices = np.array([u.device for u in group], dtype=np.int64)
            # a learner without the start argument is asked only for the current model
            deltas = e.learner.local_updates(devices, key) if start is None else \
                e.learner.local_updates(devices, key, start)
            for u, delta in zip(group, deltas):
                u.delta = delta.clone()
                if e.keep_start and start is None:
                    u.start = e.learner.params

    def apply(self, updates: list, weights, *, mix: bool = False) -> None:
        """One aggregation: the algorithm applies ``updates`` with the protocol's ``weights`` (one
        per update; ``mix``: toward each device's model rather than by its delta), one row of
        rounds.csv, then the engine counts the version (``aggregated``)."""
        e = self.engine
        self.train_pending()
        v = self.version
        staleness = [v - u.version for u in updates]
        metrics = {}
        if e.learner is not None and updates:
            devices = np.array([u.device for u in updates], dtype=np.int64)
            tell_uplink(e.learner, arrived_facts(updates, e.parts.access))
            metrics = e.learner.apply_updates(devices, [u.delta for u in updates], np.array(weights, dtype=float),  # a copy: protocols keep theirs
                                              np.array(staleness, dtype=np.int64),
                                              [u.start for u in updates] if mix else None)
        now = e.env.now
        for u in updates:
            u.version_applied = v
            self.last_applied[u.device] = v + 1
            self.settle(u, Outcome.APPLIED, now)
        # the applied updates, in arrival order (updates.csv has every upload)
        downlink_s = e.parts.downlink_s  # timed: the mean over the updates applied
        if e.parts.downlink.timed and updates:
            downlink_s = sum(u.downlink_s for u in updates) / len(updates)
        e.on_round(AggregationRecord(v, self.last_aggregation_s, now, downlink_s, updates, staleness,
                                     metrics, e.dispatcher.info, e.available, e.availability.since))
        e.aggregated()

    def settle(self, u: Update, outcome: str, t: float) -> None:
        """``u``'s fate is known at time ``t``: its energies, its row, and no more references to it."""
        e = self.engine
        u.outcome = outcome
        e.flights.release(u)
        if u.phase >= ARRIVED or outcome == Outcome.APPLIED:
            u.phase = FINISHED
        if outcome not in (Outcome.APPLIED, Outcome.STALE) and u.tx_end_s != u.tx_end_s:
            u.lost_s = t
        if u.tx_end_s == u.tx_end_s:  # the whole upload: P x airtime
            u.energy_j = u.power * u.airtime_s
        elif u.tx_start_s == u.tx_start_s:  # stopped on the air: until now, or as its uplink counts it
            until = self.on_air_until
            u.energy_j = u.power * (until(u, t) if until is not None else t - u.tx_start_s)
        else:  # never on the air
            u.energy_j = 0.0
        if u.air_before_s:  # transmissions a handover restarted spent power too
            u.energy_j += u.power * u.air_before_s
        if t >= u.compute_end_s or not u.compute_s > 0:
            u.compute_energy_j = u.compute_energy_full_j
        else:
            u.compute_energy_j = u.compute_energy_full_j * min(max((t - u.compute_start_s) / u.compute_s, 0.0), 1.0)
        e.on_update(u)
        u.delta = u.start = None

    def state_dict(self) -> dict:
        """The version, when each device was last applied and when the last aggregation was."""
        return {"rounds_done": self.version, "last_applied": self.last_applied.copy(),
                "last_aggregation_s": self.last_aggregation_s}

    def load_state(self, state: dict) -> None:
        """Restore them."""
        self.version = int(state["rounds_done"])
        self.last_applied = np.asarray(state["last_applied"], dtype=np.int64).copy()
        self.last_aggregation_s = float(state["last_aggregation_s"])
