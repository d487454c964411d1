"""Analysis as in the paper: curves on a common time grid, seed averages, time to target, speed-ups,
and best-setting tables over a range of computation times.

A run with a constant computation time c per round takes, up to round r, sum_{i<=r} comm_i + r c
simulated seconds, and nothing else in it depends on c (the channel, the schedule and the training
are the same). So one run per setting at c = 0 gives its accuracy curve for every c: shift each
evaluation by round x c. That is how the tables reuse runs across the computation-time grid.
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np
import pandas as pd


SPREAD = "std over seeds (population std, ddof = 0)"
"""The one spread convention of every report, sweep table and plot: the population standard deviation
of the per-seed values."""


def seed_std(values) -> float:
    """The spread of per-seed values (see SPREAD); NaN values are left out. NaN when fewer than two
    are left: one seed has no spread (0 would read as a measured, perfectly repeatable one)."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    return float(v.std(ddof=0)) if v.size > 1 else float("nan")


def with_spread(mean: float, std: float, fmt: str = ".2f", spread_fmt: str | None = None) -> str:
    """"mean ± std" in ``fmt`` (the spread in ``spread_fmt``, default ``fmt``); the mean alone when
    there is no spread (one seed: ``seed_std`` is NaN)."""
    text = format(mean, fmt)
    return text if math.isnan(std) else f"{text} ± {format(std, spread_fmt or fmt)}"


def on_grid(time_s: Sequence[float], values: Sequence[float], grid: np.ndarray) -> np.ndarray:
    """Linear interpolation of one run onto ``grid``; NaN past the run's last point."""
    t = np.asarray(time_s, dtype=float)
    v = np.asarray(values, dtype=float)
    return np.interp(grid, t, v, left=v[0], right=np.nan)


def shift_by_compute(evals: pd.DataFrame, compute_s: float) -> np.ndarray:
    """Evaluation times of a run made with no computation, as if each round had taken ``compute_s`` more."""
    return evals["time_s"].to_numpy(float) + evals["round"].to_numpy(float) * compute_s


def average_curves(curves: Iterable[np.ndarray], grid: np.ndarray) -> pd.DataFrame:
    """Mean, std, min and max over runs at each grid point (only where every run has a value)."""
    stack = np.vstack(list(curves))
    complete = ~np.isnan(stack).any(axis=0)
    with np.errstate(all="ignore"):
        frame = pd.DataFrame({"time_s": grid, "mean": stack.mean(0), "std": stack.std(0),
                              "min": stack.min(0), "max": stack.max(0)})
    return frame[complete].reset_index(drop=True)


def rolling_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing rolling average for display (window 1 returns the values)."""
    if window <= 1:
        return np.asarray(values, dtype=float)
    return pd.Series(values).rolling(window, min_periods=1).mean().to_numpy()


def time_to_target(time_s: Sequence[float], values: Sequence[float], target: float) -> float:
    """First time the piecewise-linear curve reaches ``target`` (NaN if it never does)."""
    t = np.asarray(time_s, dtype=float)
    v = np.asarray(values, dtype=float)
    hit = np.flatnonzero(v >= target)
    if hit.size == 0:
        return math.nan
    i = hit[0]
    if i == 0:
        return float(t[0])
    # crossing between points i-1 and i of the linear interpolation
    frac = (target - v[i - 1]) / (v[i] - v[i - 1])
    return float(t[i - 1] + frac * (t[i] - t[i - 1]))


def speedup(baseline_s: float, ours_s: float) -> float:
    """How many times faster ours reaches the target than the baseline (uniform / lyapunov)."""
    return baseline_s / ours_s if ours_s > 0 else math.nan


def mean_time_to_target(runs: Sequence[pd.DataFrame], target: float, compute_s: float = 0.0,
                        grid_points: int = 2000, smooth: int = 1) -> float:
    """Time to target of the seed-averaged curve, for runs recorded with zero computation time."""
    return mean_times_to_target(runs, target, [compute_s], grid_points, smooth)[0]


def mean_times_to_target(runs: Sequence[pd.DataFrame], target: float, compute_grid: Iterable[float],
                         grid_points: int = 2000, smooth: int = 1) -> list[float]:
    """:func:`mean_time_to_target` at each computation time of ``compute_grid``: the seed-averaged
    curve (``average_curves``' mean where every run has a value) of the runs shifted by each."""
    columns = [(e["time_s"].to_numpy(float), e["round"].to_numpy(float), e["accuracy"].to_numpy(float))
               for e in runs]  # read once for the whole grid: a table sweeps hundreds of times
    out = []
    for c in compute_grid:
        shifted = [time + rounds * float(c) for time, rounds, _ in columns]  # as shift_by_compute
        grid = np.linspace(0.0, min(t[-1] for t in shifted), grid_points)
        stack = np.vstack([on_grid(t, acc, grid) for t, (_, _, acc) in zip(shifted, columns)])
        complete = ~np.isnan(stack).any(axis=0)
        mean = stack.mean(0)[complete]
        out.append(time_to_target(grid[complete], rolling_mean(mean, smooth), target))
    return out


def best_setting_table(times: pd.DataFrame) -> pd.DataFrame:
    """Ranges of computation time with the setting that reaches the target first.

    ``times`` has columns compute_s, setting and time_to_target_s (NaN = never). Returns rows
    (from_s, to_s, setting, time_to_target_s at from_s) merging consecutive grid points with the
    same best setting; boundaries are midpoints between grid points where the best setting changes.
    """
    wide = times.pivot_table(index="compute_s", columns="setting", values="time_to_target_s",
                             aggfunc="mean", dropna=False).sort_index()
    best = wide.fillna(np.inf).idxmin(axis=1)
    reached = np.isfinite(wide.min(axis=1, skipna=True))
    comps = wide.index.to_numpy(float)
    rows = []
    for i, (c, setting) in enumerate(best.items()):
        label = setting if reached.iloc[i] else "none reaches the target"
        if rows and rows[-1]["setting"] == label:
            continue
        start = c if i == 0 else (comps[i - 1] + c) / 2
        if rows:
            rows[-1]["to_s"] = start
        rows.append({"from_s": start, "to_s": math.inf, "setting": label,
                     "time_to_target_s": float(wide.loc[c].min())})
    return pd.DataFrame(rows, columns=["from_s", "to_s", "setting", "time_to_target_s"])


def markdown_table(frame: pd.DataFrame, floatfmt: str = ".3g") -> str:
    """A DataFrame as a GitHub Markdown table (no extra dependency)."""
    def cell(v):
        return format(v, floatfmt) if isinstance(v, float) else str(v)

    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *body])
