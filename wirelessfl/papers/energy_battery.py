"""A study of this simulator: how the energy a device harvests changes who takes part and how soon
FL reaches a target (figures/README_energy.md, "Batteries").

``battery``: FedBuff (6 devices training at once, K = 3) on the packaged ``battery`` scenario, trained:
30 devices with 20 J batteries, a CPU computation model (0.32 J a task), one 5 MHz TDMA uplink at
P = 1 W with Rayleigh channels of scale 0.5 to 2, non-iid Fashion-MNIST and the MLP, 1,200
simulated seconds. The variants differ only in the harvest: 0.5 J with probability p each second,
p = 0 (none), 0.02, 0.05, 0.2 and 0.5 (0 to 250 mW on average). Per run: the time to 80 %, the final
accuracy, aggregations, tasks lost to an empty battery, and the share of the applied updates that
came from the half of the devices with the weaker channels.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import pandas as pd

from .recipes import Recipe, Report, Runs, figure_caption, packaged, pyplot, run_summary, save_figure, \
    curve_rows, runs_and_curves, seed_mean_curves, spread_cell

HARVEST_J = 0.5
LEVELS = {"none": 0.0, "low": 0.02, "medium": 0.05, "high": 0.2, "full": 0.5}
"""Variant -> the probability of a 0.5 J arrival per second."""
TARGET = 0.8
TRAINING = ("run.timing_only=false", "run.eval_every_s=20", f"run.target_accuracy={TARGET}", "learning.model=mlp",
            "learning.partition=dirichlet_per_device", "learning.alpha=0.5", "learning.samples_per_device=300",
            "learning.local_steps=10", "learning.lr=0.05", "learning.eval_train_samples=1000")
SCALES = {"tiny": ("devices.count=12", "run.time_budget_s=120", "learning.samples_per_device=40",
                   "learning.local_steps=2", "learning.eval_train_samples=200", "protocol.concurrency=4",
                   "protocol.buffer=2", "devices.battery_capacity_j=3"),
          "cpu": (), "paper": ()}


def mean_harvest_w(variant: str) -> float:
    """The average harvested power of a variant: p x 0.5 J per second."""
    return LEVELS[variant] * HARVEST_J


def variants(scale: str) -> dict[str, dict]:
    """One per harvest level; no harvest is ``devices.harvest = "none"``."""
    return {name: ({"devices.harvest": "none"} if p == 0 else
                   {"devices.harvest": "bernoulli", "devices.harvest_p": p, "devices.harvest_j": HARVEST_J})
            for name, p in LEVELS.items()}


def families(scale: str, overrides: Sequence[str]) -> dict:
    base = packaged("battery", [*TRAINING, *SCALES[scale], *overrides])
    return {f"energy/battery/{scale}": (base, variants(scale))}


def weak_share(updates: pd.DataFrame, devices: pd.DataFrame) -> float:
    """The share of the applied updates that came from the half of the devices with the smaller sigma."""
    weak = set(devices.sort_values("sigma", kind="stable")["device"].iloc[: len(devices) // 2])
    applied = updates[updates["outcome"] == "applied"]
    return float(applied["device"].isin(weak).mean()) if len(applied) else math.nan


def collect(runs: Runs, scale: str) -> pd.DataFrame:
    """Per run (kind "run") its numbers; per evaluation (kind "curve") its accuracy."""
    rows = []
    for variant in variants(scale):
        for seed, folder in runs.seeds(variant):
            s = run_summary(folder)
            key = {"variant": variant, "harvest_w": mean_harvest_w(variant), "seed": seed}
            updates = pd.read_csv(folder / "updates.csv", usecols=["device", "outcome"])
            devices = pd.read_csv(folder / "devices.csv", usecols=["device", "sigma", "battery_lost"])
            rows.append({"kind": "run", **key, "time_to_target_s": s["time_to_target_s"],
                         "final_accuracy": s["final_accuracy"], "aggregations": s["aggregations"],
                         "battery_losses": int(s["outcomes"].get("battery", 0)),
                         "devices_emptied": int((devices["battery_lost"] > 0).sum()),
                         "weak_share": weak_share(updates, devices)})
            rows += curve_rows(folder, key)
    return pd.DataFrame(rows)


def report(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """A table per harvest level and the accuracy curves beside the weak channels' share."""
    runs, curves = runs_and_curves(data)
    md = [f"FedBuff, mean ± std over seeds (time to {100 * TARGET:.0f} % among the seeds that reach it):", "",
          "| harvest | mean power (mW) | time to target (s) | reached | final accuracy (%) | aggregations | "
          "tasks lost to an empty battery | devices that ran out | weaker half's share of updates (%) |",
          "|---|---|---|---|---|---|---|---|---|"]
    numbers = {}
    for name in LEVELS:
        of = runs[runs["variant"] == name] if len(runs) else runs
        if not len(of):
            continue
        numbers[f"{name}_time_to_target_s"] = float(of["time_to_target_s"].mean())
        numbers[f"{name}_weak_share"] = float(of["weak_share"].mean())
        md.append(f"| {name} | {1000 * mean_harvest_w(name):g} | {spread_cell(of['time_to_target_s'], '.0f')} | "
                  f"{of['time_to_target_s'].notna().sum()}/{len(of)} | {spread_cell(100 * of['final_accuracy'], '.1f')} | "
                  f"{spread_cell(of['aggregations'], '.0f')} | {spread_cell(of['battery_losses'], '.1f')} | "
                  f"{spread_cell(of['devices_emptied'], '.1f')} | {spread_cell(100 * of['weak_share'], '.1f')} |")
    md.append("")
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    seed_mean_curves(ax1, curves, [(name, f"{1000 * mean_harvest_w(name):g} mW") for name in LEVELS], TARGET)
    ax1.set_title("accuracy against time, by mean harvested power")
    if len(runs):
        by = runs.groupby("harvest_w")["weak_share"]
        mean, std = by.mean(), by.std(ddof=1).fillna(0.0)
        ax2.errorbar(1000 * mean.index.to_numpy(), 100 * mean.to_numpy(), yerr=100 * std.to_numpy(), marker="o",
                     capsize=3)
    ax2.axhline(50, color="grey", ls=":", lw=1)
    ax2.set_xscale("symlog", linthresh=10)
    ax2.set_xlim(-1.5, 350)
    ax2.set_xlabel("mean harvested power per device (mW)")
    ax2.set_ylabel("updates from the weaker half of the channels (%)")
    ax2.set_title("who takes part")
    ax2.grid(alpha=0.3)
    path = save_figure(fig, figures / "energy_battery.png", caption=figure_caption(scale, data))
    md.append("![](energy_battery.png)")
    return Report("battery", [path], numbers, "\n".join(md))


RECIPES: list[Recipe] = [
    Recipe("energy", "battery", "FedBuff with batteries at five harvest rates: time to 80 %, accuracy, battery "
           "losses and who takes part", ("energy_battery.png",), families, collect, report, {"tiny": 0.1, "cpu": 2.7}),
]
