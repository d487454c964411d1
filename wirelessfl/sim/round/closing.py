"""How a round of devices closes, as both engines close it: the model's way down on a timed downlink
(:func:`deliver_model`), what each upload was on the air for by the round's end (:func:`on_air_s`),
and the round's record (:func:`client_round_record`). The sync engine (wirelessfl.sim.sync.engine)
learns when each upload started and ended in closed form, the event round driver
(wirelessfl.sim.events.rounds) from its event uplink; what that costs and how it is written down is
here, once.

Knows nothing of SimPy.
"""
from __future__ import annotations

import numpy as np

from ..records.round_record import RoundRecord
from .pipeline import RoundOpening

__all__ = ["client_round_record", "deliver_model", "on_air_s"]


def deliver_model(parts, gains: np.ndarray, streams: dict):
    """The round's model sent to devices at ``gains``: (what a timed downlink did for each,
    wirelessfl.access.Delivery, or None where the downlink takes its fixed time; the downlink's
    time, its last receiver's on a timed one and never less than the fixed time)."""
    if not parts.downlink.timed:
        return None, parts.downlink_s
    delivery = parts.downlink.deliver(parts.downlink_bits, gains, streams["downlink"])
    return delivery, float(delivery.seconds.max(initial=parts.downlink_s))


def on_air_s(arrived: np.ndarray, airtime_s: np.ndarray, tx_start: np.ndarray, t_end: float) -> np.ndarray:
    """Each upload's time on the air by ``t_end``: all of it where it arrived, from its start to
    ``t_end`` where the round's end cut it, none where it never started (``tx_start`` NaN)."""
    with np.errstate(invalid="ignore"):  # an inf clock (inf - inf): the engines stop such a run in one line
        return np.where(arrived, airtime_s, np.where(np.isnan(tx_start), 0.0, t_end - tx_start))


def client_round_record(opening: RoundOpening, t_end: float, *, downlink_s: float, comp_s: np.ndarray,
                        airtime_s: np.ndarray, reports_s: float, reports_j: float, piggy_s: float,
                        **facts) -> RoundRecord:
    """The record of a round of devices that opened as ``opening`` and ended at ``t_end``: its
    longest computation (of ``comp_s``), its uplink time (the uploads' ``airtime_s``, NaN where one
    never had a time of its own, plus the reports' ``reports_s`` before the computations), the
    traffic beside the models (the reports' time and energy ``reports_j``, the piggybacked bits'
    ``piggy_s``), and the rest of RoundRecord's fields as ``facts``."""
    uploads_s = airtime_s.sum()
    if uploads_s != uploads_s:  # (nansum only then: it costs more than the round's other sums)
        uploads_s = np.nansum(airtime_s)
    return RoundRecord(
        round=opening.index, t_start=opening.t_start, t_end=t_end, downlink_s=downlink_s,
        comp_s=float(comp_s.max(initial=0.0)), comm_s=float(uploads_s) + reports_s,
        selected=opening.selected, airtime_s=airtime_s, gains=opening.gains, decision=opening.decision,
        available=opening.available, extra_airtime_s=reports_s + piggy_s, extra_energy_j=reports_j, **facts)
