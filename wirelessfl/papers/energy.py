"""A study of this simulator: what compressed updates buy on a narrow, shared, fading uplink
(figures/README_energy.md); the studies of CPU frequency and batteries are in energy_frequency.py and
energy_battery.py.

``compression``: every built-in compressor (docs/compression.md) under synchronous FedAvg (m = 10)
and FedBuff (K = 5, 10 devices training at once) on the packaged ``compression`` scenario: 50
devices, non-iid Fashion-MNIST, an MLP of 199,210 parameters (6.4 Mbit an upload as 32-bit floats),
one 1 MHz TDMA uplink with Rayleigh fading, 120 simulated seconds. Per run: the time to 70 %
accuracy, the final accuracy, the uplink's busy share and the transmit energy per applied update,
with the encoded size beside them; the figure draws accuracy against time per compressor.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..learning.compression import COMPRESSORS
from .recipes import Recipe, Report, Runs, figure_caption, packaged, pyplot, run_summary, save_figure, \
    curve_rows, runs_and_curves, seed_mean_curves, spread_cell

COMPRESSIONS = ("none", "float16", "qsgd", "topk", "sign", "randk")
PROTOCOLS = {"sync": {"protocol.name": "sync"},
             "fedbuff": {"protocol.name": "fedbuff", "protocol.concurrency": 10, "protocol.buffer": 5}}
TARGET = 0.7

SCALES = {"tiny": ("devices.count=12", "run.time_budget_s=20", "run.eval_every_s=5", "learning.samples_per_device=40",
                   "learning.local_steps=2", "learning.eval_train_samples=200", f"run.target_accuracy={TARGET}"),
          "cpu": (f"run.target_accuracy={TARGET}",), "paper": (f"run.target_accuracy={TARGET}",)}
SIZES = {"tiny": {"protocol.concurrency": 4, "protocol.buffer": 2}, "cpu": {}, "paper": {}}


def variants(scale: str) -> dict[str, dict]:
    """Each compressor under sync and FedBuff: ``sync_topk``, ``fedbuff_none``, ..."""
    out = {}
    for protocol, overrides in PROTOCOLS.items():
        sized = {**overrides, **(SIZES[scale] if protocol == "fedbuff" else {})}
        for name in COMPRESSIONS:
            out[f"{protocol}_{name}"] = {**sized, "learning.compression": name}
    return out


def families(scale: str, overrides: Sequence[str]) -> dict:
    base = packaged("compression", [*SCALES[scale], *overrides])
    return {f"energy/compression/{scale}": (base, variants(scale))}


def bits_share(name: str) -> float:
    """The encoded size of one update over its 32-bit size, at the compressor's default options."""
    d = 199_210  # the MLP's entries on Fashion-MNIST: 784*200+200 + 200*200+200 + 200*10+10
    return COMPRESSORS.load(name)().bits(d) / (32 * d)


def collect(runs: Runs, scale: str) -> pd.DataFrame:
    """Per run (kind "run") its numbers; per evaluation (kind "curve") its accuracy."""
    rows = []
    for variant in variants(scale):
        protocol, compression = variant.split("_", 1)
        for seed, folder in runs.seeds(variant):
            s = run_summary(folder)
            key = {"variant": variant, "protocol": protocol, "compression": compression, "seed": seed}
            updates = pd.read_csv(folder / "updates.csv", usecols=["outcome", "tx_start_s", "tx_end_s", "energy_j"])
            applied = updates[updates["outcome"] == "applied"]
            end = s["sim_time_s"]  # the band's busy time up to the end (an upload still on the air counts till then)
            on_air = updates["tx_end_s"].fillna(end).clip(upper=end) - updates["tx_start_s"]
            rows.append({"kind": "run", **key, "time_to_target_s": s["time_to_target_s"],
                         "final_accuracy": s["final_accuracy"], "sim_time_s": s["sim_time_s"],
                         "aggregations": s["aggregations"], "uploads": s["uploads"],
                         "busy_share": float(on_air.sum()) / max(end, 1e-300),
                         "energy_per_update_j": float(applied["energy_j"].mean()) if len(applied) else math.nan,
                         "bits_share": bits_share(compression)})
            rows += curve_rows(folder, key)
    return pd.DataFrame(rows)


def report(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """A table per protocol (encoded size, time to 70 %, final accuracy, uplink busy share, energy
    per update) and the accuracy curves, one panel per protocol."""
    runs, curves = runs_and_curves(data)
    md, numbers = [], {}
    for protocol in PROTOCOLS:
        md += [f"**{protocol}** (mean ± std over seeds; time to {100 * TARGET:.0f} % among the seeds that reach it):", "",
               "| compression | bits / 32-bit | time to target (s) | reached | final accuracy (%) | uplink busy | "
               "energy per update (J) |", "|---|---|---|---|---|---|---|"]
        for name in COMPRESSIONS:
            of = runs[(runs["protocol"] == protocol) & (runs["compression"] == name)] if len(runs) else runs
            if not len(of):
                continue
            reached = of["time_to_target_s"].notna().sum()
            numbers[f"{protocol}_{name}_time_to_target_s"] = float(of["time_to_target_s"].mean())
            md.append(f"| {name} | {bits_share(name):.4f} | {spread_cell(of['time_to_target_s'], '.1f')} | "
                      f"{reached}/{len(of)} | {spread_cell(100 * of['final_accuracy'], '.1f')} | "
                      f"{spread_cell(100 * of['busy_share'], '.0f')} % | {spread_cell(of['energy_per_update_j'], '.3g')} |")
        md.append("")
    plt = pyplot()
    fig, axes = plt.subplots(1, len(PROTOCOLS), figsize=(5.2 * len(PROTOCOLS), 4), sharey=True)
    for ax, protocol in zip(np.atleast_1d(axes), PROTOCOLS):
        seed_mean_curves(ax, curves, [(f"{protocol}_{name}", f"{name}, {bits_share(name):.3g} of the bits")
                                      for name in COMPRESSIONS], TARGET)
        ax.set_title(protocol)
    path = save_figure(fig, figures / "energy_compression.png", caption=figure_caption(scale, data))
    md.append("![](energy_compression.png)")
    return Report("compression", [path], numbers, "\n".join(md))


from .energy_battery import RECIPES as BATTERY_RECIPES  # noqa: E402
from .energy_frequency import RECIPES as FREQUENCY_RECIPES  # noqa: E402

RECIPES: list[Recipe] = [
    Recipe("energy", "compression", "Each compressor under sync and FedBuff on a 1 MHz shared TDMA uplink: time to "
           "70 %, accuracy, airtime and energy", ("energy_compression.png",), families, collect, report,
           {"tiny": 0.18, "cpu": 4.1}),
    *FREQUENCY_RECIPES,
    *BATTERY_RECIPES,
]
