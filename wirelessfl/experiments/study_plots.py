"""Figures of parameter studies: a metric against one grid parameter, or a heatmap over two.

Both read a sweep's results table (see experiments.sweep) and use complete runs only. Lines show
the mean over seeds with error bars of one std over seeds (analysis.SPREAD; none with a single seed).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")  # files only: no display is needed or assumed
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..files import make_folder, write_figure  # noqa: E402
from .analysis import seed_std  # noqa: E402
from .sweep import load_table, sweep_parameters  # noqa: E402

_LABELS = {
    "final_accuracy": "final test accuracy", "time_to_target_s": "time to target accuracy (s)",
    "mean_time_avg_power": "mean time-average power", "mean_distinct_per_round": "distinct devices per round",
    "total_energy_j": "total transmit energy (J)", "sim_time_s": "simulated time (s)",
    "rounds": "rounds", "mean_round_s": "mean round time (s)", "wall_time_s": "wall time per run (s)",
}


def _label(col: str) -> str:
    return _LABELS.get(col, col)


def _log_axis(values: Sequence[float]) -> bool:
    """Log scale when the positive values span at least two decades."""
    try:
        v = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        return False
    return bool(v.size and np.all(v > 0) and v.max() / v.min() >= 100)


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, (float, np.floating)) else str(value)


def _select(table: pd.DataFrame, parameters: Sequence[str], used: Sequence[str],
            where: Mapping[str, Any] | None) -> pd.DataFrame:
    """Complete runs at the ``where`` values; every other varying parameter must be pinned."""
    done = table[table["status"] == "complete"]
    for key, value in (where or {}).items():
        if key not in table:
            raise ValueError(f"where {key}: not a column of the table; parameters: {', '.join(parameters)}")
        col = done[key]
        match = np.isclose(col.astype(float), float(value)) if pd.api.types.is_numeric_dtype(col) \
            and isinstance(value, (int, float)) else col.astype(str) == str(value)
        done = done[match]
        if done.empty:
            raise ValueError(f"where {key}={value!r}: no complete run has this value")
    for p in parameters:
        if p not in used and p not in (where or {}) and done[p].nunique(dropna=False) > 1:
            values = ", ".join(_fmt(v) for v in sorted(done[p].unique(), key=str))
            raise ValueError(f"parameter {p} also varies in this sweep ({values}); "
                             f"pick one value with where {p}=VALUE (--where {p}=VALUE)")
    return done


def _check_columns(table: pd.DataFrame, cols: Sequence[str], parameters: Sequence[str]) -> None:
    for col in cols:
        if col not in table:
            metrics = [c for c in _LABELS if c in table]
            raise ValueError(f"{col!r}: not a column of the table; parameters: {', '.join(parameters)}; "
                             f"metrics: {', '.join(metrics)}")


def plot_study(sweep_dir: str | Path, x: str, y: str | Sequence[str], hue: str | None = None,
               kind: str = "line", out: str | Path | None = None,
               where: Mapping[str, Any] | None = None, table: pd.DataFrame | None = None,
               title: str | None = None, logy: bool | None = None) -> Path:
    """Plot a sweep's metric(s) ``y`` against parameter ``x``, one line per ``hue`` value.

    kind "line": mean over seeds with +- one standard deviation error bars, one panel per y, a log
        x axis when x spans two decades or more.
    kind "heatmap": the mean over seeds of each y on an (x, hue) grid; hue is required.
    where: {parameter: value} pins parameters that vary but are neither x nor hue.
    logy: log y axis (line plots) or log colour scale (heatmap); None: lines get a log y axis when
        the means span two decades or more, heatmaps a linear scale.
    Returns the path of the PNG (default SWEEP_DIR/<y>_vs_<x>[_by_<hue>][_heatmap].png).
    """
    sweep_dir = Path(sweep_dir)
    ys = [y] if isinstance(y, str) else list(y)
    if kind not in ("line", "heatmap"):
        raise ValueError(f"kind = {kind!r}: must be line or heatmap")
    if kind == "heatmap" and hue is None:
        raise ValueError("a heatmap needs two parameters: give hue as the second one")
    table = load_table(sweep_dir) if table is None else table
    parameters = sweep_parameters(sweep_dir) if (sweep_dir / "sweep.json").exists() else \
        [c for c in table.columns if c not in _LABELS and c not in ("seed", "status", "key", "error")]
    used = [x] + ([hue] if hue else [])
    _check_columns(table, used + ys, parameters)
    for col in used:
        if col not in parameters and col != "seed":
            raise ValueError(f"{col!r} is a metric, not a parameter of this sweep ({', '.join(parameters)})")
    data = _select(table, parameters, used, where)
    for col in ys:
        if data[col].isna().all():
            raise ValueError(f"{col}: no values in the complete runs (time_to_target_s needs training and "
                             "run.target_accuracy; final_accuracy needs training)")

    n = len(ys)
    fig, axes = plt.subplots(1, n, figsize=(5.4 * n if kind == "line" else 5.8 * n, 4.2), squeeze=False)
    for ax, col in zip(axes[0], ys):
        if kind == "line":
            _lines(ax, data, x, col, hue, logy)
        else:
            _heatmap(fig, ax, data, x, col, hue, bool(logy))
    if title or where:
        pinned = ", ".join(f"{k}={_fmt(v)}" for k, v in (where or {}).items())
        fig.suptitle(" | ".join(t for t in (title, pinned) if t))
    fig.tight_layout()
    if out is None:
        stem = "_and_".join(ys) + f"_vs_{x}" + (f"_by_{hue}" if hue else "") + \
            ("_heatmap" if kind == "heatmap" else "")
        out = sweep_dir / (stem.replace(".", "-") + ".png")
    out = Path(out)
    make_folder(out.parent, theirs=True)
    write_figure(fig, out, dpi=120)
    plt.close(fig)
    return out


def _lines(ax, data: pd.DataFrame, x: str, y: str, hue: str | None, logy: bool | None) -> None:
    groups = [(None, data)] if hue is None else list(data.groupby(hue, sort=True))
    means = data.groupby([c for c in (x, hue) if c])[y].mean().dropna()
    for k, (value, part) in enumerate(groups):
        label = None if hue is None else f"{hue.split('.')[-1]} = {_fmt(value)}"
        if part[x].isna().all():  # its part does not take x (uniform and V): one level across the axis
            mean, std = part[y].mean(), seed_std(part[y])
            ax.axhline(mean, color=f"C{k}", lw=1.5, ls="--", label=f"{label or y} (does not take {x})")
            if np.isfinite(std) and std > 0:
                ax.axhspan(mean - std, mean + std, color=f"C{k}", alpha=0.15)
            continue
        stats = part.groupby(x, sort=True)[y].agg(["mean", seed_std, "count"]).rename(columns={"seed_std": "std"})
        err = stats["std"].fillna(0.0)  # one seed: no spread to show
        ax.errorbar(stats.index, stats["mean"], yerr=err, marker="o", ms=4, capsize=3, lw=1.5, label=label,
                    color=f"C{k}")
    if _log_axis(data[x].dropna().unique()):
        ax.set_xscale("log")
    if logy or (logy is None and _log_axis(means.to_numpy())):
        ax.set_yscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(_label(y))
    seeds = data.groupby([c for c in (x, hue) if c])[y].count()
    counts = f"{seeds.min()}" + (f"-{seeds.max()}" if seeds.max() != seeds.min() else "")
    ax.set_title(f"mean ± population std over {counts} seed" + ("s" if seeds.max() > 1 else ""), fontsize=9)
    ax.grid(alpha=0.3, which="both")
    if hue is not None:
        ax.legend(fontsize=8)


def _heatmap(fig, ax, data: pd.DataFrame, x: str, y: str, hue: str, logy: bool) -> None:
    # runs of variants that do not take x or hue (uniform and scheduler.V) have no cell: left out,
    # and said so, instead of a column labelled "nan"
    untaken = data[x].isna() | data[hue].isna()
    if untaken.all():
        raise ValueError(f"a heatmap over {x} and {hue}: no complete run takes both")
    if untaken.any():
        which = sorted(data.loc[untaken, "variant"].astype(str).unique()) if "variant" in data else []
        ax.annotate(f"left out, not taking {x} or {hue}: " + (", ".join(which) or f"{int(untaken.sum())} runs"),
                    (0.5, 1.0), xycoords="axes fraction", xytext=(0, 3), textcoords="offset points",
                    ha="center", va="bottom", fontsize=8)
        data = data[~untaken]
    grid = data.pivot_table(index=hue, columns=x, values=y, aggfunc="mean", dropna=False).sort_index()
    grid = grid.reindex(sorted(grid.columns), axis=1)
    values = grid.to_numpy(dtype=float)
    finite = values[np.isfinite(values)]
    norm = None
    if logy and finite.size and (finite > 0).all():
        norm = matplotlib.colors.LogNorm(vmin=finite.min(), vmax=finite.max())
    im = ax.imshow(values, origin="lower", aspect="auto", cmap="viridis", norm=norm)
    ax.set_xticks(range(grid.shape[1]), [_fmt(v) for v in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [_fmt(v) for v in grid.index])
    ax.set_xlabel(x)
    ax.set_ylabel(hue)
    if not finite.size:
        mid = 0.0
    elif norm is not None:
        mid = float(np.sqrt(finite.min() * finite.max()))
    else:
        mid = (finite.min() + finite.max()) / 2
    for (i, j), v in np.ndenumerate(values):
        if math.isfinite(v):
            ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=8,
                    color="white" if v < mid else "black")
    fig.colorbar(im, ax=ax, label=f"{_label(y)} (mean over seeds)")
