"""Studies of this simulator's radio (figures/README_radio.md): how far Shannon-rate simulations
misestimate FL's wall-clock time in a real cell (``shannon_gap``); FedBuff's concurrency over one Wi-Fi
cell against scheduled TDMA (``wifi_concurrency``); FedAvg over Wi-Fi simulated by ns-3, by this
simulator's DCF and under TDMA (``wifi``).

``shannon_gap``:

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
from .recipes import Recipe, Report, Runs, curve_rows, figure_caption, packaged, pyplot, reached_mean, run_summary, \
    runs_and_curves, save_figure, seed_mean_curves, seed_std

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


def in_cell(name: str, variant: str | None, overrides: Sequence[str], preset: str = PRESET):
    """The packaged scenario ``name`` (its ``variant``'s settings, if any) in the cell of the radio
    ``preset`` (its normalised radio replaced by the preset's)."""
    base = packaged(name)
    if variant is not None:
        base = dict(base.variant_scenarios())[variant]
    data = to_dict(base, only_changed=True)
    data.pop("variants", None)
    for table, keys in _NORMALISED.items():
        for key in keys:
            data.get(table, {}).pop(key, None)
    data["radio"] = preset
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
    variants = [f"{rate}_{sched}" for rate in RATES for sched in (*SCHEDULERS, "fedbuff")]
    for variant in (v for v in variants if v in runs.dirs):
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
            rows += curve_rows(folder, key)
    return pd.DataFrame(rows)


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
            lines.append(f"| {setting} | {sched} | {RATE_LABELS[rate]} | {len(r)} | {reached_mean(r.time_to_target_s)} | "
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


# ---------------------------------------------------------------------------------------------
# Wi-Fi: FedBuff's concurrency under the DCF against scheduled TDMA; the DCF against ns-3's


WIFI_PRESET = "inh_office_5ghz"
"""One indoor office cell at 5 GHz (TR 38.901 InH, 20 m radius, 20 dBm devices)."""
CONCURRENCY = {"tiny": (2, 4), "cpu": (5, 10, 20, 50, 100)}
CELL_LINKS = {"wifi": {"link.access": "wifi", "link.rate": "shannon", "link.wifi_standard": "80211ac"},
              "tdma": {"link.access": "tdma"}}
"""The same cell under the 802.11ac DCF (CSMA/CA, its MCS by SNR) and under scheduled TDMA (the NR link)."""
CELL_LABELS = {"wifi": "Wi-Fi (802.11ac DCF)", "tdma": "scheduled TDMA (NR)", "ns3_wifi": "ns-3 Wi-Fi (802.11ac)"}
WIFI_SCALES = {"tiny": ("devices.count=8", "protocol.concurrency=2", "run.time_budget_s=4", "run.eval_every_s=2",
                        "learning.samples_per_device=40", "learning.local_steps=2", "learning.eval_train_samples=200"),
               "cpu": ("run.time_budget_s=200", "run.eval_every_s=2", "run.target_accuracy=0.7",
                       "run.stop_at_target=true")}


def concurrency_families(scale: str, overrides: Sequence[str]) -> dict:
    base = in_cell("async", "fedbuff", [*WIFI_SCALES[scale], "protocol.buffer=" + str(min(CONCURRENCY[scale])),
                                       *overrides], WIFI_PRESET)
    variants = {f"{link}_c{c}": {**over, "protocol.concurrency": c} for link, over in CELL_LINKS.items()
                for c in CONCURRENCY[scale]}
    return {f"radio/wifi_concurrency/{scale}": (base, variants)}


def collect_concurrency(runs: Runs, scale: str) -> pd.DataFrame:
    """Per run: time to the target, aggregations, the uplink's utilisation, and per upload its airtime
    and (Wi-Fi) collisions; the accuracy curves."""
    rows = []
    variants = [f"{link}_c{c}" for link in CELL_LINKS for c in CONCURRENCY[scale]]
    for variant in (v for v in variants if v in runs.dirs):
        link, _, c = variant.rpartition("_c")
        for seed, folder in runs.seeds(variant):
            s = run_summary(folder)
            updates = pd.read_csv(folder / "updates.csv")
            sent = updates[updates["tx_start_s"].notna()]
            key = {"variant": variant, "link": link, "concurrency": int(c), "seed": seed}
            rows.append({"kind": "run", **key, "time_to_target_s": s["time_to_target_s"],
                         "target": s["target_accuracy"], "aggregations": s["aggregations"], "uploads": s["uploads"],
                         "sim_time_s": s["sim_time_s"], "busy": s["uplink_utilisation"],
                         "staleness": s["mean_staleness"],
                         "upload_s": float((sent["tx_end_s"] - sent["tx_start_s"]).mean()) if len(sent) else math.nan,
                         "delivery_s": float((sent["tx_end_s"] - sent["compute_end_s"]).mean()) if len(sent) else math.nan,
                         "collisions": float(sent["collisions"].mean()) if "collisions" in sent else math.nan})
            rows += curve_rows(folder, key)
    return pd.DataFrame(rows)


def report_concurrency(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    runs, _ = runs_and_curves(data)
    numbers = {}
    lines = ["| link | concurrency | seeds | time to target (s) | aggregations | mean staleness | from computed to "
             "delivered (s) | on the air (s) | collisions per upload | uplink busy |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    plt = pyplot()
    fig, (ax_t, ax_u) = plt.subplots(1, 2, figsize=(11, 4))
    for i, link in enumerate(CELL_LINKS):
        mine = runs[runs["link"] == link] if len(runs) else runs
        xs, ts, es, us = [], [], [], []
        for c, r in sorted(mine.groupby("concurrency"), key=lambda kv: kv[0]) if len(mine) else []:
            numbers[f"{link} c={c}"] = float(r.time_to_target_s.mean())
            lines.append(f"| {CELL_LABELS[link]} | {c} | {len(r)} | {reached_mean(r.time_to_target_s)} | "
                         f"{r.aggregations.mean():.0f} | {r.staleness.mean():.1f} | {r.delivery_s.mean():.3g} | "
                         f"{r.upload_s.mean():.3g} | "
                         f"{'' if link != 'wifi' else f'{r.collisions.mean():.2f}'} | {100 * r.busy.mean():.0f} % |")
            xs.append(c)
            ts.append(r.time_to_target_s.mean())
            es.append(np.nan_to_num(seed_std(r.time_to_target_s.dropna())) if r.time_to_target_s.notna().sum() > 1 else 0)
            us.append(r.delivery_s.mean())
        ax_t.errorbar(xs, ts, yerr=es, marker="o", capsize=3, color=f"C{i}", label=CELL_LABELS[link])
        ax_u.plot(xs, us, marker="o", color=f"C{i}", label=CELL_LABELS[link])
    for ax, ylabel in ((ax_t, "time to target (s; a missing point: not reached)"),
                       (ax_u, "from computed to delivered (s)")):
        ax.set(xscale="log", yscale="log" if ax is ax_u else "linear",
               xlabel="FedBuff concurrency (devices training at once)", ylabel=ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    ax_t.set_title("FedBuff over one office cell")
    ax_u.set_title("an update's wait for the uplink and its upload")
    path = save_figure(fig, figures / "radio_wifi_concurrency.png", caption=figure_caption(scale, data))
    md = ["FedBuff (K = 5) over one indoor office cell at 5 GHz (TR 38.901 InH, 20 dBm devices), its concurrency "
          "from 5 to 100, under the 802.11ac DCF and under scheduled TDMA with the NR link. Mean ± std over seeds:",
          "", *lines, "", "![](radio_wifi_concurrency.png)"]
    return Report("wifi_concurrency", [path], numbers, "\n".join(md))


WIFI_RUN_SCALES = {"tiny": ("devices.count=6", "scheduler.m=3", "run.time_budget_s=3", "run.eval_every_s=1",
                            "learning.samples_per_device=40", "learning.local_steps=2",
                            "learning.eval_train_samples=200"),
                   "cpu": ("devices.count=20", "scheduler.m=5", "run.time_budget_s=120", "run.eval_every_s=2",
                           "run.target_accuracy=0.75", "run.stop_at_target=true")}
WIFI_LINKS = {"ns3_wifi": {"link.access": "ns3_wifi", "link.rate": "shannon", "link.wifi_standard": "80211ac"},
              **CELL_LINKS}


def ns3_installed() -> bool:
    """Whether ns-3's Python bindings can be imported (the extra [ns3])."""
    import importlib.util

    return importlib.util.find_spec("ns") is not None


def wifi_families(scale: str, overrides: Sequence[str]) -> dict:
    base = in_cell("quickstart", None, [*WIFI_RUN_SCALES[scale], "scheduler.name=uniform", *overrides], WIFI_PRESET)
    links = {k: v for k, v in WIFI_LINKS.items() if k != "ns3_wifi" or ns3_installed()}
    return {f"radio/wifi/{scale}": (base, links)}


def collect_wifi(runs: Runs, scale: str) -> pd.DataFrame:
    """Per run: time to the target, rounds, the mean round, and the simulator's wall time per simulated second."""
    rows = []
    for variant in (v for v in WIFI_LINKS if v in runs.dirs):
        for seed, folder in runs.seeds(variant):
            s = run_summary(folder)
            key = {"variant": variant, "seed": seed}
            rows.append({"kind": "run", **key, "time_to_target_s": s["time_to_target_s"],
                         "target": s["target_accuracy"], "rounds": s["rounds"], "sim_time_s": s["sim_time_s"],
                         "mean_round_s": s["sim_time_s"] / max(s["rounds"], 1),
                         "wall_per_sim_s": s["wall_time_s"] / s["sim_time_s"] if s["sim_time_s"] > 0 else math.nan})
            rows += curve_rows(folder, key)
    return pd.DataFrame(rows)


def report_wifi(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    runs, curves = runs_and_curves(data)
    numbers = {}
    lines = ["| uplink | seeds | time to target (s) | rounds | mean round (s) | wall time per simulated second (s) |",
             "|---|---|---|---|---|---|"]
    for link in WIFI_LINKS:
        r = runs[runs["variant"] == link] if len(runs) else runs
        if not len(r):
            lines.append(f"| {CELL_LABELS[link]} | 0 | not run (ns-3 not installed: pip install -e \".[ns3]\") | | | |")
            continue
        numbers[link] = float(r.time_to_target_s.mean())
        lines.append(f"| {CELL_LABELS[link]} | {len(r)} | {reached_mean(r.time_to_target_s)} | {r.rounds.mean():.0f} | "
                     f"{r.mean_round_s.mean():.3g} | {r.wall_per_sim_s.mean():.3g} |")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.3))
    target = float(runs["target"].iloc[0]) if len(runs) else math.nan
    seed_mean_curves(ax, curves, [(link, CELL_LABELS[link]) for link in WIFI_LINKS], target)
    ax.set_title("FedAvg over one office cell: ns-3's Wi-Fi, ours, scheduled TDMA")
    path = save_figure(fig, figures / "radio_wifi.png", caption=figure_caption(scale, data))
    md = ["Sync FedAvg (20 devices, m = 5 uniform draws a round, iid Fashion-MNIST, the MLP) in one office cell at "
          "5 GHz: every round's uploads simulated packet by packet in ns-3 (`ns3_wifi`), by this simulator's DCF "
          "(`wifi`), or scheduled by TDMA with the NR link. Mean ± std over seeds:", "", *lines, "", "![](radio_wifi.png)"]
    return Report("wifi", [path], numbers, "\n".join(md))


RECIPES: list[Recipe] = [
    Recipe("radio", "shannon_gap", "Time to target under Shannon rates against the NR abstraction, with and without "
           "HARQ, in a 3GPP UMa cell", ("radio_shannon_gap.png",), families, collect, report,
           {"tiny": 0.1, "cpu": 4.5}),
    Recipe("radio", "wifi_concurrency", "FedBuff's concurrency from 5 to 100 over one Wi-Fi cell against scheduled "
           "TDMA", ("radio_wifi_concurrency.png",), concurrency_families, collect_concurrency, report_concurrency,
           {"tiny": 0.1, "cpu": 7.0}),
    Recipe("radio", "wifi", "FedAvg over one Wi-Fi cell: ns-3's 802.11 MAC, this simulator's DCF, and scheduled TDMA",
           ("radio_wifi.png",), wifi_families, collect_wifi, report_wifi, {"tiny": 0.3, "cpu": 1.0}),
]
