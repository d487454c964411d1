"""updates.csv: one row per dispatched device (under sync one per selected device and round),
written when its update's fate is known, streamed to the run folder so a run of a million uploads
keeps flat memory; a checkpoint remembers the file's length, and a resume cuts the file back to it."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ...files import FileDigest, open_append, truncate_file, write_atomic
from ...outcomes import OUTCOMES, Outcome

__all__ = ["BACKHAUL_COLUMNS", "CELL_COLUMNS", "DOWNLINK_COLUMNS", "OUTCOMES", "UPDATE_COLUMNS", "UpdateLog", "round_outcomes",
           "union_length"]

UPDATE_COLUMNS = ["update", "device", "version_started", "dispatch_s", "compute_end_s", "tx_start_s", "tx_end_s",
                  "version_applied", "staleness", "outcome", "energy_j", "compute_energy_j", "airtime_s", "gain",
                  "power", "lost_s", "attempts", "bits"]
"""One row per dispatched device: ``update`` numbers the dispatches from 0; times in simulated
seconds (empty: the phase never began); version_applied and staleness are empty unless the update
was applied; outcome is "applied", "stale" (older than the protocol's max_staleness), "late_dropped"
(missed the round's deadline, or its first k, under late = "drop"), "offline" (the device left while
computing or uploading), "lost" (a packet failed link.max_attempts times), "silent" (it did not
send: aircomp's truncation), "battery" (its battery ran out during the task), "downlink" (it missed the model
and waited for the next one, link.downlink_miss = "wait"), "handover" (its device handed over while it
waited for or was on the uplink, network.handover_upload = "lose") or "in_flight" (the run ended first); attempts counts its packets' transmissions (retries included); energy_j is the transmit energy spent
(P x time on the air), compute_energy_j the computation energy (the part done, when it stopped early);
lost_s is when a device that went offline (or was stopped, or was still under way at the end) stopped;
bits is the size of its upload on the air, whether or not it was sent: the encoder's output with
learning.compression (model_bits itself without), plus what rides on it (Decision.traffic.piggyback_bits)."""
DOWNLINK_COLUMNS = ["downlink_s", "downlink_attempts", "received"]
"""Added to updates.csv when the downlink is timed (link.downlink 'broadcast' or 'unicast'): the
seconds from the dispatch (the round's start) until the model reached the device, or until the last
transmission it missed; the model's transmissions to it; 1 if it got the model (0: it missed it and
waited, outcome "downlink", or trained from the last model it had, link.downlink_miss = "stale")."""
BACKHAUL_COLUMNS = ["backhaul_down_s", "backhaul_up_s"]
"""Added to updates.csv (after any DOWNLINK_COLUMNS) under the event protocols with one server in
the cloud behind a timed backhaul (hierarchy.backhaul_rate_bps, backhaul_latency_s): the seconds from
the dispatch until the model was at the device's site, and from the upload's end until the site had
forwarded the update to the cloud (empty: it never got there); each includes waiting for the site's
link (wirelessfl.network.SiteLinks)."""
RATE_COLUMNS = ["mcs", "harq_tx"]
"""Added to updates.csv (last) where an MCS rate times the uploads (link.rate 'nr', 'lte'): the MCS the
upload was sent at (chosen at its SINR as it went on the air; -1: it never did) and its transport
blocks' transmissions, HARQ retransmissions and ARQ rounds included (0: it sent nothing). An access
scheme's own counts follow them (the ``upload_columns`` of one that AddsUploadColumns; wifi:
collisions, frames, retries, drops)."""
FLOAT_COLUMNS = ("elevation_deg", "range_km", "doppler_hz")
"""Uplink columns that are numbers, not counts (the geometry of a satellite pass, wirelessfl.access.orbit):
written with 12 significant digits, empty where NaN (an upload that never went on the air)."""
CELL_COLUMNS = ["cell"]
"""Added to updates.csv (after any DOWNLINK_COLUMNS) with several cells (network.cells > 1): the cell
that served the upload."""


_ROW = "%d,%d,%d,%s,%s,%s,%s,%s,%s,%.12g,%.12g,%.12g,%.12g,%.12g,%s,%d,%.12g\n"
_DOWNLINK_PART, _BACKHAUL_PART, _CELL_PART = ",%.12g,%d,%d", ",%.12g,%.12g", ",%d"
"""An updates.csv row (UPDATE_COLUMNS; version_applied and staleness come as one cell). Times
(dispatch_s, compute_end_s, tx_start_s, tx_end_s, lost_s) are written in full, the shortest form
that reads back as the same float, as rounds.csv writes t_start and t_end, so the two files join on
time exactly; the other numbers have 12 significant digits (the shortest exact form costs about
a microsecond more a number, and a row is written for every upload)."""


def _round_rows(item: tuple) -> list[tuple]:
    """The UPDATE_COLUMNS rows of a sync round written by UpdateLog.write_round (version_applied and
    staleness NaN where not applied)."""
    first, devices, version, dispatch_s, ready, tx_start, tx_end, airtime, arrived, energy, compute_energy, gain, \
        power, end_s, attempts, emptied_s, downlink, cells, extra, bits = item
    full_end = (tx_start + airtime if tx_end is None else tx_end).tolist()
    ready, start, air, ok, energy, compute_energy, gain, power = (
        a.tolist() for a in (ready, tx_start, airtime, arrived, energy, compute_energy, gain, power))
    tries = [int(t == t) for t in start] if attempts is None else attempts.tolist()
    emptied = [math.nan] * len(ok) if emptied_s is None else emptied_s.tolist()
    received = [True] * len(ok) if downlink is None else downlink.received.tolist()
    bits = np.broadcast_to(np.asarray(bits, dtype=float), devices.shape).tolist()
    rows = []
    for i, n in enumerate(devices.tolist()):
        if ok[i]:
            outcome, end, lost = Outcome.APPLIED, full_end[i], math.nan
        elif not received[i]:  # it missed the model and waited for the next round
            outcome, end, lost = Outcome.DOWNLINK, math.nan, dispatch_s + float(downlink.seconds[i])
            ready[i] = math.nan
        elif emptied[i] == emptied[i]:  # its battery ran out (wirelessfl.battery)
            outcome, end, lost = Outcome.BATTERY, math.nan, emptied[i]
        elif air[i] == 0 and attempts is None:  # it never sent (aircomp: below the truncation gain)
            outcome, end, lost = Outcome.SILENT, math.nan, math.nan
        elif full_end[i] <= end_s:  # its transmissions ended: its packets failed, it gave up then
            outcome, end, lost = Outcome.LOST, math.nan, full_end[i]
        else:  # cut by the deadline (before its turn: it sent nothing)
            outcome, end, lost = Outcome.LATE_DROPPED, math.nan, end_s
        rows.append((first + i, n, version, dispatch_s, ready[i], start[i], end, version if ok[i] else math.nan,
                     0 if ok[i] else math.nan, str(outcome), energy[i], compute_energy[i], air[i], gain[i], power[i], lost,
                     tries[i] if start[i] == start[i] else 0, bits[i]))
    if downlink is not None:
        rows = [(*row, seconds, tries, got) for row, seconds, tries, got in
                zip(rows, downlink.seconds.tolist(), downlink.attempts.tolist(), [int(r) for r in received])]
    if cells is not None:
        rows = [(*row, cell) for row, cell in zip(rows, cells[devices].tolist())]
    if extra is not None:  # the uplink's own counts (MCS and transmissions, collisions, ...) of each upload
        rows = [(*row, *values) for row, values in zip(rows, extra.tolist())]
    return rows


def round_outcomes(rec, arrived: np.ndarray, full_end: np.ndarray) -> dict[str, int]:
    """A sync round's updates by outcome, as its rows of updates.csv name them (_round_rows):
    ``rec`` its RoundRecord, ``arrived`` who got through, ``full_end`` each upload's end had it gone on."""
    counts = dict.fromkeys(OUTCOMES, 0)
    missed = ~arrived
    if rec.emptied_s is not None:  # its battery ran out: counted as that, whatever else it looks like
        emptied = ~np.isnan(rec.emptied_s)
        counts[Outcome.BATTERY] += int(emptied.sum())
        missed = missed & ~emptied
    if rec.downlink is not None:  # it missed the model and waited for the next round
        counts[Outcome.DOWNLINK] += int((missed & ~rec.downlink.received).sum())
        missed = missed & rec.downlink.received
    silent = missed & (rec.airtime_s == 0) if rec.attempts is None else np.zeros_like(missed)
    with np.errstate(invalid="ignore"):
        lost = missed & ~silent & (full_end <= rec.t_end)
    counts[Outcome.APPLIED] += int(arrived.sum())
    counts[Outcome.SILENT] += int(silent.sum())
    counts[Outcome.LOST] += int(lost.sum())
    counts[Outcome.LATE_DROPPED] += int((missed & ~silent & ~lost).sum())
    return counts


def union_length(start: np.ndarray, end: np.ndarray) -> float:
    """The length of the union of the intervals [start_i, end_i] (NaN starts and empty ones left out)."""
    keep = (start == start) & (end > start)
    start, end = start[keep], end[keep]
    if not start.size:
        return 0.0
    order = np.argsort(start, kind="stable")
    start, reach = start[order], np.maximum.accumulate(end[order])
    first = np.empty(start.size, dtype=bool)
    first[0], first[1:] = True, start[1:] > reach[:-1]  # a new busy period: it starts after all before it ended
    last = np.r_[np.flatnonzero(first)[1:] - 1, start.size - 1]
    return float((reach[last] - start[first]).sum())


class UpdateLog:
    """updates.csv: one line per update, appended as its fate becomes known. Without a folder the
    rows stay in memory (``rows_in_memory``); with one they are only on disk, so memory stays flat.
    Single rows (the event protocols') wait in a short buffer and are formatted a chunk at a time."""

    CHUNK = 1024
    """Rows formatted and written at once (a flush, a checkpoint or the end writes the rest)."""

    def __init__(self, path: Path | None, downlink: bool = False, cells: np.ndarray | None = None,
                 backhaul: bool = False, extra: tuple[str, ...] = ()):
        self.path = path
        self.extra = tuple(extra)  # integer columns of the uplink's own, last (RATE_COLUMNS, a scheme's)
        # the downlink's columns when it is timed, the backhaul's when the event protocols time it, the
        # cell's with several (``cells``: each device's)
        self.columns = (UPDATE_COLUMNS + (DOWNLINK_COLUMNS if downlink else []) + (BACKHAUL_COLUMNS if backhaul else [])
                        + (CELL_COLUMNS if cells is not None else []) + list(self.extra))
        self._row = (_ROW[:-1] + (_DOWNLINK_PART if downlink else "") + (_BACKHAUL_PART if backhaul else "")
                     + (_CELL_PART if cells is not None else "")
                     + "".join(",%.12g" if c in FLOAT_COLUMNS else ",%d" for c in self.extra) + "\n")
        self.cells = cells
        self.rows = 0
        self.in_memory: list[tuple] | None = [] if path is None else None
        self._fh = None
        self._pending: list[str] = []
        self.digest = FileDigest(path)  # the file's running digest, for checkpoints

    def start(self) -> None:
        """A new file holding the header."""
        if self.path is not None:
            write_atomic(self.path, ",".join(self.columns) + "\n")
            self.digest.restart()
            self._fh = open_append(self.path)

    def write(self, u, tail: tuple = (), extra: tuple = ()) -> None:
        """The row of ``u``, an update whose fate is known (the attributes of
        wirelessfl.sim.events.flight.Update: numbers as Python ints and floats; version_applied < 0: not
        applied); ``tail``: its DOWNLINK_COLUMNS and BACKHAUL_COLUMNS where the file has them."""
        self.rows += 1
        applied = u.version_applied >= 0
        if self.cells is not None:
            tail = (*tail, int(self.cells[u.device]))
        if self.extra:
            tail = (*tail, *extra)
        if self.in_memory is not None:
            self.in_memory.append((u.seq, u.device, u.version, u.dispatch_s, u.compute_end_s, u.tx_start_s, u.tx_end_s,
                                   u.version_applied if applied else math.nan,
                                   u.version_applied - u.version if applied else math.nan, str(u.outcome), u.energy_j,
                                   u.compute_energy_j, u.airtime_s, u.gain, u.power, u.lost_s, u.attempts, u.bits,
                                   *tail))
        if self._fh is not None:
            self._pending.append(self._row % (  # formatted now, while its numbers are in the CPU's cache
                u.seq, u.device, u.version, u.dispatch_s, u.compute_end_s, u.tx_start_s, u.tx_end_s,
                f"{u.version_applied},{u.version_applied - u.version}" if applied else ",", u.outcome, u.energy_j,
                u.compute_energy_j, u.airtime_s, u.gain, u.power, u.lost_s, u.attempts, u.bits, *tail))
            if len(self._pending) >= self.CHUNK:
                self._write_pending()

    def _write_pending(self) -> None:
        # the rows formatted as they came; NaN becomes empty (no outcome contains "nan")
        self._fh.write("".join(self._pending).replace("nan", ""))
        self._pending = []

    def write_round(self, first: int, devices: np.ndarray, version: int, dispatch_s: float, ready: np.ndarray,
                    tx_start: np.ndarray, airtime: np.ndarray, arrived: np.ndarray, energy: np.ndarray,
                    compute_energy: np.ndarray, gain: np.ndarray, power: np.ndarray, end_s: float,
                    tx_end: np.ndarray | None = None, attempts: np.ndarray | None = None,
                    emptied_s: np.ndarray | None = None, downlink=None, extra: np.ndarray | None = None,
                    bits=0.0) -> None:
        """A sync round's rows at once (one per selected device, numbered from ``first``): applied
        where it arrived; lost where its transmissions ended but it did not arrive (its packets failed;
        it gave up then); else dropped at the deadline ``end_s``. ``tx_end``: the uploads' ends where
        they are not tx_start + airtime; ``attempts``: transmissions (default one for those that
        began); ``emptied_s``: when a device's battery ran out (NaN: it did not; None: none did);
        ``downlink``: what the timed downlink did (wirelessfl.access.Delivery; None: fixed). The arrays
        are kept, not copied; rows are made from them when needed (_round_rows). ``extra``: each upload's
        counts of the ``extra`` columns ((k, columns) integers); ``bits``: each upload's bits on the air
        (or one number for all)."""
        self.rows += len(devices)
        dispatch_s, end_s = float(dispatch_s), float(end_s)  # times in full: 0 is written 0.0, as the event rows'
        item = (first, devices, version, dispatch_s, ready, tx_start, tx_end, airtime, arrived, energy, compute_energy,
                gain, power, end_s, attempts, emptied_s, downlink, self.cells, extra if self.extra else None, bits)
        if self.in_memory is not None:
            self.in_memory.append(item)
        if self._fh is None:
            return
        if self._pending:
            self._write_pending()
        if tx_end is None and attempts is None and downlink is None and self.cells is None and not self.extra \
                and arrived.all():
            # the usual round: every upload in, once
            ready, start, air, energy, compute_energy, gain, power = (
                a.tolist() for a in (ready, tx_start, airtime, energy, compute_energy, gain, power))
            sent = np.broadcast_to(np.asarray(bits, dtype=float), devices.shape).tolist()
            cell = f"{version},0"
            text = "".join([_ROW % (first + i, n, version, dispatch_s, ready[i], start[i], start[i] + air[i], cell,
                                    Outcome.APPLIED, energy[i], compute_energy[i], air[i], gain[i], power[i], math.nan, 1,
                                    sent[i])
                            for i, n in enumerate(devices.tolist())])
        else:
            text = "".join([self._row % (*row[:7], f"{row[7]},0" if row[7] == row[7] else ",", *row[9:])
                            for row in _round_rows(item)])
        self._fh.write(text.replace("nan", ""))

    def rows_in_memory(self) -> list[tuple] | None:
        """The rows kept without a folder (UPDATE_COLUMNS), in the order they were written."""
        if self.in_memory is None:
            return None
        rows = []
        for item in self.in_memory:
            rows.extend(_round_rows(item) if isinstance(item[1], np.ndarray) else [item])
        return rows

    def flush(self) -> None:
        if self._fh is not None:
            if self._pending:
                self._write_pending()
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self.flush()
            self._fh.close()
            self._fh = None

    def state_dict(self) -> dict:
        """How many rows, and how many bytes of the file, a checkpoint covers."""
        self.flush()
        size = self.path.stat().st_size if self.path is not None else 0
        rows = self.rows_in_memory()
        return {"rows": self.rows, "bytes": size, "sha256": self.digest.advance(size)["sha256"],
                "in_memory": list(map(list, rows)) if rows is not None else None}

    def check(self, state: dict) -> str | None:
        """Why the file cannot continue from ``state`` (None: it can)."""
        if not isinstance(state, dict) or not isinstance(state.get("rows"), int):
            return "the checkpoint has no count of update rows"
        if self.path is None:
            return None
        return self.digest.continues(int(state.get("bytes", 0)), state.get("sha256"))

    def load_state(self, state: dict) -> None:
        """Cut the file back to the checkpoint's rows and append from there."""
        self.rows = int(state["rows"])
        if self.in_memory is not None:
            self.in_memory = [tuple(r) for r in (state.get("in_memory") or [])]
        if self.path is not None:
            self.close()
            truncate_file(self.path, int(state["bytes"]))  # not a link, nor a FIFO (refused)
            self._fh = open_append(self.path)
