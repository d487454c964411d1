"""The headline numbers of a run (summary.json), from its records."""
from __future__ import annotations

import math

import numpy as np


POWER_TOLERANCE = 0.05
"""The running time-average power counts as settled once it stays within 5 % of P̄."""


def power_settled_round(power_by_round, p_bar: float) -> float:
    """The first round from which the running time-average of the devices' mean expected power
    (P q, averaged over devices) stays within POWER_TOLERANCE of ``p_bar`` to the end of the run;
    NaN when it ends above that, or when the run has no round decisions (event protocols).

    The budget is a long-run average: the virtual queues start empty (Z = 0, as in the paper), so
    the first rounds transmit at up to p_max until the queues have grown; this says how long that
    transient lasted at the scenario's V."""
    p = np.asarray(power_by_round, dtype=float)
    if p.size == 0:
        return math.nan
    running = np.cumsum(p) / np.arange(1, p.size + 1)
    above = np.flatnonzero(running > (1 + POWER_TOLERANCE) * p_bar)
    if above.size == 0:
        return 0.0
    return float(above[-1] + 1) if above[-1] + 1 < p.size else math.nan


class PowerSettling:
    """``power_settled_round`` kept as the rounds come, in constant memory: the running sum of the
    devices' mean expected power and the last round at which its running average was above the
    tolerance (the same floating-point sums as np.cumsum)."""

    def __init__(self, p_bar: float):
        self.limit = (1 + POWER_TOLERANCE) * p_bar
        self.total, self.count, self.last_above = 0.0, 0, -1

    def add(self, power: float) -> None:
        """One round decision's mean expected power."""
        self.total += power
        self.count += 1
        if self.total / self.count > self.limit:
            self.last_above = self.count - 1

    @property
    def settled_round(self) -> float:
        """What ``power_settled_round`` gives for the powers added so far."""
        if self.count == 0:
            return math.nan
        if self.last_above < 0:
            return 0.0
        return float(self.last_above + 1) if self.last_above + 1 < self.count else math.nan

    def state_dict(self) -> dict:
        return {"total": self.total, "count": self.count, "last_above": self.last_above}

    def load_state(self, state: dict) -> None:
        self.total, self.count, self.last_above = float(state["total"]), int(state["count"]), int(state["last_above"])


_SUMS = ("comm_s", "extra_airtime_s", "comp_s", "downlink_s", "server_round", "server_s", "energy_j",
         "compute_energy_j", "dropped", "num_selected", "carried")


class RoundTotals:
    """The sums over rounds.csv's rows that the summary reports, kept as the rows are written, so
    that neither the recorder nor a checkpoint has to hold the rows (each sum is the one Python's
    ``sum`` over the rows gives: the same additions in the same order)."""

    def __init__(self):
        self.rounds, self.end_s = 0, 0.0
        self.sums = dict.fromkeys(_SUMS, 0)

    def add(self, row: dict) -> None:
        """One row of rounds.csv."""
        sums = self.sums
        self.rounds += 1
        self.end_s = float(row["t_end"])
        sums["comm_s"] += row["comm_s"]
        sums["extra_airtime_s"] += row.get("extra_airtime_s", 0.0)
        sums["comp_s"] += row["comp_s"]
        sums["downlink_s"] += row["downlink_s"]
        sums["server_round"] += row.get("server_round", 0)
        sums["server_s"] += row.get("server_s", 0.0)
        sums["energy_j"] += row["energy_j"]
        sums["compute_energy_j"] += row.get("compute_energy_j", 0.0)
        missed = row["num_selected"] - row.get("num_arrived", row["num_selected"])
        gone = row.get("dropped")  # the devices whose updates are gone, as ids ("": none); else all missed
        gone = missed if gone is None else gone.count(" ") + 1 if isinstance(gone, str) and gone else 0
        sums["dropped"] += gone
        sums["carried"] += missed - gone  # not in by the aggregation, not gone: carried to a later one
        sums["num_selected"] += row["num_selected"]

    def add_aggregation(self, t_end: float, comm_s: float, comp_s: float, downlink_s: float, energy_j: float,
                        compute_energy_j: float, num_selected: int) -> None:
        """One row of an aggregation of updates (``add`` with the values its row always has: no
        extra airtime, no server round, nothing dropped), without the row."""
        sums = self.sums
        self.rounds += 1
        self.end_s = float(t_end)
        sums["comm_s"] += comm_s
        sums["extra_airtime_s"] += 0.0
        sums["comp_s"] += comp_s
        sums["downlink_s"] += downlink_s
        sums["server_round"] += 0
        sums["server_s"] += 0.0
        sums["energy_j"] += energy_j
        sums["compute_energy_j"] += compute_energy_j
        sums["num_selected"] += num_selected

    @classmethod
    def of(cls, rows) -> "RoundTotals":
        """The totals of ``rows`` (a list of rounds.csv rows as dicts)."""
        totals = cls()
        for row in rows:
            totals.add(row)
        return totals

    def state_dict(self) -> dict:
        return {"rounds": self.rounds, "end_s": self.end_s, "sums": dict(self.sums)}

    def load_state(self, state: dict) -> None:
        self.rounds, self.end_s = int(state["rounds"]), float(state["end_s"])
        self.sums = {key: state["sums"].get(key, 0) for key in _SUMS}  # "carried": added since


def _totals(sums: dict, devices: dict) -> dict:
    """The summary's totals over the rounds (``sums``: RoundTotals.sums) and the most energy a device spent."""
    return {
        "total_comm_s": float(sums["comm_s"]),
        "total_extra_airtime_s": float(sums["extra_airtime_s"]),
        "total_comp_s": float(sums["comp_s"]),
        "total_downlink_s": float(sums["downlink_s"]),
        "server_rounds": int(sums["server_round"]),
        "total_server_s": float(sums["server_s"]),
        "total_energy_j": float(sums["energy_j"]),  # transmit energy
        "total_compute_energy_j": float(sums["compute_energy_j"]),
        "max_device_energy_j": float(np.max(devices["transmit_energy_j"] + devices["compute_energy_j"],
                                            initial=0.0)),
        "dropped_uploads": int(sums["dropped"]),  # rounds.csv's dropped: updates gone at their round's end
        "carried_uploads": int(sums["carried"]),  # semi_sync: late uploads carried to a later aggregation
    }


def summarise(scenario, totals: RoundTotals, evals: list[dict], devices: dict,
              *, wall_time_s: float, model_bits: int, updates: dict | None = None,
              sim_time_s: float | None = None, power_settled: float = math.nan,
              mean_snr_db: float | None = None) -> dict:
    """Headline numbers of a run. ``totals``: the sums over its rounds.csv rows; ``updates``: the
    recorder's counts over updates.csv (uploads, applied, staleness_sum, airtime_s, bits, and outcomes: its rows
    by outcome); ``sim_time_s``:
    where the clock stopped; ``power_settled``: the round from which the expected power stayed within
    the budget (see power_settled_round)."""
    from ...config import to_dict

    options = to_dict(scenario).get("scheduler", {}).get("options", {})
    target = scenario.run.target_accuracy
    hit = next((e for e in evals if target is not None and e["accuracy"] >= target), None)
    n_rounds, sums = totals.rounds, totals.sums
    updates = updates or {}
    applied = updates.get("applied", 0)
    end_s = totals.end_s if n_rounds else 0.0
    if sim_time_s is not None:
        end_s = max(end_s, float(sim_time_s))
    busy_s = float(updates.get("busy_s", 0.0))
    # physical units: the devices' mean SNR in dB (mean_snr_db), after the power budget
    radio = {} if mean_snr_db is None else {"mean_snr_db": mean_snr_db}
    return {
        "name": scenario.name, "seed": scenario.seed, "scheduler": scenario.scheduler.name,
        "algorithm": scenario.learning.algorithm, "access": scenario.link.access,
        "protocol": scenario.protocol.name,
        # draws per round, for schedulers that have them
        "m": options.get("m"), "scheduler_options": options,
        "num_devices": scenario.devices.count, "model_bits": model_bits,
        # updates.csv's bits, averaged: what an upload put on the air (compressed, piggy-backs included)
        "mean_upload_bits": updates.get("bits", 0.0) / updates["uploads"] if updates.get("uploads") else math.nan,
        "p_bar": scenario.link.p_bar,  # the power budget, a long-run average per device
        **radio,
        "power_settled_round": power_settled,
        "rounds": n_rounds, "sim_time_s": end_s,
        # one row of rounds.csv per aggregation (server version), under every protocol
        "aggregations": n_rounds, "uploads": int(updates.get("uploads", 0)), "updates_applied": int(applied),
        "mean_staleness": updates.get("staleness_sum", 0) / applied if applied else math.nan,
        # how long the uplink carried at least one model upload, and that share of the simulated time
        # (total_comm_s sums the uploads' airtimes: more where they share the band)
        "uplink_busy_s": busy_s,
        "uplink_utilisation": busy_s / end_s if end_s > 0 else math.nan,
        "final_accuracy": evals[-1]["accuracy"] if evals else math.nan,
        "best_accuracy": max((e["accuracy"] for e in evals), default=math.nan),
        "final_dissimilarity": evals[-1].get("dissimilarity", math.nan) if evals else math.nan,
        "target_accuracy": target,
        "time_to_target_s": hit["time_s"] if hit else math.nan,
        "rounds_to_target": hit["round"] if hit else math.nan,
        **_totals(sums, devices),
        # updates.csv's rows by outcome: applied, stale, late_dropped, offline, lost, silent, in_flight
        "outcomes": {k: int(v) for k, v in (updates.get("outcomes") or {}).items()},
        "mean_time_avg_power": float(np.mean(devices["time_avg_power"])),
        "mean_distinct_per_round": float(sums["num_selected"]) / n_rounds if n_rounds else 0.0,
        "wall_time_s": wall_time_s,
        "wall_per_round_s": wall_time_s / n_rounds if n_rounds else math.nan,
    }
