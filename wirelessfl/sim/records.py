"""Per-round and per-evaluation records, kept in memory and streamed to a run directory.

Rows are appended to CSV files as the run goes, so an interrupted run keeps everything recorded so
far; per-device arrays (gains, omega, q, P, Z) go to an npz at the end, and the summary is written
last, atomically: a run directory whose summary says "complete" is complete.

Besides ROUND_COLUMNS, rounds.csv has a column for every number in a round's Decision.info (the
scheduler's facts) and in the dict the algorithm's round returned; a name that is already a column
gets the prefix "scheduler_" or "algorithm_". A column first seen in a later round is added to the
file (rewritten once with the wider header); rounds without it leave it empty.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from ..jsonio import write_json_atomic
from .engine import RoundRecord

ROUND_COLUMNS = ["round", "t_start", "t_end", "downlink_s", "comp_s", "comm_s", "num_selected",
                 "selected", "upload_order", "airtime_s", "energy_j", "power_mean", "q_selected",
                 "queue_mean", "objective", "compute_energy_j", "num_available", "num_arrived", "dropped",
                 "server_round", "server_s", "extra_airtime_s", "extra_energy_j"]
"""energy_j is the round's transmit energy (P x time on the air), compute_energy_j its computation
energy (0 unless the computation model has one); dropped lists the devices whose uploads missed the
round deadline; server_round is 1 for a SAFARI server round (no device takes part) and server_s
its server computation time (0 otherwise); extra_airtime_s is the uplink time of traffic other than
the models (fair selection: bootstrap gradients, loss scalars, piggy-backed gradients; included in
comm_s) and extra_energy_j the transmit energy of the pre-round uploads."""
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
ARRAY_KEYS = ("gains", "omega", "q", "power", "queue", "available")
"""Per-round arrays of every device kept in decisions.npz (available: 1 where it could be scheduled)."""


def _ids(values: np.ndarray) -> str:
    return " ".join(str(int(v)) for v in values)


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
    """Collects round and evaluation rows and per-device totals; optionally streams them to disk."""

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
        self.keep_device_arrays = keep_device_arrays
        self.arrays: dict[str, list[np.ndarray]] = {k: [] for k in ARRAY_KEYS}
        self.out_dir = out_dir
        self.round_columns = list(ROUND_COLUMNS)
        self._known = set(ROUND_COLUMNS)  # round_columns as a set: a row with a key outside it widens the file
        self._files = {}
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            for name, cols in (("rounds", self.round_columns), ("evals", EVAL_COLUMNS)):
                self._open(name, cols, [])

    def _open(self, name: str, columns: list[str], rows: list[dict]) -> None:
        """(Re)write ``name``.csv with ``columns`` and ``rows``, and keep it open for appending."""
        if name in self._files:
            self._files[name][0].close()
        fh = open(self.out_dir / f"{name}.csv", "w", newline="")
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        fh.flush()
        self._files[name] = (fh, writer)

    def on_round(self, rec: RoundRecord) -> None:
        d = rec.decision
        sel = rec.selected
        row = {
            "round": rec.round, "t_start": rec.t_start, "t_end": rec.t_end,
            "downlink_s": rec.downlink_s, "comp_s": rec.comp_s, "comm_s": rec.comm_s,
            "num_selected": len(sel), "selected": _ids(sel), "upload_order": _ids(rec.upload_order),
            "airtime_s": " ".join(f"{a:.6g}" for a in rec.airtime_s),
            "energy_j": float(rec.energy_j.sum()),
            "power_mean": float(d.power[sel].mean()) if len(sel) else 0.0,
            "q_selected": " ".join(f"{q:.6g}" for q in d.q[sel]),
            "queue_mean": float(d.queue.mean()),
            "objective": d.info.get("objective", math.nan),
        }
        comp_energy = rec.compute_energy_j if rec.compute_energy_j is not None else np.zeros(len(sel))
        arrived = rec.arrived if rec.arrived is not None else np.ones(len(sel), dtype=bool)
        available = rec.available if rec.available is not None else np.ones(self.num_devices, dtype=bool)
        row.update(compute_energy_j=float(comp_energy.sum()), num_available=int(available.sum()),
                   num_arrived=int(arrived.sum()), dropped=_ids(sel[~arrived]),
                   server_round=int(rec.server_round), server_s=rec.server_s,
                   extra_airtime_s=rec.extra_airtime_s, extra_energy_j=rec.extra_energy_j)
        row.update(_numbers(d.info, "scheduler", skip=("objective",)))
        row.update(_numbers(rec.metrics, "algorithm"))
        self.rounds.append(row)
        self.selections[sel] += 1
        self.energy_j[sel] += rec.energy_j
        self.compute_energy_j[sel] += comp_energy
        self.dropped[sel[~arrived]] += 1
        self.available_rounds += available
        self.expected_power_sum += d.power * d.q
        if self.keep_device_arrays:
            for key, value in (("gains", rec.gains), ("omega", d.omega), ("q", d.q),
                               ("power", d.power), ("queue", d.queue), ("available", available)):
                self.arrays[key].append(np.asarray(value, dtype=np.float32))
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
            fh.flush()

    def state_dict(self) -> dict:
        """The records so far, as plain Python values and tensors (for checkpoints)."""
        import torch

        def plain(rows):
            return [{k: (v.item() if isinstance(v, np.generic) else v) for k, v in row.items()} for row in rows]

        return {"rounds": plain(self.rounds), "evals": plain(self.evals),
                "selections": torch.from_numpy(self.selections.copy()),
                "energy_j": torch.from_numpy(self.energy_j.copy()),
                "compute_energy_j": torch.from_numpy(self.compute_energy_j.copy()),
                "dropped": torch.from_numpy(self.dropped.copy()),
                "available_rounds": torch.from_numpy(self.available_rounds.copy()),
                "expected_power_sum": torch.from_numpy(self.expected_power_sum.copy()),
                "arrays": {k: torch.from_numpy(np.stack(v)) if v else None for k, v in self.arrays.items()}}

    def load_state(self, state: dict) -> None:
        """Restore records from a checkpoint and rewrite the CSV files to match them exactly."""
        self.rounds, self.evals = list(state["rounds"]), list(state["evals"])
        self.selections = state["selections"].numpy().copy()
        self.energy_j = state["energy_j"].numpy().copy()
        for key in ("compute_energy_j", "dropped", "available_rounds"):  # absent in older checkpoints
            if key in state:
                setattr(self, key, state[key].numpy().copy())
        self.expected_power_sum = state["expected_power_sum"].numpy().copy()
        self.arrays = {k: (list(v.numpy()) if v is not None else []) for k, v in state["arrays"].items()}
        if len(self.arrays.get("available", [])) != len(self.arrays["gains"]):  # an older checkpoint
            self.arrays["available"] = [np.ones(self.num_devices, dtype=np.float32)] * len(self.arrays["gains"])
        self.round_columns = _columns(self.rounds)
        self._known = set(self.round_columns)
        if self._files:
            self._open("rounds", self.round_columns, self.rounds)
            self._open("evals", EVAL_COLUMNS, self.evals)

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
        """Write the device table, the per-device arrays and, last, the summary."""
        for fh, _ in self._files.values():
            fh.close()
        self._files = {}
        if self.out_dir is None:
            return
        import pandas as pd

        pd.DataFrame(devices).to_csv(self.out_dir / "devices.csv", index=False)
        if self.keep_device_arrays and self.rounds:
            np.savez_compressed(self.out_dir / "decisions.npz",
                                **{k: np.stack(v) for k, v in self.arrays.items()})
        write_json_atomic(self.out_dir / "summary.json", summary)


def _columns(rows: list[dict]) -> list[str]:
    """ROUND_COLUMNS, then every other key of ``rows`` in the order it first appears."""
    seen = dict.fromkeys(ROUND_COLUMNS)
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)
