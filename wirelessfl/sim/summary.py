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


def summarise(scenario, rounds: list[dict], evals: list[dict], devices: dict,
              *, wall_time_s: float, model_bits: int, updates: dict | None = None,
              sim_time_s: float | None = None, power_by_round=()) -> dict:
    """Headline numbers of a run. ``updates``: the recorder's counts over updates.csv (uploads,
    applied, staleness_sum, airtime_s); ``sim_time_s``: where the clock stopped; ``power_by_round``:
    the mean expected power of each round decision (see power_settled_round)."""
    from ..config import to_dict

    options = to_dict(scenario).get("scheduler", {}).get("options", {})
    target = scenario.run.target_accuracy
    hit = next((e for e in evals if target is not None and e["accuracy"] >= target), None)
    n_rounds = len(rounds)
    updates = updates or {}
    applied = updates.get("applied", 0)
    end_s = float(rounds[-1]["t_end"]) if rounds else 0.0
    if sim_time_s is not None:
        end_s = max(end_s, float(sim_time_s))
    return {
        "name": scenario.name, "seed": scenario.seed, "scheduler": scenario.scheduler.name,
        "algorithm": scenario.learning.algorithm, "access": scenario.link.access,
        "protocol": scenario.protocol.name,
        # draws per round, for schedulers that have them
        "m": options.get("m"), "scheduler_options": options,
        "num_devices": scenario.devices.count, "model_bits": model_bits,
        "p_bar": scenario.link.p_bar,  # the power budget, a long-run average per device
        "power_settled_round": power_settled_round(power_by_round, scenario.link.p_bar),
        "rounds": n_rounds, "sim_time_s": end_s,
        # one row of rounds.csv per aggregation (server version), under every protocol
        "aggregations": n_rounds, "uploads": int(updates.get("uploads", 0)), "updates_applied": int(applied),
        "mean_staleness": updates.get("staleness_sum", 0) / applied if applied else math.nan,
        # share of the simulated time the uplink carried model uploads (FDMA: summed over devices)
        "uplink_utilisation": updates.get("airtime_s", 0.0) / end_s if end_s > 0 else math.nan,
        "final_accuracy": evals[-1]["accuracy"] if evals else math.nan,
        "best_accuracy": max((e["accuracy"] for e in evals), default=math.nan),
        "final_dissimilarity": evals[-1].get("dissimilarity", math.nan) if evals else math.nan,
        "target_accuracy": target,
        "time_to_target_s": hit["time_s"] if hit else math.nan,
        "rounds_to_target": hit["round"] if hit else math.nan,
        "total_comm_s": float(sum(r["comm_s"] for r in rounds)),
        "total_extra_airtime_s": float(sum(r.get("extra_airtime_s", 0.0) for r in rounds)),
        "total_comp_s": float(sum(r["comp_s"] for r in rounds)),
        "total_downlink_s": float(sum(r["downlink_s"] for r in rounds)),
        "server_rounds": int(sum(r.get("server_round", 0) for r in rounds)),
        "total_server_s": float(sum(r.get("server_s", 0.0) for r in rounds)),
        "total_energy_j": float(sum(r["energy_j"] for r in rounds)),  # transmit energy
        "total_compute_energy_j": float(sum(r.get("compute_energy_j", 0.0) for r in rounds)),
        "max_device_energy_j": float(np.max(devices["transmit_energy_j"] + devices["compute_energy_j"],
                                            initial=0.0)),
        "dropped_uploads": int(sum(r["num_selected"] - r.get("num_arrived", r["num_selected"]) for r in rounds)),
        "mean_time_avg_power": float(np.mean(devices["time_avg_power"])),
        "mean_distinct_per_round": float(np.mean([r["num_selected"] for r in rounds])) if rounds else 0.0,
        "wall_time_s": wall_time_s,
        "wall_per_round_s": wall_time_s / n_rounds if n_rounds else math.nan,
    }
