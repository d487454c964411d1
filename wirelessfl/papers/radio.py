"""A study of this simulator: how far Shannon-rate simulations misestimate FL's wall-clock time in a
real cell (figures/README_radio.md).

Every run is in physical units in one 3GPP urban-macro cell (``radio = "nr_uma_3_5ghz"``: TR 38.901
UMa path loss and shadowing at 3.5 GHz, 500 m between sites, 20 MHz, devices at 23 dBm, a base station
noise figure of 5 dB and antenna gain of 8 dBi), one TDMA uplink. Two settings:

- ``quickstart``: the quick start's (100 devices, iid Fashion-MNIST, MLP, m = 10 per round, sync), with
  the Lyapunov scheduler and uniform sampling;
- ``fedbuff``: the async study's FedBuff (non-iid Dirichlet 0.5, computation 0.5 s + Exp(1.5 s),
  20 devices training at once, an aggregation every 10 updates).

Each under three link abstractions at the same SNRs: ``shannon`` (B log2(1 + SNR), what FL simulators
use), ``nr_no_harq`` (NR MCS for a 10 % BLER target, transport blocks, no HARQ: a failed block is sent
again from scratch, up to 4 times) and ``nr`` (the same with HARQ, chase combining, 4 transmissions).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..config import from_dict, to_dict
from .recipes import Recipe, Report, Runs, figure_caption, packaged, pyplot, run_summary, runs_and_curves, \
    save_figure, seed_mean_curves, seed_std, with_spread

PRESET = "nr_uma_3_5ghz"
RATES = {"shannon": {"link.rate": "shannon"},
         "nr_no_harq": {"link.rate_options.harq_max_tx": 1, "link.max_attempts": 4},
         "nr": {}}
RATE_LABELS = {"shannon": "Shannon", "nr_no_harq": "NR, no HARQ", "nr": "NR with HARQ"}
SCHEDULERS = ("lyapunov", "uniform")

# tiny: a few devices and seconds, for the tests; cpu: the committed figures
SCALES = {
    "quickstart": {"tiny": ("devices.count=12", "run.time_budget_s=6", "run.eval_every_s=2",
                            "learning.samples_per_device=40", "learning.local_steps=2",
                            "learning.eval_train_samples=200", "scheduler.m=3"),
                   "cpu": ("run.time_budget_s=300", "run.eval_every_s=2", "run.stop_at_target=true")},
    "fedbuff": {"tiny": ("devices.count=12", "run.time_budget_s=6", "run.eval_every_s=2",
                         "learning.samples_per_device=40", "learning.local_steps=2",
                         "learning.eval_train_samples=200", "protocol.concurrency=4", "protocol.buffer=2"),
                "cpu": ("run.time_budget_s=300", "run.eval_every_s=2", "run.target_accuracy=0.7",
                        "run.stop_at_target=true")},
}

_NORMALISED = {"link": ("noise_power", "p_bar", "p_max", "bandwidth_hz"),
               "channel": ("profile", "sigma", "sigma_min", "sigma_max", "gain_floor")}
"""A packaged scenario's normalised radio, which the cell's physical values replace."""


def in_cell(name: str, variant: str | None, overrides: Sequence[str]):
    """The packaged scenario ``name`` (its ``variant``'s settings, if any) in the study's cell."""
    base = packaged(name)
    if variant is not None:
        base = dict(base.variant_scenarios())[variant]
    data = to_dict(base, only_changed=True)
    data.pop("variants", None)
    for table, keys in _NORMALISED.items():
        for key in keys:
            data.get(table, {}).pop(key, None)
    data["radio"] = PRESET
    return from_dict(data, list(overrides))


def families(scale: str, overrides: Sequence[str]) -> dict:
    quick = in_cell("quickstart", None, [*SCALES["quickstart"][scale], *overrides])
    fedbuff = in_cell("async", "fedbuff", [*SCALES["fedbuff"][scale], *overrides])
    sync = {f"{rate}_{sched}": {**over, "scheduler.name": sched} for rate, over in RATES.items() for sched in SCHEDULERS}
    return {f"radio/quickstart/{scale}": (quick, sync),
            f"radio/fedbuff/{scale}": (fedbuff, {f"{rate}_fedbuff": over for rate, over in RATES.items()})}


def collect(runs: Runs, scale: str) -> pd.DataFrame:
    """Per run: its numbers (time to the target, aggregations, uploads and what became of them, the mean
    upload's airtime, MCS and transport-block transmissions) and its accuracy curve."""
    rows = []
    for variant in runs.dirs:
        rate, scheduler = variant.rsplit("_", 1)
        setting = "fedbuff" if scheduler == "fedbuff" else "quickstart"
        for seed, folder in runs.seeds(variant):
            s = run_summary(folder)
            updates = pd.read_csv(folder / "updates.csv")
            sent = updates[updates["tx_start_s"].notna()]
            key = {"variant": variant, "setting": setting, "rate": rate, "scheduler": scheduler, "seed": seed}
            rows.append({"kind": "run", **key, "time_to_target_s": s["time_to_target_s"],
                         "target": s["target_accuracy"], "aggregations": s["aggregations"], "uploads": s["uploads"],
                         "final_accuracy": s["final_accuracy"], "sim_time_s": s["sim_time_s"],
                         "mean_snr_db": s.get("mean_snr_db", math.nan),
                         "mean_airtime_s": float(sent["airtime_s"].mean()) if len(sent) else math.nan,
                         "lost": int((updates["outcome"] == "lost").sum()),
                         "mean_mcs": float(sent["mcs"].mean()) if "mcs" in sent else math.nan,
                         "mean_harq_tx": float(sent["harq_tx"].mean()) if "harq_tx" in sent else math.nan})
            evals = pd.read_csv(folder / "evals.csv")
            rows += [{"kind": "curve", **key, "time_s": t, "accuracy": a} for t, a in zip(evals.time_s, evals.accuracy)]
    return pd.DataFrame(rows)


def _time(values: pd.Series) -> str:
    reached = values.dropna()
    if not len(reached):
        return "not reached"
    text = with_spread(reached.mean(), seed_std(reached), ".1f")
    return text if len(reached) == len(values) else f"{text} ({len(reached)} of {len(values)} seeds)"


def report(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    runs, curves = runs_and_curves(data)
    numbers, lines = {}, []
    header = ("| setting | scheduler | link | seeds | time to target (s) | against Shannon | aggregations | "
              "mean upload airtime (s) | uploads lost | mean MCS |")
    lines += [header, "|---" * (header.count("|") - 1) + "|"]
    groups = [("quickstart", s) for s in SCHEDULERS] + [("fedbuff", "fedbuff")]
    for setting, sched in groups:
        shannon = runs[(runs["setting"] == setting) & (runs["scheduler"] == sched) & (runs["rate"] == "shannon")]
        for rate in RATES:
            r = runs[(runs["setting"] == setting) & (runs["scheduler"] == sched) & (runs["rate"] == rate)]
            if not len(r):
                continue
            ratio = r.time_to_target_s.mean() / shannon.time_to_target_s.mean() if len(shannon) else math.nan
            numbers[f"{setting} {sched} {rate}"] = float(r.time_to_target_s.mean())
            lines.append(f"| {setting} | {sched} | {RATE_LABELS[rate]} | {len(r)} | {_time(r.time_to_target_s)} | "
                         f"{'' if rate == 'shannon' or not math.isfinite(ratio) else f'{ratio:.2f}x'} | "
                         f"{r.aggregations.mean():.0f} | {r.mean_airtime_s.mean():.3g} | {r.lost.mean():.1f} | "
                         f"{'' if rate == 'shannon' else f'{r.mean_mcs.mean():.1f}'} |")
    lines += ["", "Does the link model change which scheduler wins? The Lyapunov scheduler's speed-up over uniform sampling "
              "(uniform's mean time to target over lyapunov's), under each link:", "",
              "| link | speed-up of lyapunov over uniform |", "|---|---|"]
    for rate in RATES:
        times = {sched: runs[(runs["setting"] == "quickstart") & (runs["scheduler"] == sched)
                             & (runs["rate"] == rate)].time_to_target_s.mean() for sched in SCHEDULERS}
        if all(math.isfinite(t) for t in times.values()):
            speedup = times["uniform"] / times["lyapunov"]
            numbers[f"speed-up {rate}"] = float(speedup)
            lines.append(f"| {RATE_LABELS[rate]} | {speedup:.2f}x |")
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.3), sharey=True)
    for ax, (setting, sched) in zip(axes, groups):
        variants = [(f"{rate}_{sched}", RATE_LABELS[rate]) for rate in RATES]
        target = runs[runs["setting"] == setting]["target"]
        seed_mean_curves(ax, curves, variants, float(target.iloc[0]) if len(target) else math.nan)
        ax.set_title(f"{setting}: {'sync, ' + sched if setting == 'quickstart' else 'FedBuff K = 10'}")
    path = save_figure(fig, figures / "radio_shannon_gap.png", caption=figure_caption(scale, data))
    md = ["Time to the target accuracy in one 3GPP urban-macro cell at 3.5 GHz (20 MHz, 23 dBm devices, TDMA), "
          "under Shannon's capacity and under the NR link abstraction without and with HARQ, at the same SNRs. "
          "Mean ± std over seeds:", "", *lines, "", "![](radio_shannon_gap.png)"]
    return Report("shannon_gap", [path], numbers, "\n".join(md))


RECIPES: list[Recipe] = [
    Recipe("radio", "shannon_gap", "Time to target under Shannon rates against the NR abstraction, with and without "
           "HARQ, in a 3GPP UMa cell", ("radio_shannon_gap.png",), families, collect, report,
           {"tiny": 0.1, "cpu": 4.5}),
]
