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
import math
from pathlib import Path

import numpy as np

from ...config.rules import PER_ROUND_BYTES
from ...fields import ConfigError, physical_memory
from ...files import make_folder, write_atomic
from ...jsonio import write_json_atomic
from .aggregation_rows import aggregation_values, single_update_row
from .columns import EVAL_COLUMNS, ROUND_COLUMNS, numbers
from .device_arrays import DECISIONS, DeviceArrays
from .device_totals import DeviceTotals
from .handover_log import HandoverLog
from .round_record import AggregationRecord, RoundRecord
from .round_rows import round_row
from .row_files import RowFiles, rows_problem
from .summary import PowerSettling, RoundTotals
from .update_log import OUTCOMES, UPDATE_COLUMNS, UpdateLog
from .update_rows import UpdateRows

__all__ = ["EVAL_COLUMNS", "OUTCOMES", "ROUND_COLUMNS", "Recorder", "UPDATE_COLUMNS", "UpdateLog"]


class Recorder:
    """Collects round, evaluation and update rows and per-device totals; streams them to ``out_dir``.

    Per-device totals come from the rounds (sync: ``on_round``) or, for the event protocols, from
    the updates (``on_update``): a round record with ``per_update`` set leaves them alone.

    With a folder the rows of rounds.csv live only on disk (``files``): the summary's sums are kept
    as they come (``totals``), and a checkpoint refers to the file by its length, so neither memory
    nor a checkpoint grows with the run. Without one they are kept in ``rounds``.
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
        self.files = RowFiles(out_dir, self.totals)  # rounds.csv and evals.csv
        self.arrays = (DeviceArrays(out_dir / DECISIONS, num_devices, extra={"positions": (2,)} if positions else None)
                       if keep_device_arrays and out_dir is not None else None)
        # the timed downlink's and the backhaul's columns (the event protocols'), the uplink's own counts
        self.updates = UpdateRows(UpdateLog(out_dir / "updates.csv" if out_dir is not None else None, downlink, cells,
                                            backhaul, upload_columns),
                                  self.devices, downlink, backhaul, upload_counts)
        # moving devices among several cells: handovers.csv
        self.handovers = HandoverLog(out_dir / "handovers.csv" if out_dir is not None else None) if handovers else None
        self.edge_rounds = False  # rows of edge servers' rounds (wirelessfl.sim.sync.tiers): a device counts its edge's

    def start(self) -> None:
        """A fresh run: the CSV files with their headers, an empty decisions.h5."""
        if self.out_dir is None:
            return
        make_folder(self.out_dir, theirs=True)
        self.files.start()
        self.updates.log.start()
        if self.handovers is not None:
            self.handovers.start()
        if self.arrays is not None:
            self.arrays.start()

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
        self.files.write("rounds", row)

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
        files = self.files
        if (not extra and len(rec.updates) == 1 and self.rounds is None and files.takes_single_rows()
                and "queue_mean" not in rec.info and "objective" not in rec.info):
            self._single_update_row(rec)
            return
        values = aggregation_values(rec, self.devices.count_available(rec.available, rec.available_since))
        # t_end, comm_s, comp_s, downlink_s, energy_j, compute_energy_j, num_selected
        self.totals.add_aggregation(values[2], values[5], values[4], values[3], values[10], values[15], values[6])
        if self.rounds is None and extra.keys() <= files.known:
            if len(files.round_columns) > len(ROUND_COLUMNS):
                values += [extra.get(name, "") for name in files.round_columns[len(ROUND_COLUMNS):]]
            files.write_values("rounds", values)
            return
        row = dict(zip(ROUND_COLUMNS, values))
        row.update(extra)
        if self.rounds is not None:
            self._keep(row)
        files.write("rounds", row)

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
        self.files.add_single(row)

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
        self.files.write("rounds", row)

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
        row, lost = round_row(rec, self.num_devices)
        d, available = rec.decision, rec.available
        self.devices.add_available(available)
        if not rec.per_update:
            comp_energy = rec.compute_energy_j if row["compute_energy_j"] != 0.0 else None
            self.devices.add_round(rec.selected, rec.energy_j, comp_energy, lost)
            self.updates.write_round(rec)
        if rec.q is None:  # a round decision: its expected power P q (dispatched updates count their own)
            expected = d.power * d.q
            self.devices.expected_power_sum += expected
            # an edge's round: the mean over its own devices (the others are the other edges')
            on = available if self.edge_rounds and available is not None else None
            self.power.add(float(expected.mean() if on is None else expected[on].mean() if on.any() else 0.0))
        if self.arrays is not None:
            arrays = {"gains": rec.gains, "omega": d.omega, "q": d.q, "power": d.power, "queue": d.queues(),
                      "available": np.ones(self.num_devices) if available is None else available}
            if where is not None:
                arrays["positions"] = where
            self.arrays.append(arrays)
        return row

    def on_update(self, u) -> None:
        """An event protocol's update whose fate is known (``u`` has the attributes of
        wirelessfl.sim.events.flight.Update): its row, and the per-device totals."""
        self.updates.on_update(u)

    def on_eval(self, row: dict) -> None:
        self.evals.append(row)
        self.files.write("evals", row)

    def flush(self) -> None:
        """Hand the rows written so far to the operating system (checkpoints call it first)."""
        self.files.flush()
        self.updates.log.flush()
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

        return {"round_rows": self.totals.rounds, **self.files.state_dict(),
                "device_sha256": self.arrays.digests() if self.arrays is not None else None,
                "rounds": plain(self.rounds) if self.rounds is not None else None,
                "totals": self.totals.state_dict(), "power": self.power.state_dict(),
                "evals": plain(self.evals), **self.devices.state_dict(),
                "device_rows": self.arrays.rows if self.arrays is not None else 0, **self.updates.state_dict(),
                "handovers": self.handovers.state_dict() if self.handovers is not None else None}

    def check_resume(self, state: dict, rounds_done: int) -> str | None:
        """Why the checkpoint's records cannot continue this folder (None: they can); touches nothing.

        The checkpoint must count ``rounds_done`` rounds, and the files on disk hold at least those
        rounds (a run killed after its checkpoint has written more, which a resume drops)."""
        problem = rows_problem(state, rounds_done) or self.devices.check(state) or self.updates.counts_problem(state)
        if problem is not None or self.out_dir is None:
            return problem
        problem = (self.files.check(state, rounds_done) or self.updates.log.check(state["updates"])
                   or (self.handovers.check(state.get("handovers")) if self.handovers is not None else None))
        if problem is not None or self.arrays is None:
            return problem
        device_rows = state.get("device_rows", 0)
        if device_rows != rounds_done:
            return f"the checkpoint has {device_rows} rounds of per-device arrays for {rounds_done} rounds"
        return self.arrays.check(device_rows, state.get("device_sha256"))

    def load_state(self, state: dict) -> None:
        """Restore records from a checkpoint (checked by check_resume) and cut the files on disk back
        to them: rounds.csv to its length at the checkpoint, evals.csv rewritten, the per-device rows
        and update rows written after it dropped."""
        self.evals = list(state["evals"])
        self.devices.load_state(state)
        self.totals.load_state(state["totals"])
        self.power.load_state(state["power"])
        if self.rounds is not None:
            self.rounds = list(state.get("rounds") or [])
        self.files.load_state(state, self.evals)
        if self.arrays is not None:
            self.arrays.resume(int(state["device_rows"]))
        self.updates.load_state(state)
        if self.handovers is not None:
            self.handovers.load_state(state.get("handovers"))

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
            closing.callback(self.updates.log.close)
            if self.handovers is not None:
                closing.callback(self.handovers.close)
            if self.arrays is not None:
                closing.callback(self.arrays.close)
            self.files.close_with(closing)
        if self.out_dir is None:
            return
        import pandas as pd

        write_atomic(self.out_dir / "devices.csv", pd.DataFrame(devices).to_csv(index=False))
        write_json_atomic(self.out_dir / "summary.json", summary)
