"""The rows of updates.csv as the updates' fates become known (a sync round's at once, an event
protocol's one by one) and the counts summary.json gives of them."""
from __future__ import annotations

import numpy as np

from ...outcomes import Outcome
from .device_totals import DeviceTotals
from .round_record import RoundRecord
from .update_log import OUTCOMES, UpdateLog, round_outcomes, union_length

__all__ = ["UpdateRows"]


class UpdateRows:
    """updates.csv (``log``) and its counts: ``stats`` (uploads, applied, staleness_sum, airtime_s,
    bits, and busy_s: the sync rounds' busy uplink) and ``outcomes`` (its rows by outcome). An event
    protocol's update also adds to the per-device totals (``devices``); a sync round's devices are
    counted with its row.

    ``downlink``, ``backhaul``: updates.csv has their columns; ``upload_counts``: the uplink's own
    counts of an event protocol's update (its ``upload_columns``: MCS, collisions, ...; None: none)."""

    def __init__(self, log: UpdateLog, devices: DeviceTotals, downlink: bool = False, backhaul: bool = False,
                 upload_counts=None):
        self.log = log
        self.devices = devices
        self.downlink = downlink
        self.backhaul = backhaul
        self.upload_counts = upload_counts
        self.stats = {"applied": 0, "staleness_sum": 0, "uploads": 0, "airtime_s": 0.0, "bits": 0.0}
        self.outcomes = dict.fromkeys(OUTCOMES, 0)

    def write_round(self, rec: RoundRecord) -> None:
        """The rows of a sync round: one per selected device."""
        sel = rec.selected
        if rec.server_round or not len(sel):
            return
        k = len(sel)
        arrived = rec.arrived if rec.arrived is not None else np.ones(k, dtype=bool)
        comp_energy = rec.compute_energy_j if rec.compute_energy_j is not None else np.zeros(k)
        tx_start, airtime = rec.tx_start, rec.airtime_s
        stats = self.stats
        self.log.write_round(stats["uploads"], sel, rec.round, rec.t_start, rec.ready_s, tx_start, airtime,
                             arrived, rec.energy_j, comp_energy, rec.gains[sel],
                             rec.decision.power[sel] if rec.power is None else rec.power,
                             rec.t_end, rec.tx_end, rec.attempts, rec.emptied_s, rec.downlink, rec.upload_counts,
                             rec.bits)
        stats["uploads"] += k
        stats["bits"] = stats.get("bits", 0.0) + float(np.sum(np.broadcast_to(rec.bits, sel.shape)))
        full_end = tx_start + airtime if rec.tx_end is None else rec.tx_end  # each upload's end, had it gone on
        # the round's busy uplink: the union of its uploads' times on the air (rounds do not overlap)
        with np.errstate(invalid="ignore"):
            stats["busy_s"] = stats.get("busy_s", 0.0) + union_length(tx_start, np.minimum(full_end, rec.t_end))
        if arrived.all():
            stats["applied"] += k
            self.outcomes[Outcome.APPLIED] += k
            stats["airtime_s"] += float(airtime.sum())
        else:  # lost uploads held the band for their transmissions, dropped ones until the deadline
            for outcome, count in round_outcomes(rec, arrived, full_end).items():
                self.outcomes[outcome] += count
            stats["applied"] += int(arrived.sum())
            with np.errstate(invalid="ignore"):
                on_air = np.where(full_end <= rec.t_end, airtime,
                                  np.where(np.isnan(tx_start), 0.0, rec.t_end - tx_start))
            stats["airtime_s"] += float(on_air.sum())

    def on_update(self, u) -> None:
        """An event protocol's update whose fate is known (``u`` has the attributes of
        wirelessfl.sim.events.flight.Update): its row, and the per-device totals."""
        stats = self.stats
        stats["uploads"] += 1
        stats["bits"] = stats.get("bits", 0.0) + u.bits
        if u.tx_start_s == u.tx_start_s:
            stats["airtime_s"] += (u.tx_end_s if u.tx_end_s == u.tx_end_s else u.lost_s) - u.tx_start_s
        self.outcomes[u.outcome] = self.outcomes.get(u.outcome, 0) + 1
        if u.outcome == Outcome.APPLIED:
            stats["applied"] += 1
            stats["staleness_sum"] += u.version_applied - u.version
        # dispatched, not drawn: its power counts toward the time average (drawn ones: the round's P q),
        # once it reached the air (a task lost while it received or computed never sent at that power)
        on_air = u.tx_start_s == u.tx_start_s
        self.devices.add_update(u.device, u.energy_j, u.compute_energy_j, u.power if u.q != u.q and on_air else 0.0,
                                u.outcome != Outcome.APPLIED and u.outcome != Outcome.IN_FLIGHT)
        tail = (u.downlink_s, u.downlink_attempts, int(u.received)) if self.downlink else ()
        if self.backhaul:
            tail += (u.model_at_site_s - u.dispatch_s, u.at_cloud_s - u.tx_end_s)
        self.log.write(u, tail, self.upload_counts(u) if self.upload_counts is not None else ())

    def state_dict(self) -> dict:
        """The checkpoint's update records: the file's (UpdateLog.state_dict) and the counts."""
        return {"updates": self.log.state_dict(), "update_stats": dict(self.stats), "outcomes": dict(self.outcomes)}

    @staticmethod
    def counts_problem(state: dict) -> str | None:
        """Why a checkpoint's update records cannot continue (None: they can): written by a version
        that kept none, or no bits column in its updates.csv to append to."""
        if "updates" not in state or not isinstance(state.get("update_stats"), dict) \
                or not isinstance(state.get("outcomes"), dict):
            return "the checkpoint has no update records (written by an earlier version)"
        if "bits" not in state["update_stats"]:
            return "the checkpoint's updates.csv has no bits column (written by an earlier version)"
        return None

    def load_state(self, state: dict) -> None:
        """The counts at the checkpoint, and updates.csv cut back to it."""
        self.stats = dict(state["update_stats"])
        self.outcomes = {str(k): int(v) for k, v in state["outcomes"].items()}
        self.log.load_state(state["updates"])
