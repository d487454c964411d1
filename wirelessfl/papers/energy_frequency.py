"""A study of this simulator: the energy-time trade-off of the CPU frequency (figures/README_energy.md,
"CPU frequency").

``frequency``: synchronous FedAvg with the Lyapunov scheduler (m = 10) on the packaged ``compression``
scenario with top-k updates (so that computation, not the 1 MHz uplink, sets the pace) and the ``cpu``
computation model: 3.2e9 cycles a round, kappa = 1e-28, frequencies from 0.2 to 2 GHz (1.6 s and
1.28 J a round at 2 GHz). Fixed frequencies (2 GHz, the most; 1 GHz) against the scheduler choosing
each device's frequency with its power, at computation-energy budgets e_bar of 0.02, 0.05 and 0.2 J
per device and round. Per run: the time to 70 %, the computation energy spent until then and in all,
the mean frequency and the final accuracy after 240 simulated seconds.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import pandas as pd

from .recipes import Recipe, Report, Runs, figure_caption, packaged, pyplot, run_summary, save_figure, \
    seed_mean_curves, seed_std, with_spread

TARGET = 0.7
CPU = ("devices.compute=cpu", "devices.cycles_per_sample=1e7", "devices.kappa=1e-28", "scheduler.name=lyapunov",
       "scheduler.m=10", "run.time_budget_s=240", "run.eval_every_s=10", f"run.target_accuracy={TARGET}")
SCALES = {"tiny": ("devices.count=12", "run.time_budget_s=40", "learning.samples_per_device=40",
                   "learning.local_steps=2", "learning.eval_train_samples=200"),
          "cpu": (), "paper": ()}
FIXED = {"fixed_2ghz": 2e9, "fixed_1ghz": 1e9}
BUDGETS = {"chosen_e002": 0.02, "chosen_e005": 0.05, "chosen_e02": 0.2}
"""Variant -> e_bar (J per device and round) of the scheduler's frequency choice."""
LABELS = {"fixed_2ghz": "2 GHz", "fixed_1ghz": "1 GHz", **{name: f"chosen, ē = {e:g} J" for name, e in BUDGETS.items()}}


def variants(scale: str) -> dict[str, dict]:
    """Fixed frequencies, and the scheduler's choice in [0.2, 2] GHz at three budgets; top-k updates."""
    out = {name: {"devices.cpu_hz": f, "learning.compression": "topk"} for name, f in FIXED.items()}
    out.update({name: {"devices.cpu_hz": 2e9, "devices.f_min_hz": 2e8, "devices.f_max_hz": 2e9,
                       "scheduler.choose_frequency": True, "scheduler.e_bar_j": e, "learning.compression": "topk"}
                for name, e in BUDGETS.items()})
    return out


def families(scale: str, overrides: Sequence[str]) -> dict:
    base = packaged("compression", [*CPU, *SCALES[scale], *overrides])
    return {f"energy/frequency/{scale}": (base, variants(scale))}


def collect(runs: Runs, scale: str) -> pd.DataFrame:
    """Per run (kind "run") its numbers; per evaluation (kind "curve") its accuracy."""
    rows = []
    for variant in variants(scale):
        for seed, folder in runs.seeds(variant):
            s = run_summary(folder)
            key = {"variant": variant, "seed": seed}
            rounds = pd.read_csv(folder / "rounds.csv", usecols=lambda c: c in ("t_end", "compute_energy_j",
                                                                                 "frequency_mean_hz"))
            target = s["time_to_target_s"]
            until = rounds["t_end"] <= target if target is not None and math.isfinite(target) else None
            mean_f = rounds["frequency_mean_hz"].mean() if "frequency_mean_hz" in rounds else FIXED[variant]
            rows.append({"kind": "run", **key, "time_to_target_s": target, "final_accuracy": s["final_accuracy"],
                         "rounds": s["rounds"], "frequency_mean_hz": float(mean_f),
                         "compute_energy_j": float(rounds["compute_energy_j"].sum()),
                         "energy_to_target_j": float(rounds.loc[until, "compute_energy_j"].sum())
                         if until is not None else math.nan})
            evals = pd.read_csv(folder / "evals.csv")
            rows += [{"kind": "curve", **key, "time_s": t, "accuracy": a} for t, a in zip(evals.time_s, evals.accuracy)]
    return pd.DataFrame(rows)


def _mean_std(values: pd.Series, fmt: str) -> str:
    values = values.dropna()
    return with_spread(values.mean(), seed_std(values), fmt) if len(values) else "not reached"


def report(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """A table per variant, the accuracy curves, and each run's time against energy to the target."""
    runs = data[data["kind"] == "run"] if len(data) else data
    curves = data[data["kind"] == "curve"] if len(data) else data
    md = [f"Sync, Lyapunov (m = 10), mean ± std over seeds (time and energy to {100 * TARGET:.0f} % among the "
          "seeds that reach it):", "",
          "| frequency | mean f (GHz) | time to target (s) | reached | computation energy to target (J) | "
          "computation energy in all (J) | rounds | final accuracy (%) |",
          "|---|---|---|---|---|---|---|---|"]
    numbers = {}
    for name in LABELS:
        of = runs[runs["variant"] == name] if len(runs) else runs
        if not len(of):
            continue
        numbers[f"{name}_time_to_target_s"] = float(of["time_to_target_s"].mean())
        numbers[f"{name}_energy_to_target_j"] = float(of["energy_to_target_j"].mean())
        md.append(f"| {LABELS[name]} | {_mean_std(of['frequency_mean_hz'] / 1e9, '.2f')} | "
                  f"{_mean_std(of['time_to_target_s'], '.1f')} | {of['time_to_target_s'].notna().sum()}/{len(of)} | "
                  f"{_mean_std(of['energy_to_target_j'], '.1f')} | {_mean_std(of['compute_energy_j'], '.1f')} | "
                  f"{_mean_std(of['rounds'], '.0f')} | {_mean_std(100 * of['final_accuracy'], '.1f')} |")
    md.append("")
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    seed_mean_curves(ax1, curves, list(LABELS.items()), TARGET)
    ax1.set_title("accuracy against time")
    for i, name in enumerate(LABELS):
        of = runs[runs["variant"] == name] if len(runs) else runs
        if len(of):
            ax2.scatter(of["time_to_target_s"], of["energy_to_target_j"], color=f"C{i}", label=LABELS[name])
    ax2.set_xlabel(f"time to {100 * TARGET:.0f} % (s)")
    ax2.set_ylabel(f"computation energy to {100 * TARGET:.0f} %, all devices (J)")
    ax2.set_title("each run: time against energy")
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=8)
    path = save_figure(fig, figures / "energy_frequency.png", caption=figure_caption(scale, data))
    md.append("![](energy_frequency.png)")
    return Report("frequency", [path], numbers, "\n".join(md))


RECIPES: list[Recipe] = [
    Recipe("energy", "frequency", "Sync Lyapunov choosing each device's CPU frequency at three energy budgets "
           "against fixed frequencies: time and computation energy to 70 %", ("energy_frequency.png",), families,
           collect, report, {"tiny": 0.14, "cpu": 2.6}),
]
