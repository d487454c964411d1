"""A study of this simulator: the energy-time trade-off of the CPU frequency (figures/README_energy.md,
"CPU frequency").

``frequency``: FedAvg with the Lyapunov scheduler (sync: m = 10; FedBuff: its dispatch rule, 10 devices in
flight, K = 5) on the packaged ``compression``
scenario with top-k updates (so that computation, not the 1 MHz uplink, sets the pace) and the ``cpu``
computation model: 3.2e9 cycles a round, kappa = 1e-28, frequencies from 0.2 to 2 GHz (1.6 s and
1.28 J a round at 2 GHz). Fixed frequencies (2 GHz, the most; 1 GHz) against the scheduler choosing
each device's frequency with its power, at computation-energy budgets e_bar of 0.02, 0.05 and 0.2 J
per device and round (FedBuff: aggregation). Per run: the time to 70 %, the computation energy spent
until then and in all, the mean computation time of an update and the final accuracy after 240
simulated seconds.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import pandas as pd

from .recipes import Recipe, Report, Runs, figure_caption, packaged, pyplot, run_summary, save_figure, \
    curve_rows, runs_and_curves, seed_mean_curves, spread_cell

TARGET = 0.7
CPU = ("devices.compute=cpu", "devices.cycles_per_sample=1e7", "devices.kappa=1e-28", "scheduler.name=lyapunov",
       "scheduler.m=10", "run.time_budget_s=240", "run.eval_every_s=10", f"run.target_accuracy={TARGET}")
SCALES = {"tiny": ("devices.count=12", "run.time_budget_s=40", "learning.samples_per_device=40",
                   "learning.local_steps=2", "learning.eval_train_samples=200"),
          "cpu": (), "paper": ()}
PROTOCOLS = {"sync": {"protocol.name": "sync"},
             "fedbuff": {"protocol.name": "fedbuff", "protocol.concurrency": 10, "protocol.buffer": 5}}
SIZES = {"tiny": {"protocol.concurrency": 4, "protocol.buffer": 2}, "cpu": {}, "paper": {}}
FIXED = {"fixed_2ghz": 2e9, "fixed_1ghz": 1e9}
BUDGETS = {"chosen_e002": 0.02, "chosen_e005": 0.05, "chosen_e02": 0.2}
"""Setting -> e_bar (J per device and round, or aggregation) of the scheduler's frequency choice."""
LABELS = {"fixed_2ghz": "2 GHz", "fixed_1ghz": "1 GHz", **{name: f"chosen, ē = {e:g} J" for name, e in BUDGETS.items()}}


def settings() -> dict[str, dict]:
    """Fixed frequencies, and the scheduler's choice in [0.2, 2] GHz at three budgets; top-k updates."""
    out = {name: {"devices.cpu_hz": f, "learning.compression": "topk"} for name, f in FIXED.items()}
    out.update({name: {"devices.cpu_hz": 2e9, "devices.f_min_hz": 2e8, "devices.f_max_hz": 2e9,
                       "scheduler.choose_frequency": True, "scheduler.e_bar_j": e, "learning.compression": "topk"}
                for name, e in BUDGETS.items()})
    return out


def variants(scale: str) -> dict[str, dict]:
    """Every setting under sync and under FedBuff: ``sync_fixed_2ghz``, ``fedbuff_chosen_e005``, ..."""
    out = {}
    for protocol, overrides in PROTOCOLS.items():
        sized = {**overrides, **(SIZES[scale] if protocol == "fedbuff" else {})}
        for name, setting in settings().items():
            out[f"{protocol}_{name}"] = {**sized, **setting}
    return out


def families(scale: str, overrides: Sequence[str]) -> dict:
    base = packaged("compression", [*CPU, *SCALES[scale], *overrides])
    return {f"energy/frequency/{scale}": (base, variants(scale))}


def collect(runs: Runs, scale: str) -> pd.DataFrame:
    """Per run (kind "run") its numbers; per evaluation (kind "curve") its accuracy."""
    rows = []
    for variant in variants(scale):
        protocol, setting = variant.split("_", 1)
        for seed, folder in runs.seeds(variant):
            s = run_summary(folder)
            key = {"variant": variant, "protocol": protocol, "setting": setting, "seed": seed}
            updates = pd.read_csv(folder / "updates.csv", usecols=["dispatch_s", "compute_end_s", "tx_start_s",
                                                                    "compute_energy_j", "outcome"])
            target = s["time_to_target_s"]
            reached = target is not None and math.isfinite(target)
            # computation energy spent by the time the target was reached (a computation under way then: its share)
            started = updates[updates["dispatch_s"] < target] if reached else updates.iloc[:0]
            share = ((target - started["dispatch_s"]) / (started["compute_end_s"] - started["dispatch_s"])).clip(0, 1)
            done = updates[updates["outcome"] != "in_flight"]
            rows.append({"kind": "run", **key, "time_to_target_s": target, "final_accuracy": s["final_accuracy"],
                         "aggregations": s["rounds"], "updates": len(updates),
                         "compute_s_per_update": float((done["compute_end_s"] - done["dispatch_s"]).mean()),
                         "compute_energy_j": float(updates["compute_energy_j"].sum()),
                         "energy_to_target_j": float((started["compute_energy_j"] * share).sum())
                         if reached else math.nan})
            rows += curve_rows(folder, key)
    return pd.DataFrame(rows)


def report(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """A table per protocol, the accuracy curves per protocol, and each run's time against energy to the target."""
    runs, curves = runs_and_curves(data)
    md, numbers = [], {}
    for protocol in PROTOCOLS:
        md += [f"**{protocol}**, Lyapunov, mean ± std over seeds (time and energy to {100 * TARGET:.0f} % among the "
               "seeds that reach it):", "",
               "| frequency | computation per update (s) | time to target (s) | reached | computation energy to "
               "target (J) | computation energy in all (J) | aggregations | final accuracy (%) |",
               "|---|---|---|---|---|---|---|---|"]
        for name in LABELS:
            of = runs[runs["variant"] == f"{protocol}_{name}"] if len(runs) else runs
            if not len(of):
                continue
            numbers[f"{protocol}_{name}_time_to_target_s"] = float(of["time_to_target_s"].mean())
            numbers[f"{protocol}_{name}_energy_to_target_j"] = float(of["energy_to_target_j"].mean())
            md.append(f"| {LABELS[name]} | {spread_cell(of['compute_s_per_update'], '.2f')} | "
                      f"{spread_cell(of['time_to_target_s'], '.1f')} | {of['time_to_target_s'].notna().sum()}/{len(of)} | "
                      f"{spread_cell(of['energy_to_target_j'], '.1f')} | {spread_cell(of['compute_energy_j'], '.1f')} | "
                      f"{spread_cell(of['aggregations'], '.0f')} | {spread_cell(100 * of['final_accuracy'], '.1f')} |")
        md.append("")
    plt = pyplot()
    fig, axes = plt.subplots(1, len(PROTOCOLS) + 1, figsize=(5.2 * (len(PROTOCOLS) + 1) + 2.2, 4))
    for ax, protocol in zip(axes, PROTOCOLS):
        seed_mean_curves(ax, curves, [(f"{protocol}_{name}", label) for name, label in LABELS.items()], TARGET)
        ax.set_title(f"{protocol}: accuracy against time")
    ax = axes[-1]
    for marker, protocol in zip("os", PROTOCOLS):
        for i, name in enumerate(LABELS):
            of = runs[runs["variant"] == f"{protocol}_{name}"] if len(runs) else runs
            if len(of):
                ax.scatter(of["time_to_target_s"], of["energy_to_target_j"], color=f"C{i}", marker=marker,
                           label=f"{protocol}: {LABELS[name]}")
    ax.set_xlabel(f"time to {100 * TARGET:.0f} % (s)")
    ax.set_ylabel(f"computation energy to {100 * TARGET:.0f} %, all devices (J)")
    ax.set_title("each run: time against energy")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    path = save_figure(fig, figures / "energy_frequency.png", caption=figure_caption(scale, data))
    md.append("![](energy_frequency.png)")
    return Report("frequency", [path], numbers, "\n".join(md))


RECIPES: list[Recipe] = [
    Recipe("energy", "frequency", "Lyapunov choosing each device's CPU frequency at three energy budgets against "
           "fixed frequencies, under sync and FedBuff: time and computation energy to 70 %",
           ("energy_frequency.png",), families, collect, report, {"tiny": 0.25, "cpu": 5.5}),
]
