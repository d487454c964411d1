"""Studies of this simulator's networks (figures/README_networks.md): edge servers and a cloud
against one server in the cloud, over the same radio; frequency reuse with interference; the
devices' speed (handovers) under FedBuff; and edges that wait for the cloud against edges that do not.

``hierfavg``: the packaged ``studies/hierfavg`` scenario (70 devices in seven cells, reuse 7, non-iid
Fashion-MNIST, the MLP, a CPU computation model, 60 simulated seconds). One server in the cloud draws
14 devices a round over all cells, and every round each site forwards its devices' updates over the
backhaul and the model comes back; with edge servers (HierFAVG) each cell's server draws 2 of its
devices a round and the cloud averages the edges' models every kappa_2 rounds. The variants: kappa_2 in
{2, 10} against the cloud alone, kappa_1 (local steps) 10 or 2, a slow backhaul (10 Mbit/s, 100 ms) and
a fast one (1 Gbit/s, 5 ms). Per run: the time to 75 %, the device energy spent by then (transmit plus
computation), the final accuracy and the cloud aggregations.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from .recipes import Recipe, Report, Runs, curve_rows, figure_caption, packaged, pyplot, run_summary, save_figure, \
    runs_and_curves, seed_mean_curves, spread_cell

TARGET = 0.75
BACKHAULS = {"slow": (1e7, 0.1), "fast": (1e9, 0.005)}
"""Name -> (rate, latency) of the backhaul, each way."""
SETTINGS = {  # variant stem -> (tiers, kappa_2, kappa_1)
    "cloud": ("cloud", 1, 10), "edge2": ("edge", 2, 10), "edge10": ("edge", 10, 10),
    "cloud_k2": ("cloud", 1, 2), "edge10_k2": ("edge", 10, 2)}
SCALES = {"tiny": ("devices.count=14", "run.time_budget_s=8", "learning.samples_per_device=40",
                   "learning.eval_train_samples=200", "run.eval_every_s=2"),
          "cpu": (), "paper": ()}


def variants(scale: str) -> dict[str, dict]:
    """Every setting on both backhauls (the kappa_1 = 2 ones on the slow backhaul alone)."""
    out = {}
    for stem, (tiers, kappa2, kappa1) in SETTINGS.items():
        for name, (rate, latency) in BACKHAULS.items():
            if kappa1 != 10 and name != "slow":
                continue
            edge = tiers == "edge"
            out[f"{stem}_{name}"] = {"hierarchy.tiers": tiers, "hierarchy.cloud_every": kappa2,
                                     "hierarchy.backhaul_rate_bps": rate, "hierarchy.backhaul_latency_s": latency,
                                     "learning.local_steps": kappa1, "scheduler.m": 2 if edge else 14}
    return out


def families(scale: str, overrides: Sequence[str]) -> dict:
    base = packaged("studies/hierfavg", [*SCALES[scale], *overrides])
    return {f"networks/hierfavg/{scale}": (base, variants(scale))}


def energy_to(folder: Path, time_s: float) -> float:
    """The devices' energy (transmit and computation) over the rows of rounds.csv that ended by
    ``time_s`` (NaN when the target was not reached)."""
    if not math.isfinite(time_s):
        return math.nan
    rows = pd.read_csv(folder / "rounds.csv", usecols=["t_end", "energy_j", "compute_energy_j"])
    done = rows[rows["t_end"] <= time_s + 1e-9]
    return float(done["energy_j"].sum() + done["compute_energy_j"].fillna(0.0).sum())


def to_target(folder: Path, summary: dict) -> dict:
    """A run's time and device energy to the target, final accuracy and cloud aggregations."""
    ttt = summary["time_to_target_s"]
    return {"time_to_target_s": ttt, "energy_to_target_j": energy_to(folder, ttt),
            "final_accuracy": summary["final_accuracy"],
            "cloud_aggregations": summary["tiers"]["cloud_aggregations"] if summary.get("tiers") else summary["rounds"]}


def collect(runs: Runs, scale: str) -> pd.DataFrame:
    """Per run (kind "run") its numbers; per evaluation (kind "curve") its accuracy."""
    rows = []
    for variant in variants(scale):
        stem, backhaul = variant.rsplit("_", 1)
        tiers, kappa2, kappa1 = SETTINGS[stem]
        for seed, folder in runs.seeds(variant):
            s = run_summary(folder)
            key = {"variant": variant, "tiers": tiers, "kappa2": kappa2, "kappa1": kappa1, "backhaul": backhaul,
                   "seed": seed}
            rows.append({"kind": "run", **key, **to_target(folder, s)})
            rows += curve_rows(folder, key)
    return pd.DataFrame(rows)


def label(variant: str) -> str:
    stem, backhaul = variant.rsplit("_", 1)
    tiers, kappa2, kappa1 = SETTINGS[stem]
    who = "cloud alone" if tiers == "cloud" else f"edges, κ2 = {kappa2}"
    return f"{who}, κ1 = {kappa1}, {backhaul} backhaul"


def report(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """A table per variant, the accuracy curves per backhaul, and the time and energy to target."""
    runs, curves = runs_and_curves(data)
    md = [f"Mean ± std over seeds (time and energy to {100 * TARGET:.0f} % among the seeds that reach it):", "",
          "| who aggregates | κ1 | backhaul | time to target (s) | reached | device energy to target (J) | "
          "final accuracy (%) | cloud aggregations |", "|---|---|---|---|---|---|---|---|"]
    numbers = {}
    names = [v for v in variants(scale) if len(runs) and (runs["variant"] == v).any()]
    for name in names:
        of = runs[runs["variant"] == name]
        stem, backhaul = name.rsplit("_", 1)
        tiers, kappa2, kappa1 = SETTINGS[stem]
        numbers[f"{name}_time_to_target_s"] = float(of["time_to_target_s"].mean())
        numbers[f"{name}_energy_to_target_j"] = float(of["energy_to_target_j"].mean())
        who = "cloud alone" if tiers == "cloud" else f"edges, κ2 = {kappa2}"
        md.append(f"| {who} | {kappa1} | {backhaul} | {spread_cell(of['time_to_target_s'], '.1f')} | "
                  f"{of['time_to_target_s'].notna().sum()}/{len(of)} | {spread_cell(of['energy_to_target_j'], '.1f')} | "
                  f"{spread_cell(100 * of['final_accuracy'], '.1f')} | {spread_cell(of['cloud_aggregations'], '.0f')} |")
    md.append("")
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, backhaul in zip(axes[:2], BACKHAULS):
        mine = [(v, label(v)) for v in names if v.endswith(backhaul)]
        seed_mean_curves(ax, curves, mine, TARGET)
        ax.set_title(f"{backhaul} backhaul ({BACKHAULS[backhaul][0] / 1e6:g} Mbit/s, "
                     f"{1000 * BACKHAULS[backhaul][1]:g} ms)")
    ax = axes[2]
    if len(runs):
        for k, name in enumerate(names):
            of = runs[runs["variant"] == name]
            ax.errorbar(of["time_to_target_s"].mean(), of["energy_to_target_j"].mean(),
                        xerr=np.nan_to_num(of["time_to_target_s"].std(ddof=1)),
                        yerr=np.nan_to_num(of["energy_to_target_j"].std(ddof=1)), marker="os"[name.startswith("edge")],
                        color=f"C{k}", capsize=3, label=label(name))
    ax.set_xlabel(f"time to {100 * TARGET:.0f} % (s)")
    ax.set_ylabel("device energy to the target (J)")
    ax.set_title("time and energy to the target")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    path = save_figure(fig, figures / "networks_hierfavg.png", caption=figure_caption(scale, data))
    md.append("![](networks_hierfavg.png)")
    return Report("hierfavg", [path], numbers, "\n".join(md))


REUSES = (1, 3, 7)


def reuse_variants(scale: str) -> dict[str, dict]:
    """The cloud alone over the seven cells at reuse 1, 3 and 7, behind the fast backhaul."""
    rate, latency = BACKHAULS["fast"]
    return {f"reuse{r}": {"network.reuse": r, "hierarchy.backhaul_rate_bps": rate,
                          "hierarchy.backhaul_latency_s": latency} for r in REUSES}


def reuse_families(scale: str, overrides: Sequence[str]) -> dict:
    base = packaged("studies/hierfavg", [*SCALES[scale], *overrides])
    return {f"networks/reuse/{scale}": (base, reuse_variants(scale))}


def interference_share(folder: Path, reuse: int, bits: float, bandwidth_hz: float, noise_power: float) -> float:
    """The share of the uplink time the interference took: 1 - sum of the uploads' times alone on
    their sub-band (bits / ((B / reuse) log2(1 + g P reuse / N0))) over the sum of their times on the air."""
    up = pd.read_csv(folder / "updates.csv", usecols=["airtime_s", "gain", "power", "tx_end_s"]).dropna(subset=["tx_end_s"])
    if not len(up):
        return math.nan
    alone = bits / (bandwidth_hz / reuse * np.log2(1 + up["gain"] * up["power"] * reuse / noise_power))
    share = float(1.0 - alone.sum() / up["airtime_s"].sum())
    return share if abs(share) > 1e-9 else 0.0  # alone on its sub-band: the same airtime, up to rounding


def collect_reuse(runs: Runs, scale: str) -> pd.DataFrame:
    """Per run its time to target, final accuracy, rounds, mean round time, the interference's share of
    the uplink time and the cells' mean SINR loss; per evaluation its accuracy."""
    import tomllib

    rows = []
    for variant in reuse_variants(scale):
        reuse = int(variant.removeprefix("reuse"))
        for seed, folder in runs.seeds(variant):
            s = run_summary(folder)
            link = tomllib.loads((folder / "scenario.toml").read_text())["link"]
            key = {"variant": variant, "reuse": reuse, "seed": seed}
            cells = s["cells"]
            rows.append({"kind": "run", **key, "time_to_target_s": s["time_to_target_s"],
                         "final_accuracy": s["final_accuracy"], "rounds": s["rounds"],
                         "mean_round_s": s["sim_time_s"] / max(s["rounds"], 1),
                         "interference_share": interference_share(folder, reuse, s["model_bits"],
                                                                  link["bandwidth_hz"], link["noise_power"]),
                         "sinr_loss_db": float(np.mean([c["sinr_loss_db"] for c in cells]))})
            rows += curve_rows(folder, key)
    return pd.DataFrame(rows)


def report_reuse(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """A table per reuse factor and the accuracy curves."""
    runs, curves = runs_and_curves(data)
    md = [f"Mean ± std over seeds (time to {100 * TARGET:.0f} % among the seeds that reach it):", "",
          "| reuse | time to target (s) | reached | final accuracy (%) | mean round (s) | interference's share of "
          "the uplink time (%) | mean SINR loss (dB) |", "|---|---|---|---|---|---|---|"]
    numbers = {}
    for reuse in REUSES:
        of = runs[runs["reuse"] == reuse] if len(runs) else runs
        if not len(of):
            continue
        numbers[f"reuse{reuse}_time_to_target_s"] = float(of["time_to_target_s"].mean())
        numbers[f"reuse{reuse}_interference_share"] = float(of["interference_share"].mean())
        md.append(f"| {reuse} | {spread_cell(of['time_to_target_s'], '.1f')} | {of['time_to_target_s'].notna().sum()}/"
                  f"{len(of)} | {spread_cell(100 * of['final_accuracy'], '.1f')} | {spread_cell(of['mean_round_s'], '.3f')} | "
                  f"{spread_cell(100 * of['interference_share'], '.1f')} | {spread_cell(of['sinr_loss_db'], '.1f')} |")
    md.append("")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    seed_mean_curves(ax, curves, [(f"reuse{r}", f"reuse {r}") for r in REUSES], TARGET)
    ax.set_title("seven cells, one server in the cloud: accuracy by frequency reuse")
    path = save_figure(fig, figures / "networks_reuse.png", caption=figure_caption(scale, data))
    md.append("![](networks_reuse.png)")
    return Report("reuse", [path], numbers, "\n".join(md))


SPEEDS = {"still": (0.0, "restart"), "walk": (2.0, "restart"), "car": (20.0, "restart"), "car_lose": (20.0, "lose"),
          "train": (50.0, "restart")}
"""Variant -> (devices' speed in m/s, what becomes of an upload at its device's handover)."""


def speed_variants(scale: str) -> dict[str, dict]:
    """FedBuff over the seven cells (reuse 7, the fast backhaul) with devices moving at each speed."""
    out = {}
    for name, (speed, mode) in SPEEDS.items():
        out[name] = {"protocol.name": "fedbuff", "protocol.concurrency": 14, "protocol.buffer": 5,
                     "devices.mobility": "static" if speed == 0 else "random_waypoint", "devices.speed_mps": speed,
                     "network.handover_upload": mode}
    return out


def speed_families(scale: str, overrides: Sequence[str]) -> dict:
    """The hierfavg base without its backhaul: uploads reach the server as they end, so what the
    speed does shows on the radio alone."""
    from ..config import from_dict, to_dict

    data = to_dict(packaged("studies/hierfavg", [*SCALES[scale], *overrides]))
    data["hierarchy"] = {}
    return {f"networks/speed/{scale}": (from_dict(data), speed_variants(scale))}


def collect_speed(runs: Runs, scale: str) -> pd.DataFrame:
    """Per run its time to target, final accuracy, aggregations, handovers and uploads lost to them."""
    rows = []
    for variant in speed_variants(scale):
        speed, mode = SPEEDS[variant]
        for seed, folder in runs.seeds(variant):
            s = run_summary(folder)
            key = {"variant": variant, "speed_mps": speed, "handover_upload": mode, "seed": seed}
            rows.append({"kind": "run", **key, "time_to_target_s": s["time_to_target_s"],
                         "final_accuracy": s["final_accuracy"], "aggregations": s["rounds"],
                         "handovers": s.get("handovers", 0), "lost_to_handover": s["outcomes"].get("handover", 0),
                         "uploads": s["uploads"]})
            rows += curve_rows(folder, key)
    return pd.DataFrame(rows)


def report_speed(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """A table per speed and the accuracy curves."""
    runs, curves = runs_and_curves(data)
    md = [f"FedBuff, mean ± std over seeds (time to {100 * TARGET:.0f} % among the seeds that reach it):", "",
          "| devices | speed (m/s) | upload at a handover | time to target (s) | reached | final accuracy (%) | "
          "aggregations | handovers | uploads lost to a handover |", "|---|---|---|---|---|---|---|---|---|"]
    numbers = {}
    for name, (speed, mode) in SPEEDS.items():
        of = runs[runs["variant"] == name] if len(runs) else runs
        if not len(of):
            continue
        numbers[f"{name}_time_to_target_s"] = float(of["time_to_target_s"].mean())
        numbers[f"{name}_handovers"] = float(of["handovers"].mean())
        md.append(f"| {name} | {speed:g} | {mode} | {spread_cell(of['time_to_target_s'], '.1f')} | "
                  f"{of['time_to_target_s'].notna().sum()}/{len(of)} | {spread_cell(100 * of['final_accuracy'], '.1f')} | "
                  f"{spread_cell(of['aggregations'], '.0f')} | {spread_cell(of['handovers'], '.0f')} | "
                  f"{spread_cell(of['lost_to_handover'], '.0f')} |")
    md.append("")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    seed_mean_curves(ax, curves, [(name, f"{name}, {speed:g} m/s, {mode}") for name, (speed, mode) in SPEEDS.items()],
                     TARGET)
    ax.set_title("FedBuff over seven cells: accuracy by the devices' speed")
    path = save_figure(fig, figures / "networks_speed.png", caption=figure_caption(scale, data))
    md.append("![](networks_speed.png)")
    return Report("speed", [path], numbers, "\n".join(md))


EDGES = {  # variant stem -> (label, what it sets)
    "hierfavg": ("HierFAVG: sync edges, each waiting for the cloud", {}),
    "semi": ("semi_sync edges, sync cloud", {"protocol.name": "semi_sync"}),
    "fedbuff": ("FedBuff edges, sync cloud", {"protocol.name": "fedbuff", "protocol.concurrency": 2,
                                              "protocol.buffer": 2}),
    "fedbuff_async": ("FedBuff edges, async cloud", {"protocol.name": "fedbuff", "protocol.concurrency": 2,
                                                     "protocol.buffer": 2, "hierarchy.cloud": "async"})}
"""Edge servers that wait for the cloud (HierFAVG, in closed form) against event edges that never do."""


def edges_variants(scale: str) -> dict[str, dict]:
    """Each way of running the edges (kappa_2 = 10, 2 devices a round or in flight per edge) on both backhauls."""
    out = {}
    for stem, (_, sets) in EDGES.items():
        for name, (rate, latency) in BACKHAULS.items():
            out[f"{stem}_{name}"] = {"hierarchy.tiers": "edge", "hierarchy.cloud_every": 10, "scheduler.m": 2,
                                     "hierarchy.backhaul_rate_bps": rate, "hierarchy.backhaul_latency_s": latency,
                                     **sets}
    return out


def edges_families(scale: str, overrides: Sequence[str]) -> dict:
    base = packaged("studies/hierfavg", [*SCALES[scale], *overrides])
    return {f"networks/edges/{scale}": (base, edges_variants(scale))}


def collect_edges(runs: Runs, scale: str) -> pd.DataFrame:
    """Per run its time and device energy to target, final accuracy and cloud aggregations."""
    rows = []
    for variant in edges_variants(scale):
        stem, backhaul = variant.rsplit("_", 1)
        for seed, folder in runs.seeds(variant):
            s = run_summary(folder)
            key = {"variant": variant, "edges": stem, "backhaul": backhaul, "seed": seed}
            rows.append({"kind": "run", **key, **to_target(folder, s),
                         "edge_rounds": float(np.mean(s["tiers"]["edge_rounds"]))})
            rows += curve_rows(folder, key)
    return pd.DataFrame(rows)


def report_edges(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """A table per variant and the accuracy curves per backhaul."""
    runs, curves = runs_and_curves(data)
    md = [f"Seven edges, κ2 = 10; mean ± std over seeds (time and energy to {100 * TARGET:.0f} % among the seeds "
          "that reach it):", "",
          "| edges | backhaul | time to target (s) | reached | device energy to target (J) | final accuracy (%) | "
          "cloud aggregations | aggregations per edge |", "|---|---|---|---|---|---|---|---|"]
    numbers = {}
    names = [v for v in edges_variants(scale) if len(runs) and (runs["variant"] == v).any()]
    for name in names:
        of = runs[runs["variant"] == name]
        stem, backhaul = name.rsplit("_", 1)
        numbers[f"{name}_time_to_target_s"] = float(of["time_to_target_s"].mean())
        numbers[f"{name}_energy_to_target_j"] = float(of["energy_to_target_j"].mean())
        md.append(f"| {EDGES[stem][0]} | {backhaul} | {spread_cell(of['time_to_target_s'], '.1f')} | "
                  f"{of['time_to_target_s'].notna().sum()}/{len(of)} | {spread_cell(of['energy_to_target_j'], '.1f')} | "
                  f"{spread_cell(100 * of['final_accuracy'], '.1f')} | {spread_cell(of['cloud_aggregations'], '.0f')} | "
                  f"{spread_cell(of['edge_rounds'], '.0f')} |")
    md.append("")
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for ax, backhaul in zip(axes, BACKHAULS):
        mine = [(v, EDGES[v.rsplit("_", 1)[0]][0]) for v in names if v.endswith(backhaul)]
        seed_mean_curves(ax, curves, mine, TARGET)
        ax.set_title(f"seven edges, {backhaul} backhaul ({BACKHAULS[backhaul][0] / 1e6:g} Mbit/s, "
                     f"{1000 * BACKHAULS[backhaul][1]:g} ms)")
    path = save_figure(fig, figures / "networks_edges.png", caption=figure_caption(scale, data))
    md.append("![](networks_edges.png)")
    return Report("edges", [path], numbers, "\n".join(md))


RECIPES: list[Recipe] = [
    Recipe("networks", "hierfavg", "Edge servers and a cloud (HierFAVG) against the cloud alone over seven cells: "
           "time and device energy to 75 % for kappa_1, kappa_2 and two backhauls", ("networks_hierfavg.png",),
           families, collect, report, {"tiny": 0.3, "cpu": 3.5}),
    Recipe("networks", "reuse", "Reuse 1, 3 and 7 in seven cells under TDMA with interference: time to 75 %, the "
           "interference's share of the uplink time and the SINR loss", ("networks_reuse.png",), reuse_families,
           collect_reuse, report_reuse, {"tiny": 0.1, "cpu": 1.0}),
    Recipe("networks", "speed", "FedBuff over seven cells with devices moving at 0 to 50 m/s: handovers, uploads "
           "restarted or lost, time to 75 %", ("networks_speed.png",), speed_families, collect_speed, report_speed,
           {"tiny": 0.1, "cpu": 2.0}),
    Recipe("networks", "edges", "Edges that wait for the cloud (HierFAVG) against semi_sync and FedBuff edges that never "
           "do, with a sync or async cloud, on a slow and a fast backhaul: time and device energy to 75 %",
           ("networks_edges.png",), edges_families, collect_edges, report_edges, {"tiny": 0.3, "cpu": 6.0}),
]
