"""Per-round and per-evaluation records, kept in memory and streamed to a run directory.

Rows are appended to CSV files as the run goes, so an interrupted run keeps everything recorded so
far; per-device arrays (gains, omega, q, P, Z) stream to decisions.h5 (see device_arrays), and the
summary is written last, atomically: a run directory whose summary says "complete" is complete.
No file is opened before the run starts (``start``) or before a resume has checked that the
checkpoint and the files on disk agree (``check_resume``): a failed resume leaves the folder as it was.

updates.csv has one row per dispatched device (UPDATE_COLUMNS; under sync one per selected device
and round), written when its update's fate is known: applied, dropped, lost, or still in flight when
the run ended. Its rows are streamed and not kept in memory when the run has a folder, so a run of
a million uploads keeps flat memory; a checkpoint remembers the file's length, and a resume cuts the
file back to it.

Besides ROUND_COLUMNS, rounds.csv has a column for every number in a round's Decision.info (the
scheduler's facts) and in the dict the algorithm's round returned; a name that is already a column
gets the prefix "scheduler_" or "algorithm_". A column first seen in a later round is added to the
file (rewritten once with the wider header); rounds without it leave it empty.
"""
from __future__ import annotations

import contextlib
import csv
import math
import time
from pathlib import Path

import numpy as np

from ...config.rules import PER_ROUND_BYTES
from ...fields import ConfigError, physical_memory
from ...files import FileDigest, make_folder, open_append, truncate_file, write_atomic
from ...jsonio import write_json_atomic
from ...outcomes import Outcome
from .aggregation_rows import SingleUpdateRows, aggregation_values, single_update_row
from .device_arrays import DECISIONS, DeviceArrays
from .columns import EVAL_COLUMNS, ROUND_COLUMNS, columns, floats, ids, numbers
from .device_totals import DeviceTotals
from .round_file import csv_rows, header, rounds_digest_problem, rounds_file_problem
from .handover_log import HandoverLog
from .update_log import OUTCOMES, UPDATE_COLUMNS, UpdateLog, round_outcomes, union_length

__all__ = ["EVAL_COLUMNS", "OUTCOMES", "ROUND_COLUMNS", "Recorder", "UPDATE_COLUMNS", "UpdateLog"]
from .round_record import AggregationRecord, RoundRecord
from .summary import PowerSettling, RoundTotals

FLUSH_EVERY_S = 0.5
"""Round rows reach the file at least this often (evaluation rows at once, all rows before every
checkpoint): a flush per round cost a timing-only run a tenth of its time, and a run killed
outright loses at most this much wall time of rows, which its checkpoint does not need."""


class Recorder:
    """Collects round, evaluation and update rows and per-device totals; streams them to ``out_dir``.

    Per-device totals come from the rounds (sync: ``on_round``) or, for the event protocols, from
    the updates (``on_update``): a round record with ``per_update`` set leaves them alone.

    With a folder the rows of rounds.csv live only on disk: the summary's sums are kept as they
    come (``totals``), and a checkpoint refers to the file by its length, so neither memory nor a
    checkpoint grows with the run. Without one they are kept in ``rounds``.
    """

    def __init__(self, num_devices: int, out_dir: Path | None = None, keep_device_arrays: bool = True,
                 positions=None, p_bar: float = math.nan, part_columns: tuple = (), downlink: bool = False,
                 time_budget_s: float | None = None, cells: np.ndarray | None = None, handovers: bool = False,
                 backhaul: bool = False, upload_columns: tuple[str, ...] = (), upload_counts=None):
        self.num_devices = num_devices
        # moving devices: where they are at each record (a callable giving (N, 2) metres), kept in
        # decisions.h5 and averaged into devices.csv's distance_m
        self.positions = positions
        # (prefix, round_info) of the parts that add numbers of their own to every row of rounds.csv
        self.part_columns = tuple(part_columns)
        self._info_columns = ({}, {})  # the dispatch rule's latest info and its columns (most repeat theirs)
        self.rounds: list[dict] | None = [] if out_dir is None else None
        memory = physical_memory()
        self._rows_in_memory = math.inf if memory is None else max(int(0.5 * memory / PER_ROUND_BYTES), 1)
        # a run to a time budget (no round count) kept in memory: its rows estimated from its first ones
        self.time_budget_s = time_budget_s
        self.totals = RoundTotals()
        self.evals: list[dict] = []
        self.devices = DeviceTotals(num_devices)  # devices.csv's sums
        self.power = PowerSettling(p_bar)  # mean over devices of P q, round by round (the transient)
        self.out_dir = out_dir
        self.arrays = (DeviceArrays(out_dir / DECISIONS, num_devices, extra={"positions": (2,)} if positions else None)
                       if keep_device_arrays and out_dir is not None else None)
        self.updates = UpdateLog(out_dir / "updates.csv" if out_dir is not None else None, downlink, cells, backhaul,
                                 upload_columns)
        # the uplink's own counts of an event protocol's update (upload_columns: MCS, collisions, ...)
        self.upload_counts = upload_counts
        # moving devices among several cells: handovers.csv
        self.handovers = HandoverLog(out_dir / "handovers.csv" if out_dir is not None else None) if handovers else None
        self.downlink = downlink  # the downlink is timed: updates.csv has its columns
        self.backhaul = backhaul  # the event protocols time a backhaul to the cloud: updates.csv has its columns
        self.edge_rounds = False  # rows of edge servers' rounds (wirelessfl.sim.sync.tiers): a device counts its edge's
        # rounds.csv's running digest: a checkpoint holds it, a resume checks the file against it
        self.round_digest = FileDigest(out_dir / "rounds.csv" if out_dir is not None else None)
        self.update_stats = {"applied": 0, "staleness_sum": 0, "uploads": 0, "airtime_s": 0.0, "bits": 0.0}
        self.outcomes = dict.fromkeys(OUTCOMES, 0)  # updates.csv's rows by outcome
        self.round_columns = list(ROUND_COLUMNS)
        self._known = set(ROUND_COLUMNS)  # round_columns as a set: a row with a key outside it widens the file
        self._files = {}
        self.single_rows = SingleUpdateRows()  # rows of one-update aggregations not yet written to rounds.csv
        self._flushed_at = time.monotonic()
        self.guard = None  # the runner's FolderGuard: files are written by name only in the folder it began in

    def start(self) -> None:
        """A fresh run: the CSV files with their headers, an empty decisions.h5."""
        if self.out_dir is None:
            return
        make_folder(self.out_dir, theirs=True)
        for name, cols in (("rounds", self.round_columns), ("evals", EVAL_COLUMNS)):
            self._open(name, cols, [])
        self.updates.start()
        if self.handovers is not None:
            self.handovers.start()
        if self.arrays is not None:
            self.arrays.start()

    def _open(self, name: str, columns: list[str], rows: list[dict]) -> None:
        """(Re)write ``name``.csv with ``columns`` and ``rows`` atomically, and keep it open for appending."""
        import io

        if name in self._files:
            self._files[name][0].close()
        if self.guard is not None:
            self.guard.check()
        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        path = self.out_dir / f"{name}.csv"
        write_atomic(path, text.getvalue())
        if name == "rounds":  # written again from its start: its digest too
            self.round_digest.restart()
        fh = open_append(path)
        self._files[name] = (fh, csv.writer(fh), list(columns))

    def on_round(self, rec: RoundRecord | AggregationRecord) -> None:
        """One row of rounds.csv: a round (sync, semi_sync, a server round) or an aggregation of
        updates that arrived one by one (fedbuff, fedasync)."""
        if isinstance(rec, AggregationRecord):
            self._on_aggregation(rec)
            return
        where = self.positions() if self.positions is not None else None
        row = self._round_row(rec, where)
        row.update(numbers(rec.decision.info, "scheduler", skip=("objective", "queue_mean")))
        row.update(numbers(rec.metrics, "algorithm"))
        row.update(rec.labels)  # an edge round's tier and edge, a cloud-only round's backhaul
        for prefix, info in self.part_columns:
            row.update(numbers(info(), prefix))
        if self.rounds is not None:
            self._keep(row)
        self.totals.add(row)
        if where is not None:
            self.devices.distance_sum += np.hypot(where[:, 0], where[:, 1])
        self._write("rounds", row)

    def _on_aggregation(self, rec: AggregationRecord) -> None:
        """An aggregation's row, kept as a list in the file's column order: one may come per upload,
        so it skips the dict a round's row is built as (the same values, the same bytes)."""
        extra = {}
        if rec.info:
            extra.update(self._info_numbers(rec.info))
        if rec.metrics:
            extra.update(numbers(rec.metrics, "algorithm"))
        if rec.labels:
            extra.update(rec.labels)
        for prefix, info in self.part_columns:
            extra.update(numbers(info(), prefix))
        if self.positions is not None:
            where = self.positions()
            self.devices.distance_sum += np.hypot(where[:, 0], where[:, 1])
        if (not extra and len(rec.updates) == 1 and self.rounds is None and "rounds" in self._files
                and len(self.round_columns) == len(ROUND_COLUMNS) and "queue_mean" not in rec.info
                and "objective" not in rec.info):
            self._single_update_row(rec)
            return
        values = aggregation_values(rec, self.devices.count_available(rec.available, rec.available_since))
        # t_end, comm_s, comp_s, downlink_s, energy_j, compute_energy_j, num_selected
        self.totals.add_aggregation(values[2], values[5], values[4], values[3], values[10], values[15], values[6])
        if self.rounds is None and extra.keys() <= self._known:
            if len(self.round_columns) > len(ROUND_COLUMNS):
                values += [extra.get(name, "") for name in self.round_columns[len(ROUND_COLUMNS):]]
            self._write_values("rounds", values)
            return
        row = dict(zip(ROUND_COLUMNS, values))
        row.update(extra)
        if self.rounds is not None:
            self._keep(row)
        self._write("rounds", row)

    def _info_numbers(self, info: dict) -> dict:
        """The columns of a dispatch rule's ``info``: those of its latest info where it is the same
        (compared by value: a rule may change its dict in place; most give the same one each time)."""
        seen, columns = self._info_columns
        try:
            same = info == seen
        except ValueError:  # arrays among its values: not compared
            same = False
        if not same:
            columns = numbers(info, "scheduler", skip=("objective", "queue_mean"))
            self._info_columns = (dict(info), columns)
        return columns

    def _single_update_row(self, rec: AggregationRecord) -> None:
        """The row of an aggregation of one update, with nothing but ROUND_COLUMNS (the usual one of
        fedasync and of fedbuff with K = 1), kept for a chunk's write (sim/records/aggregation_rows.py)."""
        row = single_update_row(rec, self.devices.count_available(rec.available, rec.available_since))
        # t_end, comm_s, comp_s, downlink_s, energy_j, compute_energy_j, one update
        self.totals.add_aggregation(row[2], row[5], row[4], row[3], row[8], row[10], 1)
        self.single_rows.add(row, self._files["rounds"][0])
        self._flush_if_due()

    PILOT_ROWS = 64
    """A run kept in memory to a time budget estimates its rows from this many first ones (and again
    at every power of two after: the pace so far)."""

    def on_handovers(self, rows: list) -> None:
        """Handovers of moving devices between cells: (time, device, from, to) rows of handovers.csv."""
        if self.handovers is not None:
            self.handovers.write(rows)

    def on_cloud(self, row: dict) -> None:
        """A cloud aggregation of the edges' models (wirelessfl.sim.sync.tiers): its row of rounds.csv,
        with the columns it has (the others empty), counted as a row like any other; decisions.h5's
        row for it is NaN (no device decided anything), keeping its rows those of rounds.csv."""
        if self.rounds is not None:
            self._keep(row)
        self.totals.add(row)
        if self.arrays is not None:
            self.arrays.append({key: np.full((self.num_devices, *shape), np.nan)
                                for key, shape in self.arrays.shapes.items()})
        self._write("rounds", row)

    def _keep(self, row: dict) -> None:
        """A row kept in memory (a run without a folder): up to half of this machine's memory, then a
        one-line error rather than a machine that swaps. run.rounds is checked at load; a time budget
        alone is checked here, as soon as the first PILOT_ROWS rows say how fast rows come (the rows
        it would make at that pace), and again at every power of two rows after."""
        self.rounds.append(row)
        n = len(self.rounds)
        if n >= self.PILOT_ROWS and n & (n - 1) == 0 and self.time_budget_s is not None and row["t_end"] > 0:
            pace_s = row["t_end"] / n
            projected = self.time_budget_s / pace_s
            if projected >= self._rows_in_memory:
                raise ConfigError(f"run.time_budget_s = {self.time_budget_s:g}: this run keeps its records in memory "
                                  f"(it has no folder), and at the pace of its first {n} rows ({pace_s:.3g} simulated s "
                                  f"each) it would make about {projected:,.0f}, more than half of this machine's "
                                  "memory; give it a folder (simulate(scenario, out_dir), or the CLI's --out) so that "
                                  "they stream to disk, or set run.rounds")
        if n >= self._rows_in_memory:
            raise ConfigError(f"run.time_budget_s: this run keeps its records in memory (it has no folder) and "
                              f"has made {len(self.rounds):,} rows, about half of this machine's memory; give it "
                              "a folder (simulate(scenario, out_dir), or the CLI's --out) so that they stream to "
                              "disk, or set run.rounds")

    def _round_row(self, rec: RoundRecord, where) -> dict:
        """A round's row, its per-device totals (unless its updates count their own), the expected
        power of its decision and its per-device arrays."""
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
        comp_energy_sum = float(comp_energy.sum()) if comp_energy is not None else 0.0
        arrived = rec.arrived
        lost = None if arrived is None or arrived.all() else sel[~arrived]  # usually nobody
        # the devices whose updates are gone (semi_sync: not those still under way, carried to a later round)
        gone = lost if rec.dropped is None or lost is None else sel[rec.dropped]
        available = rec.available
        staleness = rec.staleness
        applied = len(sel) - (0 if lost is None else len(lost)) if staleness is None else len(staleness)
        row.update(compute_energy_j=comp_energy_sum,
                   num_available=self.num_devices if available is None else int(available.sum()),
                   num_arrived=len(sel) if lost is None else len(sel) - len(lost),
                   dropped="" if gone is None else ids(gone),
                   server_round=int(rec.server_round), server_s=rec.server_s,
                   extra_airtime_s=rec.extra_airtime_s, extra_energy_j=rec.extra_energy_j, idle_s=rec.idle_s,
                   num_updates=applied,
                   staleness_mean=float(staleness.mean()) if staleness is not None and len(staleness) else 0.0,
                   staleness_max=int(staleness.max()) if staleness is not None and len(staleness) else 0)
        self.devices.add_available(available)
        if not rec.per_update:
            self.devices.add_round(sel, rec.energy_j, comp_energy if comp_energy_sum != 0.0 else None, lost)
            self._round_updates(rec)
        if rec.q is None:  # a round decision: its expected power P q (dispatched updates count their own)
            expected = d.power * d.q
            self.devices.expected_power_sum += expected
            # an edge's round: the mean over its own devices (the others are the other edges')
            on = rec.available if self.edge_rounds and rec.available is not None else None
            self.power.add(float(expected.mean() if on is None else expected[on].mean() if on.any() else 0.0))
        if self.arrays is not None:
            arrays = {"gains": rec.gains, "omega": d.omega, "q": d.q, "power": d.power, "queue": d.queues(),
                      "available": np.ones(self.num_devices) if available is None else available}
            if where is not None:
                arrays["positions"] = where
            self.arrays.append(arrays)
        return row

    def _round_updates(self, rec: RoundRecord) -> None:
        """updates.csv rows of a sync round: one per selected device."""
        sel = rec.selected
        if rec.server_round or not len(sel):
            return
        k = len(sel)
        arrived = rec.arrived if rec.arrived is not None else np.ones(k, dtype=bool)
        comp_energy = rec.compute_energy_j if rec.compute_energy_j is not None else np.zeros(k)
        tx_start, airtime = rec.tx_start, rec.airtime_s
        stats = self.update_stats
        self.updates.write_round(stats["uploads"], sel, rec.round, rec.t_start, rec.ready_s, tx_start, airtime,
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
        stats = self.update_stats
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
        self.updates.write(u, tail, self.upload_counts(u) if self.upload_counts is not None else ())

    def on_eval(self, row: dict) -> None:
        self.evals.append(row)
        self._write("evals", row)

    def _write(self, name: str, row: dict) -> None:
        if name == "rounds" and not row.keys() <= self._known:
            self._widen(row)
            return
        if name in self._files:
            # what csv.DictWriter writes, without its overhead
            self._write_values(name, [row.get(key, "") for key in self._files[name][2]])

    def _write_values(self, name: str, values: list) -> None:
        """A row given as its values in the file's column order."""
        if name in self._files:
            if name == "rounds":
                self.single_rows.write(self._files[name][0])  # the rows before it first
            self._files[name][1].writerow(values)
            self._flush_if_due(now=name == "evals")

    def _flush_if_due(self, now: bool = False) -> None:
        """Flush when FLUSH_EVERY_S has passed since the last flush (``now``: at once)."""
        t = time.monotonic()
        if now or t - self._flushed_at >= FLUSH_EVERY_S:
            self.flush()
            self._flushed_at = t

    def _widen(self, row: dict) -> None:
        """``row`` brings a new column: rounds.csv is written again with the wider header (its rows
        read back from the file as the text they were written as), then ``row``."""
        self.round_columns = columns([dict.fromkeys(self.round_columns), row])
        self._known = set(self.round_columns)
        if "rounds" not in self._files:
            return
        self.flush()
        rows = csv_rows(self.out_dir / "rounds.csv", self.totals.rounds - 1)
        self._open("rounds", self.round_columns, rows + [row])

    def flush(self) -> None:
        """Hand the rows written so far to the operating system (checkpoints call it first)."""
        if "rounds" in self._files:
            self.single_rows.write(self._files["rounds"][0])
        for fh, *_ in self._files.values():
            fh.flush()
        self.updates.flush()
        if self.handovers is not None:
            self.handovers.flush()

    def state_dict(self) -> dict:
        """The records' state, for checkpoints: the per-device totals, the evaluations, the sums over
        the rounds, and the length of each file the rows stream to (its rows themselves stay on disk).
        Everything is flushed first."""
        self.flush()
        if self.arrays is not None:
            self.arrays.flush()

        def plain(rows):
            return [{k: (v.item() if isinstance(v, np.generic) else v) for k, v in row.items()} for row in rows]

        rounds_file = self.out_dir / "rounds.csv" if self.out_dir is not None else None
        round_bytes = rounds_file.stat().st_size if rounds_file is not None else 0
        return {"round_rows": self.totals.rounds, "round_columns": list(self.round_columns),
                "round_bytes": round_bytes, "round_sha256": self.round_digest.advance(round_bytes)["sha256"],
                "device_sha256": self.arrays.digests() if self.arrays is not None else None,
                "rounds": plain(self.rounds) if self.rounds is not None else None,
                "totals": self.totals.state_dict(), "power": self.power.state_dict(),
                "evals": plain(self.evals), **self.devices.state_dict(),
                "device_rows": self.arrays.rows if self.arrays is not None else 0,
                "updates": self.updates.state_dict(), "update_stats": dict(self.update_stats),
                "handovers": self.handovers.state_dict() if self.handovers is not None else None,
                "outcomes": dict(self.outcomes)}

    def check_resume(self, state: dict, rounds_done: int) -> str | None:
        """Why the checkpoint's records cannot continue this folder (None: they can); touches nothing.

        The checkpoint must count ``rounds_done`` rounds, and the files on disk hold at least those
        rounds (a run killed after its checkpoint has written more, which a resume drops)."""
        if not isinstance(state.get("round_rows"), int):
            if isinstance(state.get("rounds"), list) and "totals" not in state:
                return "the checkpoint keeps its rows itself (written by an earlier version): start the run again"
            return "the checkpoint has no count of round rows"
        if state["round_rows"] != rounds_done:
            return f"the checkpoint's records have {state['round_rows']} rounds, its counters {rounds_done}"
        if any(not isinstance(e, dict) or not 0 <= e.get("round", -1) <= rounds_done for e in state.get("evals", [])):
            return "the checkpoint's evaluations do not belong to its rounds"
        problem = self.devices.check(state)
        if problem is not None:
            return problem
        if "updates" not in state or not isinstance(state.get("update_stats"), dict) \
                or not isinstance(state.get("outcomes"), dict):
            return "the checkpoint has no update records (written by an earlier version)"
        if "bits" not in state["update_stats"]:  # its updates.csv has no bits column to append to
            return "the checkpoint's updates.csv has no bits column (written by an earlier version)"
        if self.out_dir is None:
            return None
        for name in ("rounds.csv", "evals.csv"):
            path = self.out_dir / name
            if path.is_symlink():
                return f"{name} is a symbolic link"
        problem = rounds_file_problem(self.out_dir / "rounds.csv", rounds_done, state.get("round_columns"),
                                       int(state.get("round_bytes", 0)))
        if problem is None:  # not only as long: the same bytes
            problem = rounds_digest_problem(self.round_digest, rounds_done, state.get("round_columns"),
                                            int(state.get("round_bytes", 0)), state.get("round_sha256"))
        if problem is not None:
            return problem
        problem = self.updates.check(state["updates"]) or (
            self.handovers.check(state.get("handovers")) if self.handovers is not None else None)
        if problem is not None:
            return problem
        if self.arrays is not None:
            device_rows = state.get("device_rows", 0)
            if device_rows != rounds_done:
                return f"the checkpoint has {device_rows} rounds of per-device arrays for {rounds_done} rounds"
            return self.arrays.check(device_rows, state.get("device_sha256"))
        return None

    def load_state(self, state: dict) -> None:
        """Restore records from a checkpoint (checked by check_resume) and cut the files on disk back
        to them: rounds.csv to its length at the checkpoint, evals.csv rewritten, the per-device rows
        and update rows written after it dropped."""
        self.evals = list(state["evals"])
        self.devices.load_state(state)
        self.update_stats = dict(state["update_stats"])
        self.outcomes = {str(k): int(v) for k, v in state["outcomes"].items()}
        self.totals.load_state(state["totals"])
        self.power.load_state(state["power"])
        self.round_columns = list(state["round_columns"])
        self._known = set(self.round_columns)
        if self.rounds is not None:
            self.rounds = list(state.get("rounds") or [])
        if self.out_dir is not None:
            self._resume_rounds(self.totals.rounds, int(state["round_bytes"]))
            self._open("evals", EVAL_COLUMNS, self.evals)
            if self.arrays is not None:
                self.arrays.resume(int(state["device_rows"]))
        self.updates.load_state(state["updates"])
        if self.handovers is not None:
            self.handovers.load_state(state.get("handovers"))

    def _resume_rounds(self, rows: int, size: int) -> None:
        """rounds.csv as it was at the checkpoint: cut back to its length then, or, where a column
        was added since (the file was written again with a wider header), its first ``rows`` rows
        written again under the checkpoint's header."""
        path = self.out_dir / "rounds.csv"
        if header(path) == self.round_columns:
            truncate_file(path, size)  # not a link, nor a FIFO (refused)
            fh = open_append(path)
            self._files["rounds"] = (fh, csv.writer(fh), list(self.round_columns))
        else:
            self._open("rounds", self.round_columns, csv_rows(path, rows))

    def device_table(self, sigmas: np.ndarray, extra: dict[str, np.ndarray] | None = None,
                     own_rounds: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Per-device totals: selections, transmit and computation energy, dropped uploads, the fraction
        of rounds available and time-average expected power; ``extra`` adds columns (e.g. distance_m);
        ``own_rounds``: with edge servers, the rounds of each device's own edge (the rates count them)."""
        return {"device": np.arange(self.num_devices), "sigma": sigmas, **(extra or {}),
                **self.devices.table(self.totals.rounds, own_rounds)}

    def close(self, summary: dict, devices: dict[str, np.ndarray]) -> None:
        """Write the device table, the rest of the per-device arrays and, last, the summary. Every
        file is closed even when writing one fails (a full disk): none is left to a later
        garbage collection, where HDF5 would write again and may crash the process."""
        with contextlib.ExitStack() as closing:
            for fh, *_ in self._files.values():
                closing.callback(fh.close)
            closing.callback(self.updates.close)
            if self.handovers is not None:
                closing.callback(self.handovers.close)
            if self.arrays is not None:
                closing.callback(self.arrays.close)
            if "rounds" in self._files:  # (callbacks run last first: the rows kept are written before the file closes)
                closing.callback(self.single_rows.write, self._files["rounds"][0])
            self._files = {}
        if self.out_dir is None:
            return
        import pandas as pd

        write_atomic(self.out_dir / "devices.csv", pd.DataFrame(devices).to_csv(index=False))
        write_json_atomic(self.out_dir / "summary.json", summary)
