"""A sweep's results once it has run: its table (table.csv, one row per member), its parameter
columns, the mean and spread over seeds per grid point, and a fixed-width rendering of either."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import pandas as pd

from ..files import DamagedFile, read_table
from ..jsonio import read_json
from .analysis import seed_std, with_spread

__all__ = ["METRICS", "aggregate", "format_table", "load_table", "sweep_parameters"]

METRICS = ["final_accuracy", "time_to_target_s", "mean_time_avg_power", "mean_distinct_per_round",
           "total_energy_j", "total_compute_energy_j", "dropped_uploads", "sim_time_s", "rounds",
           "mean_round_s", "wall_time_s"]
"""Summary numbers copied into the table (mean_round_s = sim_time_s / rounds)."""


def load_table(sweep_dir: str | Path) -> pd.DataFrame:
    """The results table of a sweep folder (one row per member; see sweep())."""
    path = Path(sweep_dir) / "table.csv"
    if not path.exists():
        raise FileNotFoundError(f"{sweep_dir}: no sweep table (table.csv) found there")
    table = read_table(path, ("status", "error"), dtype={"error": object})
    table["error"] = table["error"].fillna("")
    return table


def sweep_parameters(sweep_dir: str | Path) -> list[str]:
    """The parameter columns of a sweep folder (grid keys, plus "variant" when it has variants)."""
    path = Path(sweep_dir) / "sweep.json"
    parameters = read_json(path).get("parameters")
    if not isinstance(parameters, list):
        raise DamagedFile(f"{path}: damaged: it has no list of parameters")
    return parameters


def aggregate(table: pd.DataFrame, parameters: Sequence[str]) -> pd.DataFrame:
    """Mean and std over seeds (analysis.SPREAD) of each metric, per grid point (complete runs)."""
    done = table[table["status"] == "complete"]
    metrics = [c for c in METRICS if c in done]
    if not parameters:
        grouped = done.assign(_all=0).groupby("_all")
    else:
        grouped = done.groupby(list(parameters), sort=True, dropna=False)
    both = pd.concat([grouped[metrics].mean().add_suffix("_mean"), grouped[metrics].agg(seed_std).add_suffix("_std")],
                     axis=1)
    out = both[[f"{c}_{stat}" for c in metrics for stat in ("mean", "std")]].copy()
    out.insert(0, "seeds", grouped.size())
    out.loc[out["seeds"] < 2, [f"{c}_std" for c in metrics]] = math.nan  # one seed: no spread to show
    return out.reset_index(drop=not parameters)


def format_table(table: pd.DataFrame) -> str:
    """A fixed-width text rendering of a results table or of aggregate()'s output.

    The run key and metrics without any value (e.g. accuracy in timing-only sweeps) are left out,
    errors are shortened, and aggregated columns are shown as "mean ± std".
    """
    shown = table.drop(columns=[c for c in ("key",) if c in table])
    for name in METRICS:
        mean, std = f"{name}_mean", f"{name}_std"
        if mean in shown:  # aggregated: one "mean ± std" column per metric
            both = [with_spread(m, s, ".4g", ".2g") for m, s in zip(shown[mean], shown[std])]
            shown = shown.drop(columns=[std]).assign(**{mean: both}).rename(columns={mean: name})
            if table[mean].isna().all():
                shown = shown.drop(columns=[name])
        elif name in shown and shown[name].isna().all():
            shown = shown.drop(columns=[name])
    if "error" in shown:
        if (shown["error"] == "").all():
            shown = shown.drop(columns="error")
        else:
            shown = shown.assign(error=shown["error"].str.slice(0, 40))
    return shown.to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="-")
