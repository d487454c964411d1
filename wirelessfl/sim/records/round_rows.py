"""The row of rounds.csv of a round (sync, semi_sync, a server round, an edge's round): its
ROUND_COLUMNS from the arrays of its RoundRecord. An aggregation of updates that arrived one by one
has its own (aggregation_rows)."""
from __future__ import annotations

import math

import numpy as np

from .columns import floats, ids
from .round_record import RoundRecord

__all__ = ["round_row"]


def round_row(rec: RoundRecord, num_devices: int) -> tuple[dict, np.ndarray | None]:
    """A round's ROUND_COLUMNS, and the selected devices whose uploads did not arrive (None: all
    did); ``num_devices``: the devices of the run (available where the record says nothing)."""
    d = rec.decision
    sel = rec.selected
    power = d.power[sel] if rec.power is None else rec.power
    row = {
        "round": rec.round, "t_start": rec.t_start, "t_end": rec.t_end,
        "downlink_s": rec.downlink_s, "comp_s": rec.comp_s, "comm_s": rec.comm_s,
        "num_selected": len(sel), "selected": ids(sel), "upload_order": ids(rec.upload_order),
        "airtime_s": floats(rec.airtime_s),
        "energy_j": float(rec.energy_j.sum()),
        # sum / size: np.mean's value at a fraction of its cost
        "power_mean": float(power.sum() / len(sel)) if len(sel) else 0.0,
        "q_selected": floats(d.q[sel]) if rec.q is None else floats(rec.q),
        # no round decision (dispatch protocols): the dispatch rule's queues, if it keeps any
        "queue_mean": (float(d.queue.sum() / d.queue.size) if d.queue is not None and d.queue.size
                       else d.info.get("queue_mean", 0.0)),
        "objective": d.info.get("objective", math.nan),
    }
    comp_energy = rec.compute_energy_j
    arrived = rec.arrived
    lost = None if arrived is None or arrived.all() else sel[~arrived]  # usually nobody
    # the devices whose updates are gone (semi_sync: not those still under way, carried to a later round)
    gone = lost if rec.dropped is None or lost is None else sel[rec.dropped]
    available = rec.available
    staleness = rec.staleness
    applied = len(sel) - (0 if lost is None else len(lost)) if staleness is None else len(staleness)
    row.update(compute_energy_j=float(comp_energy.sum()) if comp_energy is not None else 0.0,
               num_available=num_devices if available is None else int(available.sum()),
               num_arrived=len(sel) if lost is None else len(sel) - len(lost),
               dropped="" if gone is None else ids(gone),
               server_round=int(rec.server_round), server_s=rec.server_s,
               extra_airtime_s=rec.extra_airtime_s, extra_energy_j=rec.extra_energy_j, idle_s=rec.idle_s,
               num_updates=applied,
               staleness_mean=float(staleness.mean()) if staleness is not None and len(staleness) else 0.0,
               staleness_max=int(staleness.max()) if staleness is not None and len(staleness) else 0)
    return row, lost
