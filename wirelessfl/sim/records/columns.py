"""The columns of rounds.csv and evals.csv, and how a row's numbers are written: device ids and
per-device floats as space-separated text, the sums of an aggregation's updates as numpy would sum
them (so a row does not depend on whether it came from arrays or from updates one by one), and the
numbers of a part's dict as columns of their own."""
from __future__ import annotations

import numpy as np

__all__ = ["EVAL_COLUMNS", "G6", "ROUND_COLUMNS", "columns", "floats", "fsum", "ids", "numbers"]

ROUND_COLUMNS = ["round", "t_start", "t_end", "downlink_s", "comp_s", "comm_s", "num_selected",
                 "selected", "upload_order", "airtime_s", "energy_j", "power_mean", "q_selected",
                 "queue_mean", "objective", "compute_energy_j", "num_available", "num_arrived", "dropped",
                 "server_round", "server_s", "extra_airtime_s", "extra_energy_j", "idle_s",
                 "num_updates", "staleness_mean", "staleness_max"]
"""energy_j is the round's transmit energy (P x time on the air), compute_energy_j its computation
energy (0 unless the computation model has one); dropped lists the devices whose updates of the round
are gone (missed the round deadline, lost, silent, offline; not semi_sync's late uploads carried to a
later aggregation); server_round is 1 for a SAFARI server round (no device takes part) and server_s
its server computation time (0 otherwise); extra_airtime_s is the uplink time of traffic other than
the models (fair selection: bootstrap gradients, loss scalars, piggy-backed gradients; included in
comm_s) and extra_energy_j the transmit energy of the pre-round uploads; idle_s is run.idle_round_s for a
round in which nothing took time (nobody could be scheduled), else 0. A row is one aggregation (one
server version): num_updates is the number of updates it applied and staleness_mean / staleness_max
their staleness (the version applied to minus the version started from; 0 under sync). Under the
event protocols (see wirelessfl.sim.events.engine) selected lists the devices of the round (semi_sync) or of
the updates applied (fedbuff, fedasync, in arrival order; upload_order and q_selected are then empty),
and energy_j is their transmit energy up to the aggregation; every update's own energy is in
updates.csv and in the device totals."""
EVAL_COLUMNS = ["round", "time_s", "accuracy", "test_loss", "train_loss",
                # personalised evaluation (docs/papers/perfedavg.md), empty unless run.personalised_eval is on
                "personal_accuracy", "personal_accuracy_std", "local_accuracy", "personal_per_device",
                # fairness (docs/papers/fair_selection.md), empty unless fairness metrics are on
                "device_acc_mean", "dissimilarity", "device_acc_p10", "device_acc_min", "device_acc_range",
                "pairwise_gap"]
"""The device_* columns and dissimilarity are filled when fairness metrics are on (see
learning.fairness): per-device test accuracy, mean, 10th percentile, minimum and max - min;
dissimilarity = population std of the per-device accuracies (docs/papers/fair_selection.md,
"Metrics"); pairwise_gap = mean |a_i - a_j| over all pairs. All as fractions (x 100 for percentage points)."""



def ids(values: np.ndarray) -> str:
    return " ".join(map(str, np.asarray(values, dtype=np.int64).tolist()))


G6 = "{:.6g}".format


def fsum(values: list) -> float:
    """The sum of ``values`` as numpy sums a float64 array of them, to the last bit: one by one from
    0.0 below eight values (numpy's pairwise summation adds fewer than eight in order), numpy's own
    sum above."""
    if len(values) < 8:
        total = 0.0
        for value in values:
            total += value
        return total
    return float(np.add.reduce(np.array(values, dtype=float)))


def floats(values: np.ndarray) -> str:
    return " ".join(map(G6, np.asarray(values, dtype=float).tolist()))


def numbers(values: dict, prefix: str, skip: tuple[str, ...] = ()) -> dict:
    """The numeric entries of ``values`` (booleans as 0/1), renamed where they clash with a column."""
    out = {}
    for key, value in values.items():
        if key in skip or not isinstance(value, (int, float, np.integer, np.floating)):
            continue
        name = f"{prefix}_{key}" if key in ROUND_COLUMNS else key
        out[name] = int(value) if isinstance(value, (bool, np.bool_)) else value.item() \
            if isinstance(value, np.generic) else value
    return out


def columns(rows: list[dict]) -> list[str]:
    """ROUND_COLUMNS, then every other key of ``rows`` in the order it first appears."""
    seen = dict.fromkeys(ROUND_COLUMNS)
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)
