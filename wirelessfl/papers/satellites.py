"""A study of this simulator: federated learning over a LEO constellation (figures/README_satellites.md).

``time_to_target``: the packaged scenario ``satellites`` (a Walker-delta 40/5/1 shell at 550 km and
53 deg, non-iid Fashion-MNIST, on-board training, three ground stations, uploads only inside passes at
the link budget's rate, pass_end = "resume"). Five variants:

- ``sync``: synchronous FedAvg, 10 satellites a round, the round waiting for each one's pass;
- ``fedbuff``: FedBuff, 20 satellites training at once, an aggregation every 10 updates;
- ``fedbuff_isl``: the same, a satellite out of view handing its update along its plane to one in view;
- ``fedbuff_1gs``: FedBuff with one ground station (Hawaii) instead of three;
- ``fedbuff_edges``: HierFAVG-style tiers, each of the three stations an edge server running FedBuff
  over its even share of the satellites, each to the station it sees longest with room (7 in flight,
  an aggregation every 3 updates: about FedBuff's 20 and 10 over three edges), a cloud on the ground
  averaging the edges after each of their aggregations
  (the variants before it run alike whether or not it is there: a run's folder is its scenario's hash).

It reports the time to the target accuracy in hours (mean and spread over seeds), the aggregations,
and how long an update waited for a pass (from the end of its computation to its upload's start).
``--scale tiny`` shrinks everything (a few satellites' data, hours of orbit, the logistic model) to
check that the pipeline runs; ``cpu`` is the scenario as packaged, stopping at the target.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..config import from_dict, to_dict
from .recipes import Recipe, Report, Runs, curve_rows, figure_caption, packaged, pyplot, reached_mean, run_summary, \
    runs_and_curves, save_figure

VARIANTS = {"sync": {"protocol.name": "sync"},
            "fedbuff": {},
            "fedbuff_isl": {"orbits.isl": True},
            "fedbuff_1gs": {"orbits.ground_stations": ["hawaii"]},
            "fedbuff_edges": {"hierarchy.tiers": "edge", "protocol.concurrency": 7, "protocol.buffer": 3}}
LABELS = {"sync": "sync FedAvg (m = 10)", "fedbuff": "FedBuff (K = 10, 20 in flight)",
          "fedbuff_isl": "FedBuff + ISL relaying", "fedbuff_1gs": "FedBuff, one station",
          "fedbuff_edges": "FedBuff, stations as edges"}

SCALES = {
    "tiny": ("run.time_budget_s=14400", "run.eval_every_s=3600", "learning.samples_per_device=20",
             "learning.local_steps=1", "learning.eval_train_samples=200", "learning.model=logreg",
             "protocol.concurrency=4", "protocol.buffer=2", "scheduler.m=4", "devices.compute_s=60"),
    "cpu": ("run.stop_at_target=true",),
}


def families(scale: str, overrides: Sequence[str]) -> dict:
    """One family: the packaged scenario's FedBuff member as the base, the five variants over it."""
    member = dict(packaged("satellites").variant_scenarios())["fedbuff"]
    data = to_dict(member, only_changed=True)
    data.pop("variants", None)
    base = from_dict(data, [*SCALES[scale], *overrides])
    return {f"satellites/time_to_target/{scale}": (base, dict(VARIANTS))}


def collect(runs: Runs, scale: str) -> pd.DataFrame:
    """Per run: time to the target (hours), aggregations, uploads, the mean wait for a pass, and its
    accuracy curve."""
    rows = []
    for variant in (v for v in VARIANTS if v in runs.dirs):
        for seed, folder in runs.seeds(variant):
            s = run_summary(folder)
            updates = pd.read_csv(folder / "updates.csv")
            sent = updates[updates["tx_start_s"].notna()]
            key = {"variant": variant, "seed": seed}
            hours = s["time_to_target_s"] / 3600.0 if s["time_to_target_s"] is not None else math.nan
            rows.append({"kind": "run", **key, "time_to_target_h": hours, "target": s["target_accuracy"],
                         "aggregations": s["aggregations"], "uploads": s["uploads"],
                         "final_accuracy": s["final_accuracy"], "sim_time_h": s["sim_time_s"] / 3600.0,
                         "pass_wait_min": float((sent["tx_start_s"] - sent["compute_end_s"]).mean() / 60.0)
                         if len(sent) else math.nan,
                         "passes_per_upload": float(sent["attempts"].mean()) if len(sent) else math.nan})
            rows += curve_rows(folder, key)
    return pd.DataFrame(rows)


def report(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    runs, curves = runs_and_curves(data)
    numbers = {}
    lines = ["| variant | seeds | time to target (h) | against sync | aggregations | wait for a pass (min) | "
             "passes per upload |", "|---|---|---|---|---|---|---|"]
    sync = runs[runs["variant"] == "sync"].time_to_target_h.mean() if len(runs) else math.nan
    for variant in VARIANTS:
        r = runs[runs["variant"] == variant] if len(runs) else runs
        if not len(r):
            continue
        mean = float(r.time_to_target_h.mean())
        numbers[variant] = mean
        speedup = sync / mean if variant != "sync" and math.isfinite(sync) and math.isfinite(mean) else math.nan
        lines.append(f"| {LABELS[variant]} | {len(r)} | {reached_mean(r.time_to_target_h)} | "
                     f"{'' if not math.isfinite(speedup) else f'{speedup:.2f}x faster'} | {r.aggregations.mean():.0f} | "
                     f"{r.pass_wait_min.mean():.1f} | {r.passes_per_upload.mean():.2f} |")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.3))
    for i, variant in enumerate(VARIANTS):
        of = curves[curves["variant"] == variant] if len(curves) else curves
        if not len(of):
            continue
        grid = np.linspace(0.0, of["time_s"].max(), 400)
        acc = np.array([np.interp(grid, c["time_s"], c["accuracy"]) for _, c in of.groupby("seed")])
        ax.plot(grid / 3600.0, 100 * acc.mean(0), color=f"C{i}", lw=1.5,
                label=f"{LABELS[variant]} ({len(acc)} seed{'' if len(acc) == 1 else 's'})")
    target = float(runs["target"].iloc[0]) if len(runs) and runs["target"].notna().any() else math.nan
    if math.isfinite(target):
        ax.axhline(100 * target, color="grey", ls=":", lw=1, label=f"target {100 * target:.0f} %")
    ax.set(xlabel="simulated time (h)", ylabel="test accuracy (%)",
           title="FL over a Walker-delta 40/5/1 shell at 550 km")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    path = save_figure(fig, figures / "satellites_time_to_target.png", caption=figure_caption(scale, data))
    md = ["Time to the target accuracy over a LEO constellation (Walker-delta 40/5/1, 550 km, 53 deg; non-iid "
          "Fashion-MNIST; uploads only inside ground-station passes, X-band link budget). Mean ± std over seeds:",
          "", *lines, "", "![](satellites_time_to_target.png)"]
    return Report("time_to_target", [path], numbers, "\n".join(md))


RECIPES: list[Recipe] = [
    Recipe("satellites", "time_to_target", "FL over a LEO constellation: sync FedAvg, FedBuff, FedBuff with ISL "
           "relaying, one ground station against three, the stations as edge servers",
           ("satellites_time_to_target.png",), families, collect, report, {}),
]
