"""A study beyond the papers: asynchronous FL over a fading, shared uplink, against the synchronous
baseline and against the assumption behind the published numbers (figures/README_async.md).

Simulators that report asynchronous FL's gain (FedScale's FedBuff mode: 1.46x less virtual time at
equal accuracy on FEMNIST; the FedBuff paper: 3.3x against synchronous FL) end an upload at dispatch:
bytes over a fixed per-client bandwidth, no contention. Every recipe runs variants of the packaged
``async`` scenario (100 devices, non-iid Fashion-MNIST, σ from 0.1 to 10, computation 0.5 s +
Exp(1.5 s), a 10 MHz band, 150 simulated seconds, target 70 %):

- ``uplink``: FedBuff (K = 10, 20 devices training at once) against synchronous FedAvg (m = 10) under
  four links of the same band. ``fixed``: every device a fixed sub-band of B / 20 of its own
  (``link.access = "dedicated"``; at most 20 send at once, so the band is never oversubscribed) at a
  constant gain, its mean 2σ² (Rician with K = 10^9): the other simulators' assumption. ``tdma``: one
  shared uplink, one device at a time, Rayleigh fading drawn as each upload starts. ``ofdma``: 25
  resource blocks with their own fading, equal shares among the devices on the air. ``aircomp``:
  over-the-air aggregation: sync's round sends at once; FedBuff's devices wait until K are ready,
  then send together (the buffer fills at the devices, not at the server).
- ``buffer``: FedBuff over K x concurrency on the shared TDMA uplink; FedAsync over its staleness
  functions.
- ``dispatch``: the Lyapunov (age- and channel-aware) dispatch against uniform dispatch under FedBuff,
  and the synchronous schedulers, with the time-average power against P̄.
- ``semi_sync``: first k of m = 10, late uploads carried or dropped, against sync with and without a
  round deadline.
- ``link``: the round length with one channel draw per upload against fading within the upload at 3,
  30 and 60 km/h (timing only, ``studies/fading_speed``); fixed-rate packets with ARQ against the
  adaptive rate.

A recipe's data is one row per run (time to the target, aggregations, uploads, mean staleness,
transmit energy, time-average power, what became of its uploads) and its accuracy curve (``uplink``:
also the time of every aggregation); its report is drawn from the data alone.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from .recipes import Recipe, Report, Runs, figure_caption, packaged, pyplot, run_summary, save_figure, \
    runs_and_curves, seed_mean_curves, seed_std, with_spread

PUBLISHED = {"FedScale (FedBuff mode, FEMNIST)": 1.46, "FedBuff paper": 3.3}
"""Published speed-ups of buffered asynchronous FL over synchronous FL, at equal accuracy."""

LINKS = {
    "fixed": {"link.access": "dedicated", "channel.model": "rician", "channel.rician_k": 1e9},
    "tdma": {"link.access": "tdma"},
    "ofdma": {"link.access": "ofdma"},
}
LINK_LABELS = {"fixed": "fixed bandwidth, no contention", "tdma": "shared TDMA, Rayleigh",
               "ofdma": "OFDMA, Rayleigh", "aircomp": "AirComp, Rayleigh"}

TARGET = ("run.target_accuracy=0.7",)
"""70 %: every curve climbs through it (75 %, the packaged scenario's target, is where sync's curves level
off and wander, so its crossing time would measure the wandering)."""

# tiny: a few devices and seconds, for the tests (24: the packaged variants, checked at load, keep 20 in
# flight); cpu and paper: the packaged scenario as written
SCALES = {"tiny": ("devices.count=24", "run.time_budget_s=12", "run.eval_every_s=3", "learning.samples_per_device=40",
                   "learning.local_steps=2", "learning.eval_train_samples=200", *TARGET), "cpu": TARGET,
          "paper": TARGET}
FEDBUFF = {"tiny": (4, 2), "cpu": (20, 10), "paper": (20, 10)}  # (concurrency, buffer K)


def variant_name(protocol: str, link: str) -> str:
    """The run's variant: ``sync_tdma``, ``fedbuff_fixed``, ..."""
    return f"{protocol}_{link}"


def uplink_variants(scale: str) -> dict[str, dict]:
    """Sync and FedBuff under each link, AirComp included."""
    concurrency, k = FEDBUFF[scale]
    fedbuff = {"protocol.name": "fedbuff", "protocol.concurrency": concurrency, "protocol.buffer": k}
    out = {}
    for link, overrides in LINKS.items():
        if link == "fixed":
            overrides = {**overrides, "link.subbands": concurrency}
        out[variant_name("sync", link)] = {"protocol.name": "sync", **overrides}
        out[variant_name("fedbuff", link)] = {**fedbuff, **overrides}
    out[variant_name("sync", "aircomp")] = {"protocol.name": "sync", "link.access": "aircomp"}
    out[variant_name("fedbuff", "aircomp")] = {**fedbuff, "link.access": "aircomp"}
    return out


def run_rows(runs: Runs, meta: dict[str, dict], *, aggregations: bool = False) -> list[dict]:
    """The data rows of the runs of ``meta``'s variants (their columns beside): per run (kind "run")
    its headline numbers and what became of its uploads; its accuracy curve (kind "curve"), when it
    trained; and, with ``aggregations``, when each aggregation ended (kind "aggregation")."""
    rows = []
    for variant, columns in meta.items():
        for seed, folder in runs.seeds(variant):
            s = run_summary(folder)
            key = {"variant": variant, **columns, "seed": seed}
            updates = pd.read_csv(folder / "updates.csv", usecols=["device", "outcome"])
            outcomes = updates["outcome"].value_counts()
            rows.append({"kind": "run", **key, "time_to_target_s": s["time_to_target_s"],
                         "target": s["target_accuracy"], "aggregations": s["aggregations"], "uploads": s["uploads"],
                         "mean_staleness": s["mean_staleness"], "energy_j": s["total_energy_j"],
                         "final_accuracy": s["final_accuracy"], "sim_time_s": s["sim_time_s"],
                         "mean_round_s": s["sim_time_s"] / max(s["aggregations"], 1),
                         "time_avg_power": s["mean_time_avg_power"], "p_bar": s["p_bar"],
                         "lost": int(outcomes.get("lost", 0)), "late_dropped": int(outcomes.get("late_dropped", 0)),
                         "stale": int(outcomes.get("stale", 0)),
                         "lost_devices": " ".join(str(d) for d in updates.loc[updates["outcome"] == "lost", "device"])})
            if (folder / "evals.csv").exists() and (folder / "evals.csv").stat().st_size:
                ev = pd.read_csv(folder / "evals.csv")
                rows += [{"kind": "curve", **key, "time_s": t, "accuracy": a} for t, a in zip(ev.time_s, ev.accuracy)]
            if aggregations:
                ends = pd.read_csv(folder / "rounds.csv", usecols=["t_end"])["t_end"]
                rows += [{"kind": "aggregation", **key, "time_s": t} for t in ends]
    return rows


def collect_uplink(runs: Runs, scale: str) -> pd.DataFrame:
    """Per run: its numbers, its accuracy curve and the time of each of its aggregations (which a
    timing-only run of the same settings, written out by hand, must give again)."""
    meta = {v: dict(zip(("protocol", "link"), v.split("_", 1))) for v in uplink_variants(scale)}
    return pd.DataFrame(run_rows(runs, meta, aggregations=True))


def speedups(runs: pd.DataFrame) -> pd.DataFrame:
    """Per link and seed: sync's time to target over FedBuff's (NaN where either missed it)."""
    t = runs.pivot_table(index=["link", "seed"], columns="protocol", values="time_to_target_s", aggfunc="first",
                         dropna=False)
    if "sync" not in t or "fedbuff" not in t:
        return pd.DataFrame(columns=["link", "seed", "speedup"])
    return (t["sync"] / t["fedbuff"]).rename("speedup").reset_index().dropna(subset=["speedup"])


def _time(values: pd.Series) -> str:
    reached = values.dropna()
    if reached.empty:
        return "not reached"
    text = with_spread(reached.mean(), seed_std(reached), ".1f")
    return text if len(reached) == len(values) else f"{text} ({len(reached)}/{len(values)} reached)"


def report_uplink(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """The table (mean ± std over seeds) per link and protocol, FedBuff's speed-up per link beside the
    published ones, and accuracy against simulated time, one panel per link."""
    runs, curves = runs_and_curves(data)
    target = float(runs["target"].iloc[0]) if len(runs) else math.nan
    ratio = speedups(runs) if len(runs) else pd.DataFrame(columns=["link", "seed", "speedup"])
    lines = [f"| link | protocol | seeds | time to {100 * target:.0f} % (s) | aggregations | uploads | mean staleness | "
             "transmit energy (J) | final accuracy (%) |", "|---|---|---|---|---|---|---|---|---|"]
    numbers = {}
    for link in LINK_LABELS:
        for protocol in ("sync", "fedbuff"):
            r = runs[(runs["link"] == link) & (runs["protocol"] == protocol)]
            if r.empty:
                continue
            staleness = "-" if protocol == "sync" else with_spread(r.mean_staleness.mean(), seed_std(r.mean_staleness),
                                                                   ".2f")
            lines.append(f"| {LINK_LABELS[link]} | {protocol} | {len(r)} | {_time(r.time_to_target_s)} | "
                         f"{r.aggregations.mean():.0f} | {r.uploads.mean():.0f} | {staleness} | "
                         f"{with_spread(r.energy_j.mean(), seed_std(r.energy_j), '.0f')} | "
                         f"{with_spread(100 * r.final_accuracy.mean(), seed_std(100 * r.final_accuracy), '.1f')} |")
            numbers[f"{link} {protocol} time_to_target_s"] = float(r.time_to_target_s.mean())
    gains = []
    for link in LINK_LABELS:
        s = ratio[ratio["link"] == link]["speedup"]
        if len(s):
            gains.append(f"{LINK_LABELS[link]} {with_spread(s.mean(), seed_std(s), '.2f')}× "
                         f"({len(s)} seed{'' if len(s) == 1 else 's'})")
            numbers[f"{link} speedup"] = float(s.mean())
    published = ", ".join(f"{name} {value}×" for name, value in PUBLISHED.items())
    md = [f"FedBuff (K = {FEDBUFF[scale][1]}, {FEDBUFF[scale][0]} devices training at once) against synchronous "
          f"FedAvg (m = 10) on the same 100 devices, data and band. Mean ± std over seeds:", "", *lines, "",
          "FedBuff's speed-up, sync's time to target over FedBuff's, per seed: " + ("; ".join(gains) or "none measured")
          + f". Published, with a fixed per-client bandwidth: {published}.", ""]

    plt = pyplot()
    fig, axes = plt.subplots(1, len(LINK_LABELS), figsize=(4.3 * len(LINK_LABELS), 4), sharey=True)
    for ax, link in zip(axes, LINK_LABELS):
        seed_mean_curves(ax, curves, [(variant_name("sync", link), "sync"), (variant_name("fedbuff", link), "fedbuff")], target)
        ax.set_title(LINK_LABELS[link])
    path = save_figure(fig, figures / "async_wireless_uplink.png", caption=figure_caption(scale, data))
    md.append("![](async_wireless_uplink.png)")
    return Report("uplink", [path], numbers, "\n".join(md))


# ---------------------------------------------------------------------------------------------
# shared: families on the packaged scenario, tables, curves


def _families(recipe: str, variants, extra: dict[str, tuple] | None = None):
    """Families of one recipe on the packaged async scenario (shared TDMA, Rayleigh), ``variants(scale)``
    giving {variant: dotted overrides}; ``extra`` adds overrides per scale."""
    def families(scale: str, overrides: Sequence[str]) -> dict:
        base = packaged("async", [*SCALES[scale], *(extra or {}).get(scale, ()), *overrides])
        return {f"async_wireless/{recipe}/{scale}": (base, variants(scale))}
    return families


def _mean_std(values: pd.Series, fmt: str) -> str:
    return with_spread(values.mean(), seed_std(values), fmt)


def _split(data: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, float]:
    runs, curves = runs_and_curves(data)
    target = float(runs["target"].iloc[0]) if len(runs) else math.nan
    return runs, curves, target


# ---------------------------------------------------------------------------------------------
# buffer and concurrency


BUFFERS, CONCURRENCY = {"tiny": (1, 2), "cpu": (1, 5, 10, 20), "paper": (1, 5, 10, 20)}, \
    {"tiny": (4, 8), "cpu": (10, 25, 50, 100), "paper": (10, 25, 50, 100)}
STALENESS = ("constant", "polynomial", "hinge")


def buffer_variants(scale: str) -> dict[str, dict]:
    """FedBuff over K x concurrency, and FedAsync (20 in flight, alpha 0.6) over its staleness functions."""
    out = {f"fedbuff_k{k}_c{c}": {"protocol.name": "fedbuff", "protocol.buffer": k, "protocol.concurrency": c}
           for k in BUFFERS[scale] for c in CONCURRENCY[scale]}
    for fn in STALENESS:
        out[f"fedasync_{fn}"] = {"protocol.name": "fedasync", "protocol.concurrency": FEDBUFF[scale][0],
                                 "protocol.alpha": 0.6, "protocol.staleness": fn}
    return out


def collect_buffer(runs: Runs, scale: str) -> pd.DataFrame:
    meta = {}
    for v, ov in buffer_variants(scale).items():
        meta[v] = {"protocol": ov["protocol.name"], "buffer": ov.get("protocol.buffer", 1),
                   "concurrency": ov["protocol.concurrency"], "staleness_fn": ov.get("protocol.staleness", "polynomial")}
    return pd.DataFrame(run_rows(runs, meta))


def report_buffer(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """Time to target over K x concurrency (a heatmap, the best cell marked), staleness against
    concurrency, and FedAsync's staleness functions."""
    runs, curves, target = _split(data)
    fb = runs[runs["protocol"] == "fedbuff"] if len(runs) else runs
    ks, cs = sorted(fb["buffer"].unique()), sorted(fb["concurrency"].unique())
    grid = np.full((len(ks), len(cs)), np.nan)
    for i, k in enumerate(ks):
        for j, c in enumerate(cs):
            t = fb[(fb["buffer"] == k) & (fb["concurrency"] == c)]["time_to_target_s"]
            grid[i, j] = t.mean() if len(t) and t.notna().all() else np.nan
    lines = [f"FedBuff under the shared TDMA uplink: time to {100 * target:.0f} % (s, mean over seeds; '-': a seed "
             "missed it) by buffer K (rows) and concurrency (columns):", "",
             "| K \\ concurrency | " + " | ".join(str(c) for c in cs) + " |", "|---" * (len(cs) + 1) + "|"]
    for i, k in enumerate(ks):
        lines.append(f"| {k} | " + " | ".join("-" if np.isnan(v) else f"{v:.1f}" for v in grid[i]) + " |")
    numbers = {}
    if np.isfinite(grid).any():
        bi, bj = np.unravel_index(np.nanargmin(grid), grid.shape)
        best = fb[(fb["buffer"] == ks[bi]) & (fb["concurrency"] == cs[bj])]
        numbers["best"] = {"buffer": int(ks[bi]), "concurrency": int(cs[bj]), "time_s": float(grid[bi, bj])}
        lines += ["", f"Best: K = {ks[bi]}, concurrency {cs[bj]}: {_mean_std(best.time_to_target_s, '.1f')} s."]
    stale = ["", "Mean staleness (aggregations) by concurrency, for each K:", "",
             "| K | " + " | ".join(f"concurrency {c}" for c in cs) + " |", "|---" * (len(cs) + 1) + "|"]
    for k in ks:
        stale.append(f"| {k} | " + " | ".join(
            _mean_std(fb[(fb["buffer"] == k) & (fb["concurrency"] == c)]["mean_staleness"], ".2f") for c in cs) + " |")
    fa = runs[runs["protocol"] == "fedasync"] if len(runs) else runs
    fas = ["", f"FedAsync (concurrency {FEDBUFF[scale][0]}, alpha 0.6) by staleness function:", "",
           f"| s(tau) | seeds | time to {100 * target:.0f} % (s) | mean staleness | final accuracy (%) |",
           "|---|---|---|---|---|"]
    for fn in STALENESS:
        r = fa[fa["staleness_fn"] == fn] if len(fa) else fa
        if len(r):
            fas.append(f"| {fn} | {len(r)} | {_time(r.time_to_target_s)} | {_mean_std(r.mean_staleness, '.2f')} | "
                       f"{_mean_std(100 * r.final_accuracy, '.1f')} |")
    plt = pyplot()
    fig, (ax_h, ax_s, ax_f) = plt.subplots(1, 3, figsize=(14, 4))
    cmap = plt.get_cmap("viridis_r").with_extremes(bad="lightgrey")  # a cell where a seed missed the target
    im = ax_h.imshow(np.ma.masked_invalid(grid), origin="lower", aspect="auto", cmap=cmap)
    ax_h.set_xticks(range(len(cs)), [str(c) for c in cs])
    ax_h.set_yticks(range(len(ks)), [str(k) for k in ks])
    mid = np.nanmean(grid) if np.isfinite(grid).any() else 0.0
    for (i, j), v in np.ndenumerate(grid):
        ax_h.text(j, i, "missed" if np.isnan(v) else f"{v:.0f}", ha="center", va="center", fontsize=8,
                  color="dimgrey" if np.isnan(v) else "black" if v < mid else "white")
    if "best" in numbers:
        ax_h.add_patch(plt.Rectangle((bj - 0.5, bi - 0.5), 1, 1, fill=False, ec="red", lw=2.5))
    ax_h.set(xlabel="concurrency", ylabel="buffer K", title=f"time to {100 * target:.0f} % (s); best marked")
    fig.colorbar(im, ax=ax_h)
    for i, k in enumerate(ks):
        m = [fb[(fb["buffer"] == k) & (fb["concurrency"] == c)]["mean_staleness"] for c in cs]
        ax_s.errorbar(cs, [x.mean() for x in m], yerr=[np.nan_to_num(seed_std(x)) for x in m], marker="o", ms=4,
                      capsize=3, color=f"C{i}", label=f"K = {k}")
    ax_s.set(xlabel="concurrency", ylabel="mean staleness (aggregations)", title="staleness against concurrency")
    ax_s.grid(alpha=0.3)
    ax_s.legend(fontsize=8)
    seed_mean_curves(ax_f, curves, [(f"fedasync_{fn}", f"FedAsync, {fn}") for fn in STALENESS], target)
    ax_f.set_title("FedAsync's staleness functions")
    path = save_figure(fig, figures / "async_wireless_buffer.png", caption=figure_caption(scale, data))
    return Report("buffer", [path], numbers, "\n".join([*lines, *stale, *fas, "", "![](async_wireless_buffer.png)"]))


# ---------------------------------------------------------------------------------------------
# dispatch


def dispatch_variants(scale: str) -> dict[str, dict]:
    """Uniform and the Lyapunov (age- and channel-aware) dispatch under FedBuff; sync with both."""
    concurrency, k = FEDBUFF[scale]
    fedbuff = {"protocol.name": "fedbuff", "protocol.concurrency": concurrency, "protocol.buffer": k}
    return {"fedbuff_uniform": {**fedbuff, "scheduler.name": "uniform"},
            "fedbuff_lyapunov": {**fedbuff, "scheduler.name": "lyapunov"},
            "sync_uniform": {"protocol.name": "sync", "scheduler.name": "uniform"},
            "sync_lyapunov": {"protocol.name": "sync", "scheduler.name": "lyapunov"}}


DISPATCH_LABELS = {"fedbuff_uniform": "FedBuff, uniform dispatch", "fedbuff_lyapunov": "FedBuff, Lyapunov dispatch",
                   "sync_uniform": "sync, uniform", "sync_lyapunov": "sync, Lyapunov scheduler"}


def collect_dispatch(runs: Runs, scale: str) -> pd.DataFrame:
    meta = {v: dict(zip(("protocol", "rule"), v.split("_", 1))) for v in dispatch_variants(scale)}
    return pd.DataFrame(run_rows(runs, meta))


def report_dispatch(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    runs, curves, target = _split(data)
    lines = [f"| setting | seeds | time to {100 * target:.0f} % (s) | aggregations | mean staleness | "
             "time-average power (P̄ = 1) | transmit energy (J) | final accuracy (%) |", "|---|---|---|---|---|---|---|---|"]
    numbers = {}
    for v, label in DISPATCH_LABELS.items():
        r = runs[runs["variant"] == v] if len(runs) else runs
        if not len(r):
            continue
        stale = "-" if v.startswith("sync") else _mean_std(r.mean_staleness, ".2f")
        lines.append(f"| {label} | {len(r)} | {_time(r.time_to_target_s)} | {r.aggregations.mean():.0f} | {stale} | "
                     f"{_mean_std(r.time_avg_power, '.3g')} | {_mean_std(r.energy_j, '.0f')} | "
                     f"{_mean_std(100 * r.final_accuracy, '.1f')} |")
        numbers[v] = {"time_to_target_s": float(r.time_to_target_s.mean()), "time_avg_power": float(r.time_avg_power.mean())}
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.3))
    seed_mean_curves(ax, curves, list(DISPATCH_LABELS.items()), target)
    ax.set_title("dispatch under FedBuff, and the synchronous schedulers (shared TDMA)")
    path = save_figure(fig, figures / "async_wireless_dispatch.png", caption=figure_caption(scale, data))
    md = ["Heterogeneous channels (σ 0.1 to 10), shared TDMA. Mean ± std over seeds; the time-average power is "
          "the devices' mean expected power over the run, against the long-run budget P̄ = 1 (the Lyapunov "
          "rules start from empty queues: README, \"The power budget is a long-run average\"):", "", *lines, "",
          "![](async_wireless_dispatch.png)"]
    return Report("dispatch", [path], numbers, "\n".join(md))


# ---------------------------------------------------------------------------------------------
# semi-synchronous


FIRST_K = {"tiny": (2, 3), "cpu": (3, 5, 8), "paper": (3, 5, 8)}
DEADLINE_S = 6.0
"""The sync baseline's round deadline: about the 90th percentile of one device's computation (0.5 s +
Exp(1.5 s)) plus an upload."""


def semi_variants(scale: str) -> dict[str, dict]:
    """First k of m = 10 with late uploads carried or dropped; sync with and without a deadline."""
    out = {f"semi_k{k}_{late}": {"protocol.name": "semi_sync", "protocol.first_k": k, "protocol.late": late}
           for k in FIRST_K[scale] for late in ("carry", "drop")}
    out["sync"] = {"protocol.name": "sync"}
    out["sync_deadline"] = {"protocol.name": "sync", "run.round_deadline_s": DEADLINE_S}
    return out


def collect_semi(runs: Runs, scale: str) -> pd.DataFrame:
    meta = {}
    for v, ov in semi_variants(scale).items():
        meta[v] = {"first_k": ov.get("protocol.first_k", 10), "late": ov.get("protocol.late", "-"),
                   "deadline_s": ov.get("run.round_deadline_s", math.nan)}
    return pd.DataFrame(run_rows(runs, meta))


def report_semi(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    runs, curves, target = _split(data)
    order = list(dict.fromkeys(runs["variant"])) if len(runs) else []
    label = {v: ("sync" if v == "sync" else f"sync, deadline {DEADLINE_S:g} s" if v == "sync_deadline" else
                 f"first {v.split('_')[1][1:]} of 10, late {v.split('_')[2]}") for v in order}
    lines = [f"| setting | seeds | time to {100 * target:.0f} % (s) | aggregations | uploads | uploads dropped (late) | "
             "final accuracy (%) |", "|---|---|---|---|---|---|---|"]
    numbers = {}
    for v in order:
        r = runs[runs["variant"] == v]
        lines.append(f"| {label[v]} | {len(r)} | {_time(r.time_to_target_s)} | {r.aggregations.mean():.0f} | "
                     f"{r.uploads.mean():.0f} | {r.late_dropped.mean():.0f} | {_mean_std(100 * r.final_accuracy, '.1f')} |")
        numbers[v] = float(r.time_to_target_s.mean())
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.3))
    seed_mean_curves(ax, curves, [(v, label[v]) for v in order], target)
    ax.set_title("first k of m = 10 against sync (shared TDMA)")
    path = save_figure(fig, figures / "async_wireless_semi_sync.png", caption=figure_caption(scale, data))
    md = ["Semi-synchronous rounds: m = 10 devices start each round, the server aggregates when the first k uploads "
          "are in; late uploads are carried into a later aggregation or dropped. Mean ± std over seeds:", "",
          *lines, "", "![](async_wireless_semi_sync.png)"]
    return Report("semi_sync", [path], numbers, "\n".join(md))


# ---------------------------------------------------------------------------------------------
# the link: one draw per round against fading within an upload; ARQ against adaptive rate


SPEEDS_KMH = (0.0, 3.0, 30.0, 60.0)
LINK_TIMING = {"tiny": ("run.rounds=20",), "cpu": (), "paper": ()}
ARQ = {"link.packet_bits": 1_000_000, "link.rate_bps": 20e6, "link.errors": "outage", "link.max_attempts": 4}
"""Fixed-rate packets of 1 Mbit at 20 Mbit/s, each failing when its channel's capacity is below the rate
(an outage: devices with a mean gain under about 0.3 at the uniform scheduler's power fail often, the
median device's capacity is about 90 Mbit/s), sent again on a fresh draw up to 4 times."""


def link_families(scale: str, overrides: Sequence[str]) -> dict:
    timing = packaged("studies/fading_speed", [*LINK_TIMING[scale], *overrides])
    speeds = {f"speed_{kmh:g}": {"devices.speed_mps": round(kmh / 3.6, 4)} for kmh in SPEEDS_KMH}
    arq = packaged("async", [*SCALES[scale], *overrides])
    return {f"async_wireless/link_timing/{scale}": (timing, speeds),
            f"async_wireless/link_arq/{scale}": (arq, {"adaptive": {"protocol.name": "sync"},
                                                      "arq": {"protocol.name": "sync", **ARQ}})}


def collect_link(runs: Runs, scale: str) -> pd.DataFrame:
    meta = {f"speed_{kmh:g}": {"part": "timing", "speed_kmh": kmh} for kmh in SPEEDS_KMH}
    meta.update({"adaptive": {"part": "arq", "speed_kmh": 0.0}, "arq": {"part": "arq", "speed_kmh": 0.0}})
    rows = run_rows(runs, meta)
    for row in rows:  # the mean transmissions per upload, and its packets
        if row["kind"] == "run":
            folder = dict(runs.seeds(row["variant"]))[row["seed"]]
            row["packets"] = math.ceil(run_summary(folder)["model_bits"] / ARQ["link.packet_bits"]) \
                if row["variant"] == "arq" else 1
            row["per_upload"] = float(pd.read_csv(folder / "updates.csv", usecols=["attempts"])["attempts"].mean())
    return pd.DataFrame(rows)


def report_link(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    runs, curves, _ = _split(data)
    timing = runs[runs["part"] == "timing"] if len(runs) else runs
    arq = runs[runs["part"] == "arq"] if len(runs) else runs
    target = float(arq["target"].iloc[0]) if len(arq) else math.nan
    numbers = {}
    lines = ["Round length of the same rounds (sync, 50 devices, m = 10, TDMA, 8 Mbit uploads, 2 GHz), with one "
             "gain per upload (0 km/h) and with the channel changing within each upload:", "",
             "| speed (km/h) | seeds | mean round (s) | one draw per upload, error against it |", "|---|---|---|---|"]
    still = timing[timing["speed_kmh"] == 0]["mean_round_s"]
    for kmh in SPEEDS_KMH:
        r = timing[timing["speed_kmh"] == kmh] if len(timing) else timing
        if not len(r):
            continue
        err = "" if kmh == 0 or still.empty else f"{100 * (still.mean() / r.mean_round_s.mean() - 1):+.1f} %"
        lines.append(f"| {kmh:g} | {len(r)} | {_mean_std(r.mean_round_s, '.4f')} | {err} |")
        numbers[f"round_s {kmh:g} km/h"] = float(r.mean_round_s.mean())
    lines += ["", "Fixed-rate packets with ARQ against the adaptive rate (the async scenario, sync rounds, m = 10):",
              "", f"| link | seeds | time to {100 * target:.0f} % (s) | aggregations | uploads lost | transmissions "
              "per upload (packets) | final accuracy (%) |", "|---|---|---|---|---|---|---|"]
    for v, label in (("adaptive", "adaptive rate, one transmission"),
                     ("arq", "20 Mbit/s packets of 1 Mbit, outage, up to 4 transmissions")):
        r = arq[arq["variant"] == v] if len(arq) else arq
        if len(r):
            lines.append(f"| {label} | {len(r)} | {_time(r.time_to_target_s)} | {r.aggregations.mean():.0f} | "
                         f"{r.lost.mean():.1f} | {r.per_upload.mean():.2f} ({int(r.packets.iloc[0])}) | "
                         f"{_mean_std(100 * r.final_accuracy, '.1f')} |")
            numbers[v] = float(r.time_to_target_s.mean())
    plt = pyplot()
    fig, (ax_r, ax_a) = plt.subplots(1, 2, figsize=(11, 4))
    if len(timing):  # 0 km/h is the other model (one draw per upload), not a point of the moving line
        g = timing[timing["speed_kmh"] > 0].groupby("speed_kmh")["mean_round_s"]
        ax_r.errorbar(g.mean().index, g.mean().values, yerr=np.nan_to_num(g.agg(seed_std).values), marker="o",
                      capsize=3, label="fading within the upload")
        if not still.empty:
            ax_r.axhline(still.mean(), color="grey", ls="--", lw=1)
            ax_r.errorbar([0.0], [still.mean()], yerr=[np.nan_to_num(seed_std(still))], color="grey", marker="s",
                          capsize=3, ls="none", label="one draw per upload (0 km/h)")
    ax_r.set(xlabel="speed (km/h)", ylabel="mean round length (s)", title="round length against speed (2 GHz)")
    ax_r.grid(alpha=0.3)
    ax_r.legend(fontsize=8)
    seed_mean_curves(ax_a, curves, [("adaptive", "adaptive rate"), ("arq", "fixed rate + ARQ")], target)
    ax_a.set_title("ARQ against adaptive rate")
    path = save_figure(fig, figures / "async_wireless_link.png", caption=figure_caption(scale, data))
    return Report("link", [path], numbers, "\n".join([*lines, "", "![](async_wireless_link.png)"]))


# CPU minutes for 3 seeds, one torch thread: the committed runs' wall times (tiny: a 3-seed run here)
RECIPES: list[Recipe] = [
    Recipe("async_wireless", "uplink", "FedBuff against sync FedAvg: fixed bandwidth, shared TDMA, OFDMA, AirComp",
           ("async_wireless_uplink.png",), _families("uplink", uplink_variants), collect_uplink, report_uplink, {"tiny": 0.11, "cpu": 2.7}),
    Recipe("async_wireless", "buffer", "FedBuff over buffer K x concurrency, FedAsync over its staleness functions",
           ("async_wireless_buffer.png",), _families("buffer", buffer_variants), collect_buffer, report_buffer,
           {"tiny": 0.12, "cpu": 12.0}),
    Recipe("async_wireless", "dispatch", "Lyapunov dispatch against uniform under FedBuff, and the sync schedulers",
           ("async_wireless_dispatch.png",), _families("dispatch", dispatch_variants), collect_dispatch,
           report_dispatch, {"tiny": 0.06, "cpu": 1.3}),
    Recipe("async_wireless", "semi_sync", "First k of m = 10, late uploads carried or dropped, against sync",
           ("async_wireless_semi_sync.png",), _families("semi_sync", semi_variants), collect_semi, report_semi,
           {"tiny": 0.07, "cpu": 2.7}),
    Recipe("async_wireless", "link", "Round length: one draw per upload against fading at 3-60 km/h; ARQ against "
           "adaptive rate", ("async_wireless_link.png",), link_families, collect_link, report_link,
           {"tiny": 0.03, "cpu": 0.7}),
]
