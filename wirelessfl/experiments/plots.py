"""Figures of runs: accuracy and training loss against simulated wall-clock time (or rounds), energy
per device and over time, and simulated round times against the no-overlap formula."""
from __future__ import annotations

import json

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display is needed or assumed
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ..files import make_folder, write_figure  # noqa: E402
from ..plugins import PluginError, registry  # noqa: E402
from ..sim.records.update_log import OUTCOMES  # noqa: E402
from .run import RunResult, load_run  # noqa: E402

_X = {"time": ("time_s", "simulated wall-clock time (s)"), "round": ("round", "round")}
_Y = {"accuracy": "test accuracy", "train_loss": "training loss", "test_loss": "test loss"}


def _save(fig, out_dir: str | Path, name: str, crop: bool = False) -> Path:
    """Lay out ``fig``, write it as ``out_dir/name`` and close it; returns the path. ``crop``: cut the
    saved image to what was drawn (a map of equal aspect leaves empty margins in its box)."""
    fig.tight_layout()
    out_dir = Path(out_dir)
    make_folder(out_dir, theirs=True)
    path = out_dir / name
    write_figure(fig, path, dpi=120, **({"bbox_inches": "tight", "pad_inches": 0.08} if crop else {}))
    plt.close(fig)
    return path


def find_runs(paths: list[str | Path]) -> dict[str, RunResult]:
    """Runs under the given paths: each path is a run directory or a folder of run directories."""
    runs: dict[str, RunResult] = {}
    for path in map(Path, paths):
        if (path / "evals.csv").exists():
            runs[path.name] = load_run(path)
            continue
        subs = sorted((p.parent for p in path.glob("*/evals.csv")), key=_variant_order(path))
        if not subs:
            raise FileNotFoundError(f"{path}: no run directory (a folder with evals.csv) found there")
        for sub in subs:
            runs[sub.name if len(paths) == 1 else f"{path.name}/{sub.name}"] = load_run(sub)
    return runs


def _variant_order(folder: Path):
    """A sort key for the run folders of a scenario's folder: the variants in the scenario's order
    (its index.json), as the run drew them (colours and panels alike), then any others by name."""
    try:
        listed = json.loads((folder / "index.json").read_text()).get("runs", [])
        order = {name: i for i, name in enumerate(listed) if isinstance(name, str)}
    except (OSError, ValueError, AttributeError):
        order = {}
    return lambda run_dir: (order.get(run_dir.name, len(order)), run_dir.name)


_LINESTYLES = ("-", "--", "-.", ":")


def plot_runs(runs: dict[str, RunResult], out_dir: str | Path, x: str = "time",
              metrics: tuple[str, ...] = ("accuracy", "train_loss"), title: str | None = None) -> list[Path]:
    """One PNG per metric with one line per run; returns the written paths."""
    if x not in _X:
        raise ValueError(f"x = {x!r}: must be one of {', '.join(_X)}")
    xcol, xlabel = _X[x]
    out_dir = Path(out_dir)
    make_folder(out_dir, theirs=True)
    written = []
    for metric in metrics:
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for k, (name, run) in enumerate(runs.items()):
            if run.evals.empty or metric not in run.evals:
                continue
            # the model only changes when a round ends: hold each value until the next evaluation;
            # a line style per run, so that a curve drawn over another leaves it visible
            ax.step(run.evals[xcol], run.evals[metric], where="post", label=name, lw=1.6,
                    ls=_LINESTYLES[k % len(_LINESTYLES)])
        target = next((r.summary.get("target_accuracy") for r in runs.values()
                       if r.summary.get("target_accuracy")), None)
        if metric == "accuracy" and target:
            ax.axhline(target, color="grey", ls=":", lw=1, label=f"target {target:g}")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(_Y.get(metric, metric))
        if title:
            ax.set_title(title)
        ax.grid(alpha=0.3)
        if not ax.get_lines():  # no run evaluated this metric (e.g. timing-only runs): no empty figure
            plt.close(fig)
            continue
        ax.legend()
        fig.tight_layout()
        path = out_dir / f"{metric}_vs_{x}.png"
        write_figure(fig, path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


MAX_POINTS = 2000
"""A running mean is drawn at this many rounds at most: a long run's figure costs what a short one's does."""


def plot_timing(runs: dict[str, RunResult], out_dir: str | Path, title: str | None = None) -> Path:
    """timing.png, for runs without training (timing only): (a) round length and (b) airtime per round
    over the rounds (running means), (c) distinct devices per round, (d) each device's time-average
    expected power against its budget."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    (ax_len, ax_air), (ax_dev, ax_pow) = axes
    for k, (name, run) in enumerate(runs.items()):
        r, colour = run.rounds, f"C{k}"
        if r.empty:
            continue
        rounds = r["round"].to_numpy()
        shown = np.unique(np.linspace(0, len(rounds) - 1, min(len(rounds), MAX_POINTS)).astype(int))
        for ax, values in ((ax_len, r["t_end"] - r["t_start"]), (ax_air, r["comm_s"]), (ax_dev, r["num_selected"])):
            # running mean: single rounds are noisy (fading), the mean is what the schedule costs; a
            # smooth curve, drawn at MAX_POINTS rounds at most
            running = np.cumsum(values.to_numpy(float)) / np.arange(1, len(values) + 1)
            ax.plot(rounds[shown], running[shown], color=colour, lw=1.6, label=name)
        d = run.devices
        ax_pow.plot(d["device"], d["time_avg_power"], color=colour, lw=1.2, marker=".", label=name)
    budgets = sorted({float(run.summary["p_bar"]) for run in runs.values() if run.summary.get("p_bar") is not None})
    for p_bar in budgets:  # the long-run average each device's expected power must meet
        # on top: a scheduler that spends exactly the budget (uniform) would hide it
        ax_pow.axhline(p_bar, color="black", ls="--", lw=1.2, zorder=5, label=f"budget P̄ = {p_bar:g}")
    ax_len.set_ylabel("round length, running mean (s)")
    ax_air.set_ylabel("airtime per round, running mean (s)")
    ax_dev.set_ylabel("distinct devices per round, running mean")
    for ax in (ax_len, ax_air, ax_dev):
        ax.set_xlabel("round")
    ax_pow.set_xlabel("device")
    ax_pow.set_ylabel("time-average expected power (P q)")
    for ax, label in zip(axes.flat, "abcd"):
        ax.grid(alpha=0.3)
        ax.set_title(f"({label})", loc="left", fontsize=9)
        if ax.get_lines():
            ax.legend(fontsize=8)
    if title:
        fig.suptitle(f"{title} (timing only)")
    return _save(fig, out_dir, "timing.png")


def has_energy(run: RunResult) -> bool:
    """Whether a run recorded transmit and computation energy (runs written before that did not)."""
    return "compute_energy_j" in run.rounds and "transmit_energy_j" in run.devices


def plot_energy(runs: dict[str, RunResult], out_dir: str | Path, title: str | None = None) -> Path | None:
    """energy.png: cumulative transmit and computation energy over simulated time (all devices), and
    each device's total (against its distance to the base station when the run has path loss).

    Returns None when no run has energy columns."""
    runs = {name: run for name, run in runs.items() if has_energy(run) and not run.rounds.empty}
    if not runs:
        return None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for k, (name, run) in enumerate(runs.items()):
        colour = f"C{k}"
        r = run.rounds
        ax1.plot(r["t_end"], r["energy_j"].cumsum(), color=colour, lw=1.6, label=f"{name}: transmit")
        if r["compute_energy_j"].sum() > 0:
            ax1.plot(r["t_end"], r["compute_energy_j"].cumsum(), color=colour, lw=1.6, ls="--",
                     label=f"{name}: computation")
        d = run.devices
        total = d["transmit_energy_j"] + d["compute_energy_j"]
        x = d["distance_m"] if "distance_m" in d else d["device"]
        ax2.scatter(x, total, s=14, color=colour, label=name)
    ax1.set_xlabel("simulated wall-clock time (s)")
    ax1.set_ylabel("cumulative energy, all devices (J)")
    ax1.legend(fontsize=8)
    ax2.set_xlabel("distance to the base station (m)" if all("distance_m" in r.devices for r in runs.values())
                   else "device")
    ax2.set_ylabel("transmit + computation energy per device (J)")
    ax2.legend(fontsize=8)
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    return _save(fig, out_dir, "energy.png")


def plot_battery(runs: dict[str, RunResult], out_dir: str | Path, title: str | None = None) -> Path | None:
    """battery.png: the mean charge and the devices below the threshold over simulated time, and who
    took part: each device's updates against its channel's scale sigma (docs/energy.md).

    Returns None when no run has batteries."""
    runs = {name: run for name, run in runs.items() if "battery_mean_j" in run.rounds and not run.rounds.empty}
    if not runs:
        return None
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(14, 4.2))
    for k, (name, run) in enumerate(runs.items()):
        r, d = run.rounds, run.devices
        ax1.step(r["t_end"], r["battery_mean_j"], where="post", color=f"C{k}", lw=1.6, label=name)
        ax2.step(r["t_end"], r["battery_low"], where="post", color=f"C{k}", lw=1.6, label=name)
        ax3.scatter(d["sigma"], d["selections"], s=14, color=f"C{k}", label=name)
    ax1.set_ylabel("mean charge (J)")
    ax2.set_ylabel("devices below the threshold")
    for ax in (ax1, ax2):
        ax.set_xlabel("simulated wall-clock time (s)")
    ax3.set_xlabel("the device's channel scale sigma")
    ax3.set_ylabel("updates started (selections)")
    for ax in (ax1, ax2, ax3):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return _save(fig, out_dir, "battery.png")


def no_overlap_round_s(rounds) -> np.ndarray:
    """Round time if nothing overlapped: downlink + longest computation + sum of the airtimes.

    The event model is never slower (TDMA): an upload can go on the air while others still compute."""
    return (rounds["downlink_s"] + rounds["comp_s"] + rounds["comm_s"]).to_numpy(float)


def no_overlap_applies(result: RunResult) -> bool:
    """Whether the no-overlap formula is drawn for the run: its access scheme declares that uploads do
    not share a band (``AccessScheme.concurrent`` False: tdma, tdma_slotted, dedicated), so each
    upload's airtime is its own and their sum is the uplink's time had nothing overlapped. False for
    a scheme that cannot be loaded here (an import path away from its folder)."""
    try:
        return not registry("access").load(result.summary.get("access", "tdma")).concurrent
    except PluginError:
        return False


def plot_round_times(runs: dict[str, RunResult], path: str | Path, title: str | None = None) -> Path:
    """Simulated round times against the no-overlap formula (runs whose uploads share no band:
    :func:`no_overlap_applies`), their distributions, and a
    round-by-round comparison of the first two runs (same seed: same channels, selections, delays)."""
    names = list(runs)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    ax1, ax2, ax3 = axes
    top = 0.0
    for k, name in enumerate(names):
        r = runs[name].rounds
        sim = (r["t_end"] - r["t_start"]).to_numpy(float)
        colour = f"C{k}"
        xs = np.sort(sim)
        ax2.plot(xs, np.arange(1, xs.size + 1) / xs.size, color=colour, lw=1.6, label=f"{name}: simulated")
        if no_overlap_applies(runs[name]):
            formula = no_overlap_round_s(r)
            ax1.scatter(formula, sim, s=6, alpha=0.5, color=colour, label=name)
            top = max(top, float(formula.max()))
            fs = np.sort(formula)
            ax2.plot(fs, np.arange(1, fs.size + 1) / fs.size, color=colour, lw=1.2, ls="--",
                     label=f"{name}: max computation + sum of airtimes")
    ax1.plot([0, top], [0, top], color="grey", lw=1, ls=":", label="y = x (no overlap)")
    ax1.set_xlabel("downlink + max computation + sum of airtimes (s)")
    ax1.set_ylabel("simulated round time (s)")
    ax1.set_title("(a) TDMA: event model vs formula, per round")
    ax2.set_xlabel("round time (s)")
    ax2.set_ylabel("fraction of rounds")
    ax2.set_title("(b) distribution of round times")
    if len(names) >= 2:
        a, b = (runs[n].rounds for n in names[:2])
        m = min(len(a), len(b))
        ta = (a["t_end"] - a["t_start"]).to_numpy(float)[:m]
        tb = (b["t_end"] - b["t_start"]).to_numpy(float)[:m]
        ax3.scatter(ta, tb, s=6, alpha=0.5, color="C2")
        hi = float(max(ta.max(), tb.max()))
        ax3.plot([0, hi], [0, hi], color="grey", lw=1, ls=":")
        ax3.set_xlabel(f"{names[0]} round time (s)")
        ax3.set_ylabel(f"{names[1]} round time (s)")
        ax3.set_title(f"(c) same rounds: {names[1]} below the line is faster")
    else:
        ax3.axis("off")
    for ax in (ax1, ax2):
        ax.legend(fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    make_folder(path.parent, theirs=True)
    write_figure(fig, path, dpi=120)
    plt.close(fig)
    return path


def _updates(run: RunResult, columns: list[str]):
    """The run's updates.csv (only ``columns``); an empty frame for runs written before it."""
    import pandas as pd

    if run.run_dir is not None and (run.run_dir / "updates.csv").exists():
        try:  # columns only some runs have (a timed downlink's) are read where they are
            return pd.read_csv(run.run_dir / "updates.csv", usecols=lambda c: c in columns)
        except (ValueError, pd.errors.EmptyDataError):
            return pd.DataFrame(columns=columns)
    updates = run.updates
    return updates[columns] if not updates.empty else pd.DataFrame(columns=columns)


def plot_staleness(runs: dict[str, RunResult], out_dir: str | Path, title: str | None = None) -> Path | None:
    """staleness.png: the share of applied updates at each staleness (versions between the model an
    update started from and the one it was applied to), one set of bars per run. None: no updates."""
    tables = {name: _updates(run, ["outcome", "staleness"]) for name, run in runs.items()}
    tables = {name: t[t["outcome"] == "applied"] for name, t in tables.items() if not t.empty}
    if not tables:
        return None
    top = int(max(t["staleness"].max() for t in tables.values() if len(t)) if any(len(t) for t in tables.values())
              else 0)
    shown = min(top, 40)
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    width = 0.8 / len(tables)
    for k, (name, t) in enumerate(tables.items()):
        s = t["staleness"].to_numpy(int)
        share = np.bincount(np.minimum(s, shown), minlength=shown + 1) / max(s.size, 1)
        label = f"{name} (mean {s.mean():.2f})" if s.size else name
        ax.bar(np.arange(shown + 1) + (k - (len(tables) - 1) / 2) * width, share, width=width, label=label,
               color=f"C{k}")
    ax.set_xlabel("staleness of an applied update (versions)" + (f"; {shown} = {shown} or more" if top > shown else ""))
    ax.set_ylabel("share of applied updates")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return _save(fig, out_dir, "staleness.png")


GANTT_COLUMNS = ["device", "dispatch_s", "compute_end_s", "tx_start_s", "tx_end_s", "outcome", "lost_s", "downlink_s"]
NOT_APPLIED = tuple(o for o in OUTCOMES if o not in ("applied", "in_flight"))
"""The outcomes of an upload that never reached the model (drawn red): lost to errors, silent over the
air, offline, dropped late or stale. In flight at the run's end is still an upload."""


def gantt_window(updates, uploads: int = 40) -> tuple[float, float]:
    """The default window of the Gantt chart: from 0 until about ``uploads`` uploads have ended."""
    ends = updates["tx_end_s"].to_numpy(float)
    ends = np.sort(ends[np.isfinite(ends)])  # an upload that never ends (an inf airtime) ends no window
    return 0.0, float(ends[min(uploads, ends.size) - 1]) if ends.size else 1.0


def plot_gantt(runs: dict[str, RunResult], out_dir: str | Path, window: tuple[float, float] | None = None,
               title: str | None = None) -> Path | None:
    """gantt.png: the event model as a picture, one panel per run. Each device is a row: its
    download and computation (blue; a timed downlink's part light blue, red where the model never
    arrived), its wait for the uplink (thin grey), its upload (orange; red when it never reached the
    model: NOT_APPLIED), and the aggregations as vertical lines, over ``window`` (seconds; default:
    until 40 uploads of the first run have ended). None: no run has updates."""
    tables = {name: _updates(run, GANTT_COLUMNS) for name, run in runs.items()}
    tables = {name: t for name, t in tables.items() if not t.empty}
    if not tables:
        return None
    lo, hi = window if window is not None else gantt_window(next(iter(tables.values())))
    fig, axes = plt.subplots(len(tables), 1, figsize=(11, 2.2 + 2.6 * len(tables)), sharex=True, squeeze=False)
    for ax, (name, t) in zip(axes[:, 0], tables.items()):
        _gantt_panel(ax, t, runs[name], name, lo, hi)
    legend = {}  # every panel's kinds of bar once (a panel may lack some: a timed downlink, lost uploads)
    for ax in axes[:, 0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    # above the first panel, right of its title: not over the bars
    axes[0, 0].legend(legend.values(), legend.keys(), fontsize=7, loc="lower right", bbox_to_anchor=(1.0, 1.0),
                      ncol=len(legend), frameon=False, handlelength=1.5, columnspacing=1.0)
    axes[-1, 0].set_xlabel("simulated time (s)")
    if title:
        fig.suptitle(title)
    return _save(fig, out_dir, "gantt.png")


def _gantt_panel(ax, t, run: RunResult, name: str, lo: float, hi: float) -> None:
    """One run's panel of the Gantt chart (``t``: its updates.csv) over [lo, hi]."""
    end = t["tx_end_s"].fillna(t["lost_s"]).fillna(hi)
    t = t[(t["dispatch_s"] <= hi) & (end >= lo)]
    devices = np.sort(t["device"].unique())
    row = {d: i for i, d in enumerate(devices)}
    y = t["device"].map(row).to_numpy()
    lost = t["outcome"].isin(NOT_APPLIED).to_numpy()
    comp_end = np.fmin(t["compute_end_s"].to_numpy(float), t["lost_s"].fillna(np.inf).to_numpy(float))
    start = t["dispatch_s"].to_numpy(float)
    if "downlink_s" in t:  # a timed downlink: the model's way down, then the computation
        got = t["dispatch_s"].to_numpy(float) + t["downlink_s"].to_numpy(float)
        missed = (t["outcome"] == "downlink").to_numpy()
        ax.hlines(y[~missed], start[~missed], got[~missed], color="C9", lw=6, label="downlink")
        if missed.any():
            ax.hlines(y[missed], start[missed], got[missed], color="C3", lw=3, label="model missed")
        start = np.where(missed, comp_end, got)
    ax.hlines(y, start, comp_end, color="C0", lw=6,
              label="computation" if "downlink_s" in t else "downlink + computation")
    waiting = t["tx_start_s"].notna().to_numpy()
    ax.hlines(y[waiting], t["compute_end_s"][waiting], t["tx_start_s"][waiting], color="0.6", lw=1.2,
              label="waiting for the uplink")
    on_air_end = t["tx_end_s"].fillna(t["lost_s"]).to_numpy(float)
    for bad, colour, label in ((False, "C1", "upload"), (True, "C3", "upload lost or dropped")):
        sel = waiting & (lost == bad)
        if sel.any():
            ax.hlines(y[sel], t["tx_start_s"][sel], on_air_end[sel], color=colour, lw=6, label=label)
    rounds = run.rounds
    if "t_end" in rounds:
        for x in rounds["t_end"][(rounds["t_end"] >= lo) & (rounds["t_end"] <= hi)]:
            ax.axvline(x, color="k", lw=0.6, alpha=0.4)
    step = max(1, -(-len(devices) // 25))  # at most about 25 labels
    ax.set_yticks(range(0, len(devices), step))
    ax.set_yticklabels(devices[::step], fontsize=7)
    ax.set_ylabel("device")
    protocol = run.summary.get("protocol", "sync")
    ax.set_title(f"{name} ({protocol}, {run.summary.get('access', 'tdma')}); vertical lines: aggregations",
                 fontsize=9, loc="left")
    ax.set_xlim(lo, hi)
    ax.grid(alpha=0.2, axis="x")
