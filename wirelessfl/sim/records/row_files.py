"""rounds.csv and evals.csv as the rows stream to them: kept open for appending while the run goes,
flushed at a pace (FLUSH_EVERY_S), rounds.csv written again with a wider header when a row brings a
new column, and both cut back to a checkpoint on a resume, after checking that the files on disk
hold what the checkpoint says they held (rounds.csv by its length, header and running digest)."""
from __future__ import annotations

import contextlib
import csv
import io
import time
from pathlib import Path

from ...files import FileDigest, open_append, truncate_file, write_atomic
from .aggregation_rows import SingleUpdateRows
from .columns import EVAL_COLUMNS, ROUND_COLUMNS, columns
from .round_file import csv_rows, header, rounds_digest_problem, rounds_file_problem
from .summary import RoundTotals

__all__ = ["FLUSH_EVERY_S", "RowFiles", "rows_problem"]

FLUSH_EVERY_S = 0.5
"""Round rows reach the file at least this often (evaluation rows at once, all rows before every
checkpoint): a flush per round cost a timing-only run a tenth of its time, and a run killed
outright loses at most this much wall time of rows, which its checkpoint does not need."""


def rows_problem(state: dict, rounds_done: int) -> str | None:
    """Why a checkpoint's records do not stand for ``rounds_done`` rounds (None: they do): its count
    of round rows, and evaluations of rounds it has."""
    if not isinstance(state.get("round_rows"), int):
        if isinstance(state.get("rounds"), list) and "totals" not in state:
            return "the checkpoint keeps its rows itself (written by an earlier version): start the run again"
        return "the checkpoint has no count of round rows"
    if state["round_rows"] != rounds_done:
        return f"the checkpoint's records have {state['round_rows']} rounds, its counters {rounds_done}"
    if any(not isinstance(e, dict) or not 0 <= e.get("round", -1) <= rounds_done for e in state.get("evals", [])):
        return "the checkpoint's evaluations do not belong to its rounds"
    return None


class RowFiles:
    """The open rounds.csv and evals.csv of a run folder (``out_dir``; None: no folder, nothing is
    written). ``totals`` counts the rows of rounds.csv, each before it is written.

    Rows are written as their values in the file's column order (``write_values``), or as dicts
    (``write``); the rows of one-update aggregations wait in ``single_rows`` and are written a chunk
    at a time, always before the next row of any other kind."""

    def __init__(self, out_dir: Path | None, totals: RoundTotals):
        self.out_dir = out_dir
        self.totals = totals
        self.round_columns = list(ROUND_COLUMNS)
        self.known = set(ROUND_COLUMNS)  # round_columns as a set: a row with a key outside it widens the file
        self.open_files = {}  # name -> (file, csv.writer, columns)
        self.single_rows = SingleUpdateRows()  # rows of one-update aggregations not yet written to rounds.csv
        self.flushed_at = time.monotonic()
        self.guard = None  # the runner's FolderGuard: files are written by name only in the folder it began in
        # rounds.csv's running digest: a checkpoint holds it, a resume checks the file against it
        self.round_digest = FileDigest(out_dir / "rounds.csv" if out_dir is not None else None)

    def start(self) -> None:
        """Both files with their headers alone."""
        for name, cols in (("rounds", self.round_columns), ("evals", EVAL_COLUMNS)):
            self.open(name, cols, [])

    def open(self, name: str, columns: list[str], rows: list[dict]) -> None:
        """(Re)write ``name``.csv with ``columns`` and ``rows`` atomically, and keep it open for appending."""
        if name in self.open_files:
            self.open_files[name][0].close()
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
        self.open_files[name] = (fh, csv.writer(fh), list(columns))

    def takes_single_rows(self) -> bool:
        """rounds.csv is open with nothing but ROUND_COLUMNS: a one-update aggregation's row can wait
        in ``single_rows``."""
        return "rounds" in self.open_files and len(self.round_columns) == len(ROUND_COLUMNS)

    def add_single(self, row: tuple) -> None:
        """The row of an aggregation of one update (aggregation_rows.single_update_row)."""
        self.single_rows.add(row, self.open_files["rounds"][0])
        self.flush_if_due()

    def write(self, name: str, row: dict) -> None:
        """A row given as a dict (a key outside rounds.csv's columns widens it first)."""
        if name == "rounds" and not row.keys() <= self.known:
            self._widen(row)
            return
        if name in self.open_files:
            # what csv.DictWriter writes, without its overhead
            self.write_values(name, [row.get(key, "") for key in self.open_files[name][2]])

    def write_values(self, name: str, values: list) -> None:
        """A row given as its values in the file's column order."""
        if name in self.open_files:
            if name == "rounds":
                self.single_rows.write(self.open_files[name][0])  # the rows before it first
            self.open_files[name][1].writerow(values)
            self.flush_if_due(now=name == "evals")

    def flush_if_due(self, now: bool = False) -> None:
        """Flush when FLUSH_EVERY_S has passed since the last flush (``now``: at once)."""
        t = time.monotonic()
        if now or t - self.flushed_at >= FLUSH_EVERY_S:
            self.flush()
            self.flushed_at = t

    def _widen(self, row: dict) -> None:
        """``row`` brings a new column: rounds.csv is written again with the wider header (its rows
        read back from the file as the text they were written as), then ``row``."""
        self.round_columns = columns([dict.fromkeys(self.round_columns), row])
        self.known = set(self.round_columns)
        if "rounds" not in self.open_files:
            return
        self.flush()
        rows = csv_rows(self.out_dir / "rounds.csv", self.totals.rounds - 1)
        self.open("rounds", self.round_columns, rows + [row])

    def flush(self) -> None:
        """Hand the rows written so far to the operating system."""
        if "rounds" in self.open_files:
            self.single_rows.write(self.open_files["rounds"][0])
        for fh, *_ in self.open_files.values():
            fh.flush()

    def state_dict(self) -> dict:
        """rounds.csv's columns, and its length and digest now (flushed first by the caller)."""
        rounds_file = self.out_dir / "rounds.csv" if self.out_dir is not None else None
        round_bytes = rounds_file.stat().st_size if rounds_file is not None else 0
        return {"round_columns": list(self.round_columns), "round_bytes": round_bytes,
                "round_sha256": self.round_digest.advance(round_bytes)["sha256"]}

    def check(self, state: dict, rounds_done: int) -> str | None:
        """Why the files on disk cannot be cut back to the checkpoint's ``rounds_done`` rows (None:
        they can); touches nothing."""
        if self.out_dir is None:
            return None
        for name in ("rounds.csv", "evals.csv"):
            if (self.out_dir / name).is_symlink():
                return f"{name} is a symbolic link"
        problem = rounds_file_problem(self.out_dir / "rounds.csv", rounds_done, state.get("round_columns"),
                                      int(state.get("round_bytes", 0)))
        if problem is None:  # not only as long: the same bytes
            problem = rounds_digest_problem(self.round_digest, rounds_done, state.get("round_columns"),
                                            int(state.get("round_bytes", 0)), state.get("round_sha256"))
        return problem

    def load_state(self, state: dict, evals: list[dict]) -> None:
        """rounds.csv's columns at the checkpoint; on disk, rounds.csv cut back to the checkpoint's
        rows (``totals`` counts them) and evals.csv written again with ``evals``."""
        self.round_columns = list(state["round_columns"])
        self.known = set(self.round_columns)
        if self.out_dir is not None:
            self._resume_rounds(self.totals.rounds, int(state["round_bytes"]))
            self.open("evals", EVAL_COLUMNS, evals)

    def _resume_rounds(self, rows: int, size: int) -> None:
        """rounds.csv as it was at the checkpoint: cut back to its length then, or, where a column
        was added since (the file was written again with a wider header), its first ``rows`` rows
        written again under the checkpoint's header."""
        path = self.out_dir / "rounds.csv"
        if header(path) == self.round_columns:
            truncate_file(path, size)  # not a link, nor a FIFO (refused)
            fh = open_append(path)
            self.open_files["rounds"] = (fh, csv.writer(fh), list(self.round_columns))
        else:
            self.open("rounds", self.round_columns, csv_rows(path, rows))

    def close_with(self, closing: contextlib.ExitStack) -> None:
        """Have ``closing`` close both files, each even when another fails, the rows kept written
        first (its callbacks run last first)."""
        for fh, *_ in self.open_files.values():
            closing.callback(fh.close)
        if "rounds" in self.open_files:
            closing.callback(self.single_rows.write, self.open_files["rounds"][0])
        self.open_files = {}
