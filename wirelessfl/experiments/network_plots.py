"""The figures of networks: network.png, the map of a run with several cells (wirelessfl.network: the
sites, each device where it is, coloured by the cell serving it and sized by the updates it
started), and tiers.png, accuracy against time per tier of a run with edge servers and a cloud."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .plots import _save, plt
from .run import RunResult

__all__ = ["plot_network", "plot_tiers"]


LEGEND_CELLS = 8
"""A map names each cell with devices in its legend up to this many; past it the title says what the
colours are (a legend of 10,000 entries took minutes to draw and covered the map)."""
LABELLED_SITES = 30
"""Sites labelled with their cell and sub-band up to this many cells; past it the labels would hide the map."""


def plot_network(runs: dict[str, RunResult], out_dir: str | Path, title: str | None = None) -> Path | None:
    """network.png, one map per run with several cells (None when no run has them): each site a
    black triangle (labelled with its cell and sub-band up to LABELLED_SITES cells), each device a dot
    in its cell's colour (where it ended), its area proportional to the updates it started, each
    cell's devices and uplink utilisation in the legend (up to LEGEND_CELLS cells with devices; cells
    without any are left out); with moving devices their tracks (round protocols: their positions at
    each round) and their handovers, a cross where each happened (handovers.csv). The drawing costs
    the same whatever the number of cells: all devices in one scatter, all sites in another."""
    # (an [orbits] run's cells are ground stations, with no place on a plane: orbits.png maps them)
    runs = {name: run for name, run in runs.items() if run.summary.get("cells") and "site_m" in run.summary["cells"][0]}
    if not runs:
        return None
    # one map: its legend on the right; several: each legend under its map (the saved figure is
    # cropped to what was drawn, so an equal-aspect map leaves no empty margins)
    fig, axes = plt.subplots(1, len(runs), figsize=(6.4, 5.0) if len(runs) == 1 else (5.2 * len(runs), 5.0),
                             squeeze=False)
    for ax, (name, run) in zip(axes[0], runs.items()):
        cells, devices = run.summary["cells"], run.devices
        most = max(float(devices["selections"].max()), 1.0)
        ax.scatter(devices["x_m"], devices["y_m"], s=6 + 60 * devices["selections"] / most,
                   color=[f"C{int(c) % 10}" for c in devices["cell"]], alpha=0.75, zorder=2)
        sites = np.array([row["site_m"] for row in cells], dtype=float).reshape(-1, 2)
        few = len(cells) <= LABELLED_SITES
        if few:
            ax.scatter(sites[:, 0], sites[:, 1], marker="^", s=90, color="k", zorder=3)
        else:  # many: small grey marks under the devices, which would be lost among them
            ax.scatter(sites[:, 0], sites[:, 1], marker="^", s=max(1.0, 90 * LABELLED_SITES / len(cells)), color="0.6",
                       linewidths=0, zorder=1)
        if few:
            for row in cells:
                ax.annotate(f"{row['cell']} (band {row['band']})", tuple(row["site_m"]), textcoords="offset points",
                            xytext=(6, 6), fontsize=8)
        served = [row for row in cells if row["devices"]]
        if len(served) <= LEGEND_CELLS:  # a marker of one size per cell, whatever its dots' sizes
            for row in served:
                ax.scatter([], [], s=20, color=f"C{row['cell'] % 10}",
                           label=f"cell {row['cell']}: {row['devices']} devices, uplink "
                                 f"{100 * row['uplink_utilisation']:.0f} % busy")
            colours = ""
        else:
            colours = f"\ncolour: the serving cell ({len(served)} cells with devices)"
        _tracks_and_handovers(ax, run)
        ax.set_aspect("equal")
        ax.set_xlabel("x (m)")
        ax.set_ylabel("y (m)")
        ax.set_title(f"{name}: {len(cells)} cells; dot area: updates started{colours}", fontsize=9, loc="left")
        ax.grid(alpha=0.25)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0) if len(runs) == 1 else (0.0, -0.12),
                      ncol=1 if len(runs) == 1 else 2, frameon=False, handletextpad=0.3, borderaxespad=0.0)
    if title:
        fig.suptitle(title)
    return _save(fig, out_dir, "network.png", crop=True)


def plot_tiers(runs: dict[str, RunResult], out_dir: str | Path, title: str | None = None) -> Path | None:
    """tiers.png, one panel per run with edge servers (None when no run has them): the cloud's
    model's accuracy against simulated time (evals.csv), and each edge's model's as it came up to the
    cloud (the cloud rows' ``edge_accuracy`` of rounds.csv), a dot per edge and evaluation."""
    runs = {name: run for name, run in runs.items()
            if "tier" in run.rounds and "edge_accuracy" in run.rounds and not run.evals.empty}
    if not runs:
        return None
    fig, axes = plt.subplots(1, len(runs), figsize=(6.0 * len(runs), 4.2), squeeze=False)
    for ax, (name, run) in zip(axes[0], runs.items()):
        clouds = run.rounds[(run.rounds["tier"] == "cloud") & run.rounds["edge_accuracy"].notna()]
        for _, row in clouds.iterrows():
            values = np.array(str(row["edge_accuracy"]).split(), dtype=float)
            # the edges a row applied, where it names them (event edges), else every cell in order
            named = [int(float(c)) for c in str(row.get("edge", "")).split() if c.replace(".", "", 1).isdigit()]
            cells = named if len(named) == values.size else range(values.size)
            ax.scatter(np.full(values.size, row["t_end"]), 100 * values, s=10, color=[f"C{c % 10}" for c in cells],
                       alpha=0.6)
        ax.step(run.evals["time_s"], 100 * run.evals["accuracy"], where="post", color="k", lw=1.8,
                label="the cloud's model")
        ax.scatter([], [], s=10, color="C0", label="each edge's model, as it came up (a colour per cell)")
        ax.set_xlabel("simulated wall-clock time (s)")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"{name}: accuracy per tier", fontsize=9, loc="left")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    if title:
        fig.suptitle(title)
    return _save(fig, out_dir, "tiers.png")


def _tracks_and_handovers(ax, run: RunResult) -> None:
    """Moving devices on a map: each one's track where rounds recorded its positions (decisions.h5),
    and a cross at every handover (handovers.csv)."""
    folder = run.run_dir
    if folder is None or not (folder / "handovers.csv").exists():
        return
    import pandas as pd

    try:
        positions = run.decisions.get("positions")
    except (FileNotFoundError, OSError):
        positions = None
    if positions is not None and len(positions) > 1:
        for n in range(positions.shape[1]):
            ax.plot(positions[:, n, 0], positions[:, n, 1], color="0.6", lw=0.5, alpha=0.6, zorder=1)
    moves = pd.read_csv(folder / "handovers.csv")
    if len(moves):
        ax.scatter(moves["x_m"], moves["y_m"], marker="x", s=14, color="k", alpha=0.6, zorder=2,
                   label=f"handovers ({len(moves)})")
