"""Per-round and per-evaluation records, kept in memory and streamed to a run directory.

Rows are appended to CSV files as the run goes, so an interrupted run keeps everything recorded so
far; per-device arrays (gains, omega, q, P, Z) stream to decisions.h5 (see device_arrays), and the
summary is written last, atomically: a run directory whose summary says "complete" is complete.
No file is opened before the run starts (``start``) or before a resume has checked that the
checkpoint and the files on disk agree (``check_resume``): a failed resume leaves the folder as it was.

Besides ROUND_COLUMNS, rounds.csv has a column for every number in a round's Decision.info (the
scheduler's facts) and in the dict the algorithm's round returned; a name that is already a column
gets the prefix "scheduler_" or "algorithm_". A column first seen in a later round is added to the
file (rewritten once with the wider header); rounds without it leave it empty.
"""
from __future__ import annotations

import csv
import math
import time
from pathlib import Path

import numpy as np

from ..files import open_append, write_atomic
from ..jsonio import write_json_atomic
from .device_arrays import DECISIONS, DeviceArrays
from .engine import RoundRecord

ROUND_COLUMNS = ["round", "t_start", "t_end", "downlink_s", "comp_s", "comm_s", "num_selected",
                 "selected", "upload_order", "airtime_s", "energy_j", "power_mean", "q_selected",
                 "queue_mean", "objective", "compute_energy_j", "num_available", "num_arrived", "dropped",
                 "server_round", "server_s", "extra_airtime_s", "extra_energy_j", "idle_s"]
"""energy_j is the round's transmit energy (P x time on the air), compute_energy_j its computation
energy (0 unless the computation model has one); dropped lists the devices whose uploads missed the
round deadline; server_round is 1 for a SAFARI server round (no device takes part) and server_s
its server computation time (0 otherwise); extra_airtime_s is the uplink time of traffic other than
the models (fair selection: bootstrap gradients, loss scalars, piggy-backed gradients; included in
comm_s) and extra_energy_j the transmit energy of the pre-round uploads; idle_s is run.idle_round_s for a
round in which nothing took time (nobody could be scheduled), else 0."""
EVAL_COLUMNS = ["round", "time_s", "accuracy", "test_loss", "train_loss",
                # personalised evaluation (spec 004), empty unless run.personalised_eval is on
                "personal_accuracy", "personal_accuracy_std", "local_accuracy", "personal_per_device",
                # fairness (spec 000), empty unless fairness metrics are on
                "device_acc_mean", "dissimilarity", "device_acc_p10", "device_acc_min", "device_acc_range",
                "pairwise_gap"]
"""The device_* columns and dissimilarity are filled when fairness metrics are on (see
learning.fairness): per-device test accuracy, mean, 10th percentile, minimum and max - min;
dissimilarity = population std of the per-device accuracies (spec 000 sec. 4); pairwise_gap = mean
|a_i - a_j| over all pairs. All as fractions (x 100 for percentage points)."""


FLUSH_EVERY_S = 0.5
"""Round rows reach the file at least this often (evaluation rows at once, all rows before every
checkpoint): a flush per round cost a timing-only run a tenth of its time, and a run killed
outright loses at most this much wall time of rows, which its checkpoint does not need."""


def _ids(values: np.ndarray) -> str:
    return " ".join(map(str, np.asarray(values, dtype=np.int64).tolist()))


def _floats(values: np.ndarray) -> str:
    return " ".join(f"{v:.6g}" for v in np.asarray(values, dtype=float).tolist())


def _numbers(values: dict, prefix: str, skip: tuple[str, ...] = ()) -> dict:
    """The numeric entries of ``values`` (booleans as 0/1), renamed where they clash with a column."""
    out = {}
    for key, value in values.items():
        if key in skip or not isinstance(value, (int, float, np.integer, np.floating)):
            continue
        name = f"{prefix}_{key}" if key in ROUND_COLUMNS else key
        out[name] = int(value) if isinstance(value, (bool, np.bool_)) else value.item() \
            if isinstance(value, np.generic) else value
    return out


class Recorder:
    """Collects round and evaluation rows and per-device totals; streams them to ``out_dir``."""

    def __init__(self, num_devices: int, out_dir: Path | None = None, keep_device_arrays: bool = True):
        self.num_devices = num_devices
        self.rounds: list[dict] = []
        self.evals: list[dict] = []
        self.selections = np.zeros(num_devices, dtype=np.int64)
        self.energy_j = np.zeros(num_devices)  # transmit energy
        self.compute_energy_j = np.zeros(num_devices)
        self.dropped = np.zeros(num_devices, dtype=np.int64)
        self.available_rounds = np.zeros(num_devices, dtype=np.int64)
        self.expected_power_sum = np.zeros(num_devices)  # sum over rounds of P q (Fig. 7)
        self.out_dir = out_dir
        self.arrays = (DeviceArrays(out_dir / DECISIONS, num_devices)
                       if keep_device_arrays and out_dir is not None else None)
        self.round_columns = list(ROUND_COLUMNS)
        self._known = set(ROUND_COLUMNS)  # round_columns as a set: a row with a key outside it widens the file
        self._files = {}
        self._flushed_at = time.monotonic()

    def start(self) -> None:
        """A fresh run: the CSV files with their headers, an empty decisions.h5."""
        if self.out_dir is None:
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for name, cols in (("rounds", self.round_columns), ("evals", EVAL_COLUMNS)):
            self._open(name, cols, [])
        if self.arrays is not None:
            self.arrays.start()

    def _open(self, name: str, columns: list[str], rows: list[dict]) -> None:
        """(Re)write ``name``.csv with ``columns`` and ``rows`` atomically, and keep it open for appending."""
        import io

        if name in self._files:
            self._files[name][0].close()
        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        path = self.out_dir / f"{name}.csv"
        write_atomic(path, text.getvalue())
        fh = open_append(path)
        self._files[name] = (fh, csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore"))

    def on_round(self, rec: RoundRecord) -> None:
        d = rec.decision
        sel = rec.selected
        row = {
            "round": rec.round, "t_start": rec.t_start, "t_end": rec.t_end,
            "downlink_s": rec.downlink_s, "comp_s": rec.comp_s, "comm_s": rec.comm_s,
            "num_selected": len(sel), "selected": _ids(sel), "upload_order": _ids(rec.upload_order),
            "airtime_s": _floats(rec.airtime_s),
            "energy_j": float(rec.energy_j.sum()),
            # sum / size: np.mean's value at a fraction of its cost
            "power_mean": float(d.power[sel].sum() / len(sel)) if len(sel) else 0.0,
            "q_selected": _floats(d.q[sel]),
            "queue_mean": float(d.queue.sum() / d.queue.size),
            "objective": d.info.get("objective", math.nan),
        }
        comp_energy = rec.compute_energy_j
        comp_energy_sum = float(comp_energy.sum()) if comp_energy is not None else 0.0
        arrived = rec.arrived
        lost = None if arrived is None or arrived.all() else sel[~arrived]  # usually nobody
        available = rec.available
        row.update(compute_energy_j=comp_energy_sum,
                   num_available=self.num_devices if available is None else int(available.sum()),
                   num_arrived=len(sel) if lost is None else len(sel) - len(lost),
                   dropped="" if lost is None else _ids(lost),
                   server_round=int(rec.server_round), server_s=rec.server_s,
                   extra_airtime_s=rec.extra_airtime_s, extra_energy_j=rec.extra_energy_j, idle_s=rec.idle_s)
        row.update(_numbers(d.info, "scheduler", skip=("objective",)))
        row.update(_numbers(rec.metrics, "algorithm"))
        self.rounds.append(row)
        self.selections[sel] += 1
        self.energy_j[sel] += rec.energy_j
        if comp_energy_sum != 0.0:
            self.compute_energy_j[sel] += comp_energy
        if lost is not None:
            self.dropped[lost] += 1
        self.available_rounds += 1 if available is None else available
        self.expected_power_sum += d.power * d.q
        if self.arrays is not None:
            self.arrays.append({"gains": rec.gains, "omega": d.omega, "q": d.q, "power": d.power, "queue": d.queue,
                                "available": np.ones(self.num_devices) if available is None else available})
        self._write("rounds", row)

    def on_eval(self, row: dict) -> None:
        self.evals.append(row)
        self._write("evals", row)

    def _write(self, name: str, row: dict) -> None:
        if name == "rounds" and not row.keys() <= self._known:
            # a new column: widen the header (the row is already among self.rounds)
            self.round_columns = _columns(self.rounds)
            self._known = set(self.round_columns)
            if name in self._files:
                self._open("rounds", self.round_columns, self.rounds)
            return
        if name in self._files:
            fh, writer = self._files[name]
            writer.writerow(row)
            now = time.monotonic()
            if name == "evals" or now - self._flushed_at >= FLUSH_EVERY_S:
                self.flush()
                self._flushed_at = now

    def flush(self) -> None:
        """Hand the rows written so far to the operating system (checkpoints call it first)."""
        for fh, _ in self._files.values():
            fh.flush()

    def state_dict(self) -> dict:
        """The records so far (for checkpoints); the CSV rows and the per-device arrays are flushed
        to disk first (of the arrays only their row count is kept)."""
        self.flush()
        if self.arrays is not None:
            self.arrays.flush()

        def plain(rows):
            return [{k: (v.item() if isinstance(v, np.generic) else v) for k, v in row.items()} for row in rows]

        return {"rounds": plain(self.rounds), "evals": plain(self.evals), "selections": self.selections.copy(),
                "energy_j": self.energy_j.copy(), "compute_energy_j": self.compute_energy_j.copy(),
                "dropped": self.dropped.copy(), "available_rounds": self.available_rounds.copy(),
                "expected_power_sum": self.expected_power_sum.copy(),
                "device_rows": self.arrays.rows if self.arrays is not None else 0}

    def check_resume(self, state: dict, rounds_done: int) -> str | None:
        """Why the checkpoint's records cannot continue this folder (None: they can); touches nothing.

        The checkpoint must hold ``rounds_done`` rounds, and the files on disk at least those rounds,
        the same ones (a run killed after its checkpoint has written more, which a resume drops)."""
        rows = state.get("rounds")
        if not isinstance(rows, list) or len(rows) != rounds_done:
            return f"the checkpoint's records have {len(rows) if isinstance(rows, list) else 'no'} rounds, " \
                   f"its counters {rounds_done}"
        if [r.get("round") for r in rows] != list(range(rounds_done)):
            return "the checkpoint's round records are not rounds 0, 1, ... in order"
        if any(not isinstance(e, dict) or not 0 <= e.get("round", -1) <= rounds_done for e in state.get("evals", [])):
            return "the checkpoint's evaluations do not belong to its rounds"
        for key in ("selections", "energy_j", "compute_energy_j", "dropped", "available_rounds", "expected_power_sum"):
            if np.shape(state.get(key)) != (self.num_devices,):
                return f"the checkpoint's {key} is not one value per device ({self.num_devices})"
        if self.out_dir is None:
            return None
        for name in ("rounds.csv", "evals.csv"):
            path = self.out_dir / name
            if path.is_symlink():
                return f"{name} is a symbolic link"
        disk = _csv_rounds(self.out_dir / "rounds.csv")
        if disk is None:
            return "rounds.csv is missing or cannot be read"
        if disk[:rounds_done] != list(range(rounds_done)):
            return f"rounds.csv holds {len(disk)} rounds, not the checkpoint's first {rounds_done}"
        if self.arrays is not None:
            device_rows = state.get("device_rows", 0)
            if device_rows != rounds_done:
                return f"the checkpoint has {device_rows} rounds of per-device arrays for {rounds_done} rounds"
            return self.arrays.check(device_rows)
        return None

    def load_state(self, state: dict) -> None:
        """Restore records from a checkpoint (checked by check_resume) and cut the files on disk back
        to them: rewrite the CSV files, drop the per-device rows written after it."""
        self.rounds, self.evals = list(state["rounds"]), list(state["evals"])
        for key in ("selections", "energy_j", "compute_energy_j", "dropped", "available_rounds", "expected_power_sum"):
            setattr(self, key, np.asarray(state[key]).copy())
        self.round_columns = _columns(self.rounds)
        self._known = set(self.round_columns)
        if self.out_dir is not None:
            self._open("rounds", self.round_columns, self.rounds)
            self._open("evals", EVAL_COLUMNS, self.evals)
            if self.arrays is not None:
                self.arrays.resume(int(state["device_rows"]))

    def device_table(self, sigmas: np.ndarray, extra: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """Per-device totals: selections, transmit and computation energy, dropped uploads, the fraction
        of rounds available and time-average expected power; ``extra`` adds columns (e.g. distance_m)."""
        n_rounds = max(len(self.rounds), 1)
        return {"device": np.arange(self.num_devices), "sigma": sigmas, **(extra or {}),
                "selections": self.selections, "selection_rate": self.selections / n_rounds,
                "transmit_energy_j": self.energy_j, "compute_energy_j": self.compute_energy_j,
                "dropped": self.dropped, "available_rate": self.available_rounds / n_rounds,
                "time_avg_power": self.expected_power_sum / n_rounds}

    def close(self, summary: dict, devices: dict[str, np.ndarray]) -> None:
        """Write the device table, the rest of the per-device arrays and, last, the summary."""
        for fh, _ in self._files.values():
            fh.close()
        self._files = {}
        if self.out_dir is None:
            return
        import pandas as pd

        if self.arrays is not None:
            self.arrays.close()
        write_atomic(self.out_dir / "devices.csv", pd.DataFrame(devices).to_csv(index=False))
        write_json_atomic(self.out_dir / "summary.json", summary)


def _csv_rounds(path: Path) -> list | None:
    """The round column of a rounds.csv (None: missing or unreadable)."""
    try:
        with open(path, newline="") as fh:
            return [int(row["round"]) for row in csv.DictReader(fh)]
    except (OSError, KeyError, ValueError, TypeError, csv.Error):
        return None


def _columns(rows: list[dict]) -> list[str]:
    """ROUND_COLUMNS, then every other key of ``rows`` in the order it first appears."""
    seen = dict.fromkeys(ROUND_COLUMNS)
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)
