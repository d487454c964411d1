"""A sync round's uploads in closed form, as the sync engine (wirelessfl.sim.sync.engine) times them:
their times on the air at the round's gain (:func:`round_airtimes`), the access scheme's schedule
of them (:func:`schedule_uploads`), a contention scheme's round against the batteries
(:func:`contended`), the batteries' drain (:func:`drain`) and what the round cost
(:func:`energies`). The schedules themselves are the access schemes' (wirelessfl.access); this
module only hands each its inputs.

Knows nothing of SimPy.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...access.base import AddsUploadColumns, TimesEachDevice
from ...capabilities import provides
from ..round.closing import on_air_s
from ..round.pipeline import compute_energy, transmit_energy

__all__ = ["RoundAirtimes", "contended", "drain", "energies", "round_airtimes", "schedule_uploads", "upload_counts"]


@dataclass
class RoundAirtimes:
    """The selected devices' uploads at the round's gain: time on the air, transmissions (None: one
    each), whether each got through (None: nothing can fail) and, under an MCS rate, each upload's
    MCS and HARQ transmissions (None otherwise)."""

    airtime_s: np.ndarray
    attempts: np.ndarray | None = None
    delivered: np.ndarray | None = None
    harq: np.ndarray | None = None


def round_airtimes(p, streams: dict, packets: bool, selected: np.ndarray, bits, gains: np.ndarray,
                   power: np.ndarray) -> RoundAirtimes:
    """The round's uploads (``gains``, ``power``: of the selected devices): in packets at the round's
    gain (``packets``), with fading within an upload, each device in its own cell, or by the access
    scheme."""
    if packets:  # packets retried at the round's gain, each device in its own cell; some uploads may be lost
        airtime, attempts, delivered, harq = p.cells.send_packets(selected, bits, gains, power, streams)
        return RoundAirtimes(airtime, attempts, delivered, harq if p.access.link.mcs_rate else None)
    if p.fading is not None:  # the channel changes every coherence time of a long upload
        return RoundAirtimes(p.access.on_air_s(p.fading.upload_times(bits, gains, power, selected,
                                                                     streams["fading"])))
    return RoundAirtimes(p.cells.airtime_s(selected, bits, gains, power))


def schedule_uploads(p, selected, ready, air: RoundAirtimes, deadline_at, bits, gains, power, received):
    """The access scheme queues the round's uploads (each cell's, with several): (the schedule,
    each upload's time on the air, transmissions, arrival and start; NaN: it sent nothing).
    ``gains``: every device's; ``received``: who got the model (None: everyone)."""
    airtime, attempts = air.airtime_s, air.attempts
    if provides(p.access, TimesEachDevice):  # an uplink timed per device (satellite passes)
        uplink = p.access.schedule_devices(selected, ready, bits, deadline_at)
    else:  # each cell's closed form (random access: who contends, how strongly)
        uplink = p.cells.schedule(selected, ready, airtime, deadline_at, bits=bits, gains=gains[selected], power=power)
    if uplink.on_air_s is not None:  # contention decided each device's time on the air (random access)
        airtime, attempts = uplink.on_air_s, uplink.attempts
    arrived = uplink.arrived if air.delivered is None else uplink.arrived & air.delivered  # lost uploads do not count
    tx_start = uplink.tx_start
    if received is not None and not received.all():  # who missed the model sent nothing
        arrived, tx_start = arrived & received, np.where(received, tx_start, np.nan)
    return uplink, airtime, attempts, arrived, tx_start


def upload_counts(p, selected: np.ndarray, harq: np.ndarray | None) -> np.ndarray | None:
    """The round's uploads' counts of the uplink's own (an MCS rate's MCS and transmissions, then the
    scheme's ``round_counts`` where it AddsUploadColumns), one row per selected device; None where it
    has none."""
    parts = []
    if p.access.link.mcs_rate:
        parts.append(harq if harq is not None else np.tile([-1, 0], (len(selected), 1)))
    if provides(p.access, AddsUploadColumns):
        counts = np.asarray(p.access.round_counts())  # integer counts, or floats (a pass's geometry)
        parts.append(counts.astype(float if counts.dtype.kind == "f" else np.int64)
                     .reshape(len(selected), len(p.access.upload_columns)))
    return np.hstack(parts) if parts else None


def contended(p, selected, uplink, tx_start, airtime, power, receiving_s, comp_j, emptied, arrived):
    """A contention scheme's round against the batteries (``AccessScheme.listening_s``): a device
    listens at the receiving power from its first contention to its last ACK, and sends its frames at
    its power; one whose charge after the model and its computation does not cover that ran out in
    its upload, which is then lost (found at the end of the round: the round's DCF is not run
    again). Returns (emptied, arrived, each device's listening energy)."""
    battery = p.battery
    ends = tx_start + airtime if uplink.tx_end is None else uplink.tx_end
    listening = p.access.listening_s(tx_start, ends, airtime)
    with np.errstate(invalid="ignore"):
        left = battery.charge[selected] - battery.rx_power_w * receiving_s - comp_j
        out = ~emptied & (tx_start == tx_start) & (power * airtime + battery.rx_power_w * listening > left)
    return emptied | out, arrived & ~out, battery.rx_power_w * listening


def drain(battery, selected, emptied, ready, tx_start, airtime, t_end, spent_j, arrived):
    """A round's energy (``spent_j``, the model's reception included) leaves the batteries: (when
    each selected device ran out, NaN where it did not, or the deadline came first; who arrived,
    less those)."""
    with np.errstate(invalid="ignore"):
        when = np.where(airtime > 0, tx_start + airtime, ready)  # on the air, or before sending
        emptied = emptied & (when <= t_end)
    battery.spend(selected, spent_j, emptied)
    return np.where(emptied, when, np.nan), arrived & ~emptied


def energies(uplink, deadline_at, airtime, tx_start, t_end, power, comp, comp_energy, starts):
    """(transmit, computation) energy of each selected device of a round that ended at ``t_end``:
    for what was done where a deadline cut uploads or computations short."""
    if deadline_at is None or uplink.on_air_s is not None:  # everything was done, or said as it went
        on_air = airtime
    else:  # a dropped upload spent power only while on the air
        on_air = on_air_s(uplink.arrived, airtime, tx_start, t_end)
    if deadline_at is not None:  # an interrupted computation spent the fraction it completed
        comp_energy = compute_energy(comp_energy, comp, t_end - starts)
    return transmit_energy(power, on_air), comp_energy
