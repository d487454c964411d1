"""Reproduction of Perazzone et al., "Communication-Efficient Device Scheduling for Federated Learning
Using Lyapunov Optimization": Figs. 2-8 and Tables I-II (docs/papers/lyapunov.md, "The experiments").

A recipe names the runs it needs as *cells* (one setting: channel profile, data heterogeneity alpha,
policy, m, lambda; or, for the timing-only figures, V and lambda), run as variants of the packaged
``paper/training`` or ``paper/timing`` scenario through the shared cache of wirelessfl.papers.recipes,
so a cell shared by several recipes (Fig. 3, Fig. 5 and Table I use the same runs) is trained once.
What a recipe keeps from its runs (its data CSV) is the evaluation curves plus the per-run numbers
that need every round (mean airtime per round over the first 30 rounds and up to the target; for
Fig. 7 the power curves at log-spaced rounds and the settling rounds; for Fig. 8 selection shares and
distinct-device frequencies), and its report is drawn from that data alone.

Every training cell is run with no computation time. A constant computation time c per round only
shifts round r by r x c (see analysis.py), so one run per cell gives its curve for every c: Fig. 3b/d
(c = 2 s), Fig. 4 (c = 1 s), Fig. 2 and the tables (a grid of c) are all derived from the c = 0 runs.

Analysis as in the paper: each run is interpolated onto a uniform grid of simulated time (or
rounds), the seeds are averaged (band: min to max over seeds), an optional rolling mean smooths the
display, and the time to target is read from the averaged curve; speed-up = uniform / lyapunov.

Scales: "paper" is the paper's setup (CIFAR-10, its CNN, scenarios/paper/training.toml as written);
"cpu" keeps the channel, link and scheduler parameters (so airtimes per round are the paper's) and
trains an MLP on Fashion-MNIST with targets and round budgets calibrated for it; "tiny" is a few
devices and rounds, for tests only. The timing-only recipes (Figs. 7 and 8) run at the paper's full
scale at every scale except tiny.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from ...experiments.analysis import best_setting_table, markdown_table, mean_times_to_target
from ...files import write_atomic
from ...sim.records.device_arrays import load_decisions
from ..recipes import Recipe, Report, Runs, pyplot, save_figure
from .common import (HORIZON_LEGEND, INF, PAPER_TARGETS, SCALES, SPEEDUP_LEGEND, Cell, Context, Scale, TimingCell, _band,
                     _caption, _convergence_figure, _fig7_cells, _fig8_cells, _horizon_rows, _rounds, _speedup_rows,
                     _target_line, _timing_overrides, alpha_label, lyapunov, seed_average, settle_round,
                     time_average_power, timing_base, training_base, training_data, uniform)


# (from_s, to_s, m, lambda) rows of Tables I and II; lambda None for uniform
PAPER_TABLES = {
    ("het", INF, "lyapunov"): [(0, 0.83, 1, 100), (0.83, 2.3, 10, 100), (2.3, 7.5, 5, 10),
                               (7.5, 16.3, 10, 10), (16.3, INF, 10, 1)],
    ("het", 1.0, "lyapunov"): [(0, 0.61, 1, 100), (0.61, 3.1, 10, 100), (3.1, 15.6, 5, 1), (15.6, INF, 10, 1)],
    ("het", 0.0, "lyapunov"): [(0, 0.26, 1, 100), (0.26, 1.8, 10, 100), (1.8, INF, 10, 10)],
    ("het", INF, "uniform"): [(0, 2, 1, None), (2, INF, 5, None)],
    ("het", 1.0, "uniform"): [(0, 0.84, 1, None), (0.84, 46, 5, None), (46, INF, 10, None)],
    ("het", 0.0, "uniform"): [(0, 0.74, 1, None), (0.74, 6.1, 5, None), (6.1, INF, 10, None)],
    ("hom", INF, "lyapunov"): [(0, 2.48, 1, 100), (2.48, 13.1, 5, 100), (13.1, INF, 10, 1)],
    ("hom", 1.0, "lyapunov"): [(0, 0.69, 1, 100), (0.69, 10.1, 10, 100), (10.1, INF, 10, 1)],
    ("hom", INF, "uniform"): [(0, 2.5, 1, None), (2.5, INF, 5, None)],
    # the paper prints 1.3 and 1.8 as the ends of the first two ranges (a gap in its table)
    ("hom", 1.0, "uniform"): [(0, 1.3, 1, None), (1.8, 18, 5, None), (18, INF, 10, None)],
}


def time_to_target_grid(evals_by_setting: dict[str, Sequence[pd.DataFrame]], target: float,
                        compute_grid: Iterable[float], smooth: int = 1) -> pd.DataFrame:
    """Time to target of each setting's seed-averaged curve at every computation time.

    Columns compute_s, setting, time_to_target_s (NaN where the averaged curve never reaches the
    target within the runs' budgets): the input of analysis.best_setting_table.
    """
    rows = []
    compute_grid = [float(c) for c in compute_grid]
    for setting, evals in evals_by_setting.items():
        times = mean_times_to_target(evals, target, compute_grid, smooth=smooth) if evals else \
            [math.nan] * len(compute_grid)
        rows.extend({"compute_s": c, "setting": setting, "time_to_target_s": t} for c, t in zip(compute_grid, times))
    return pd.DataFrame(rows)


def _fmt_range(lo: float, hi: float) -> str:
    return f"{lo:.3g}–∞" if math.isinf(hi) else f"{lo:.3g}–{hi:.3g}"


def _setting_of(label: str) -> tuple[str, str]:
    """ "m=10 lam=100" -> ("10", "100"); "m=5" -> ("5", "")."""
    parts = dict(p.split("=") for p in label.split())
    return parts.get("m", label), parts.get("lam", "")


def ranges_table(times: pd.DataFrame, case: str, policy: str, paper_rows: list | None) -> pd.DataFrame:
    """Our best-setting ranges beside the paper's, one row per range, in the paper's layout."""
    ours = best_setting_table(times)
    paper_rows = paper_rows or []
    rows = []
    for i in range(max(len(ours), len(paper_rows))):
        row = {"case": case if i == 0 else "", "policy": policy if i == 0 else ""}
        if i < len(ours):
            o = ours.iloc[i]
            m, lam = _setting_of(o["setting"]) if o["setting"].startswith("m=") else (o["setting"], "")
            row.update({"ours: comp time (s)": _fmt_range(o["from_s"], o["to_s"]), "ours: m": m, "ours: λ": lam,
                        "ours: time to target at range start (s)": f"{o['time_to_target_s']:.4g}"})
        else:
            row.update({"ours: comp time (s)": "", "ours: m": "", "ours: λ": "",
                        "ours: time to target at range start (s)": ""})
        if i < len(paper_rows):
            lo, hi, m, lam = paper_rows[i]
            row.update({"paper: comp time (s)": _fmt_range(lo, hi), "paper: m": str(m),
                        "paper: λ": "" if lam is None else f"{lam:g}"})
        else:
            row.update({"paper: comp time (s)": "", "paper: m": "", "paper: λ": ""})
        rows.append(row)
    frame = pd.DataFrame(rows)
    if policy == "uniform":
        frame = frame.drop(columns=["ours: λ", "paper: λ"])
    return frame


_M_COLOURS = {1: "tab:blue", 5: "tab:orange", 10: "tab:green"}


_ALPHA_COLOURS = {INF: "tab:blue", 1.0: "tab:orange", 0.0: "tab:red"}


def _fig3_cells(scale: Scale) -> list[Cell]:
    return [lyapunov("het", INF, m) for m in (1, 5, 10)] + [uniform("het", INF, m) for m in (1, 5, 10)]


def _table_cells(channel: str, alphas: Sequence[float]) -> Callable[[Scale], list[Cell]]:
    def cells(scale: Scale) -> list[Cell]:
        out = []
        for a in alphas:
            out += [lyapunov(channel, a, m, lam) for m in (1, 5, 10) for lam in (1.0, 10.0, 100.0)]
            out += [uniform(channel, a, m) for m in (1, 5, 10)]
        return out
    return cells


def analyse_fig2(ctx: Context) -> Report:
    """Fig. 2: time to target vs computation time for m in {1, 5, 10} (lyapunov, lambda 100)."""
    cells = [lyapunov("het", INF, m) for m in (1, 5, 10)]
    target = ctx.scale.target(cells[0])
    grid = ctx.scale.compute_grid[ctx.scale.compute_grid <= ctx.scale.fig2_compute_max]
    times = time_to_target_grid({f"m={c.m}": ctx.evals(c.name) for c in cells}, target, grid,
                                smooth=ctx.scale.smooth)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for c in cells:
        sub = times[times["setting"] == f"m={c.m}"]
        ax.plot(sub["compute_s"], sub["time_to_target_s"], color=_M_COLOURS[c.m], label=f"m = {c.m}")
    ranges = best_setting_table(times)
    for k, lo in enumerate(ranges["from_s"].iloc[1:]):
        ax.axvline(lo, color="grey", ls=":", lw=1, label="the best m changes" if k == 0 else None)
    ax.set_xlabel("computation time per round (s)")
    ax.set_ylabel(f"time to accuracy {target:g} (s)")
    ax.set_title(f"Fig. 2: best m vs computation time (lyapunov, λ = 100; {_caption(ctx)})", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend()
    path = save_figure(fig, ctx.figures / "fig2.png")
    md = ["Best m per computation-time range (lyapunov, λ = 100, heterogeneous channels, α = ∞):", "",
          markdown_table(ranges.assign(setting=ranges["setting"]))]
    numbers = {"ranges": ranges.to_dict("records")}
    return Report("fig2", [path], numbers, "\n".join(md))


def analyse_fig3(ctx: Context) -> Report:
    """Fig. 3: accuracy and training loss vs time, lyapunov (λ 100) vs uniform, m in {1,5,10}, c = 0 and 2 s."""
    cells = _fig3_cells(ctx.scale)
    path = ctx.figures / "fig3.png"
    _convergence_figure(ctx, cells, path, "time", (0.0, 2.0),
                        "Fig. 3: heterogeneous channels, α = ∞ (solid: lyapunov λ = 100, dashed: uniform)",
                        lambda c: _M_COLOURS[c.m], lambda c: f"{c.policy} m={c.m}")
    pairs = [(lyapunov("het", INF, m), uniform("het", INF, m)) for m in (1, 5, 10)]
    table = pd.concat([_speedup_rows(ctx, pairs, c) for c in (0.0, 2.0)], ignore_index=True)
    numbers = {"speedups": table.to_dict("records")}
    for c in (0.0, 2.0):
        sub = table[table["compute_s"] == c]
        best = sub.loc[sub["lyapunov_s"].idxmin()] if sub["lyapunov_s"].notna().any() else None
        if best is not None:
            numbers[f"best_m_c{c:g}"] = int(best["m"])
    horizon = _horizon_rows(ctx, pairs)
    numbers["airtime_by_horizon"] = horizon.to_dict("records")
    md = ["Time to target (s) and speed-up (uniform / lyapunov), heterogeneous channels, α = ∞:", "",
          markdown_table(table), "", SPEEDUP_LEGEND, "", markdown_table(horizon), "", HORIZON_LEGEND, "",
          "Paper: m = 10, c = 0: 8.5x (5,339 s vs 45,748 s); m = 1, c = 0: 1.3x; "
          "c = 2 s: best m = 5 with 1.31x."]
    return Report("fig3", [path], numbers, "\n".join(md))


def analyse_fig4(ctx: Context) -> Report:
    """Fig. 4: m = 10, λ = 100, 1 s computation, α in {0, 1, ∞}: lyapunov vs uniform."""
    cells = []
    for a in (INF, 1.0, 0.0):
        cells += [lyapunov("het", a, 10), uniform("het", a, 10)]
    path = ctx.figures / "fig4.png"
    _convergence_figure(ctx, cells, path, "time", (1.0,),
                        "Fig. 4: m = 10, 1 s computation (solid: lyapunov λ = 100, dashed: uniform)",
                        lambda c: _ALPHA_COLOURS[c.alpha], lambda c: f"{c.policy} α={alpha_label(c.alpha)}")
    pairs = [(lyapunov("het", a, 10), uniform("het", a, 10)) for a in (INF, 1.0, 0.0)]
    table = _speedup_rows(ctx, pairs, 1.0)
    md = ["Time to target (s) and speed-up at 1 s computation, m = 10 (target per α):", "", markdown_table(table),
          "", SPEEDUP_LEGEND, "",
          "Paper: lyapunov beats uniform at every α, by less for more heterogeneous data (no numbers given)."]
    return Report("fig4", [path], {"speedups": table.to_dict("records")}, "\n".join(md))


def analyse_fig5(ctx: Context) -> Report:
    """Fig. 5: the runs of Fig. 3 against rounds."""
    cells = _fig3_cells(ctx.scale)
    path = ctx.figures / "fig5.png"
    _convergence_figure(ctx, cells, path, "round", (0.0,),
                        "Fig. 5: against rounds (solid: lyapunov λ = 100, dashed: uniform)",
                        lambda c: _M_COLOURS[c.m], lambda c: f"{c.policy} m={c.m}")
    rows = [{"policy": c.policy, "m": c.m, "rounds_to_target": _rounds(ctx, c)} for c in cells]
    table = pd.DataFrame(rows)
    md = ["Rounds to target of the seed-averaged curve:", "", markdown_table(table), "",
          "Paper: m = 1 needs the most rounds."]
    return Report("fig5", [path], {"rounds": rows}, "\n".join(md))


def _fig6_pairs() -> list[tuple[Cell, Cell]]:
    """(lyapunov, uniform) at m in {1, 10}, α in {∞, 1}: homogeneous channels, then the same settings with
    heterogeneous channels, which the paper compares them with (the figure shows the homogeneous ones)."""
    return [(lyapunov(ch, a, m), uniform(ch, a, m)) for ch in ("hom", "het") for a in (INF, 1.0) for m in (1, 10)]


def analyse_fig6(ctx: Context) -> Report:
    """Fig. 6: homogeneous channels, α in {∞, 1}, lyapunov vs uniform (m = 1 and m = 10), c = 0."""
    cells = []
    for a in (INF, 1.0):
        cells += [lyapunov("hom", a, m) for m in (1, 10)] + [uniform("hom", a, m) for m in (1, 10)]
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(10.4, 7.2))
    for j, a in enumerate((INF, 1.0)):
        for i, metric in enumerate(("accuracy", "train_loss")):
            ax = axes[i][j]
            for cell in (c for c in cells if c.alpha == a):
                evals = ctx.evals(cell.name)
                if evals:
                    avg = seed_average(evals, metric, smooth=ctx.scale.smooth)
                    _band(ax, avg, "time_s", f"{cell.policy} m={cell.m}", _M_COLOURS[cell.m],
                          "-" if cell.policy == "lyapunov" else "--")
            if metric == "accuracy":
                _target_line(ax, ctx.scale.targets[("hom", a)])
                ax.set_ylim(bottom=max(0.0, ctx.scale.targets[("hom", a)] - 0.25))
            else:
                ax.set_yscale("log")
            ax.set_title(f"homogeneous channels, α = {alpha_label(a)}")
            ax.set_xlabel("simulated wall-clock time (s)")
            ax.set_ylabel("test accuracy" if metric == "accuracy" else "training loss")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"Fig. 6 (solid: lyapunov λ = 100, dashed: uniform); {_caption(ctx)}, band: min–max over seeds",
                 fontsize=10)
    path = save_figure(fig, ctx.figures / "fig6.png", dpi=110)
    table = _speedup_rows(ctx, _fig6_pairs(), 0.0)
    horizon = _horizon_rows(ctx, _fig6_pairs())
    md = ["Homogeneous channels, no computation time, and the same settings with heterogeneous channels:", "",
          markdown_table(table), "", SPEEDUP_LEGEND, "", markdown_table(horizon), "", HORIZON_LEGEND, "",
          "Paper: α = ∞, m = 1: 1.24x; m = 10: 6.7x (heterogeneous: 1.3x and 8.5x)."]
    return Report("fig6", [path], {"speedups": table.to_dict("records"),
                                   "airtime_by_horizon": horizon.to_dict("records")}, "\n".join(md))


def _table_recipe(name: str, channel: str, alphas: Sequence[float]) -> Callable[[Context], Report]:
    def analyse(ctx: Context) -> Report:
        frames, csv_rows = [], []
        cells = _table_cells(channel, alphas)(ctx.scale)
        for a in alphas:
            case_cells = [c for c in cells if c.alpha == a]
            target = ctx.scale.targets[(channel, a)]
            case = f"α={alpha_label(a)}, target {target:g} (paper {PAPER_TARGETS[(channel, a)]:g})"
            for policy in ("lyapunov", "uniform"):
                pol = [c for c in case_cells if c.policy == policy]
                times = time_to_target_grid({c.setting: ctx.evals(c.name) for c in pol}, target,
                                            ctx.scale.compute_grid, smooth=ctx.scale.smooth)
                frames.append(ranges_table(times, case, policy, PAPER_TABLES.get((channel, a, policy))))
                best = best_setting_table(times)
                for row in best.to_dict("records"):
                    csv_rows.append({"channel": channel, "alpha": alpha_label(a), "target": target,
                                     "policy": policy, **row})
        csv_path = ctx.figures / f"{name}.csv"
        write_atomic(csv_path, pd.DataFrame(csv_rows).to_csv(index=False))
        title = "Heterogeneous" if channel == "het" else "Homogeneous"
        md = [f"# {'Table I' if name == 'table1' else 'Table II'}: best settings per computation-time range, "
              f"{title.lower()} channels", "",
              f"Computation-time grid: {len(ctx.scale.compute_grid)} points from 0 to "
              f"{ctx.scale.compute_grid[-1]:g} s; range boundaries are midpoints between grid points. "
              f"Scale: {ctx.scale.name}, {ctx.seeds} seed(s). 'Time to target' is that of the best "
              "setting at the start of the range.", ""]
        for frame in frames:
            md += [markdown_table(frame), ""]
        md_path = ctx.figures / f"{name}.md"
        write_atomic(md_path, "\n".join(md))
        return Report(name, [md_path, csv_path], {"ranges": csv_rows}, "\n".join(md))
    return analyse


def _collect_fig7(runs: Runs, scale_name: str) -> pd.DataFrame:
    """Per V: the seed-averaged time-average power over the devices (mean, min, max) at about 200
    log-spaced rounds (the figure's axis), and the rounds after which the mean and every device stay
    within 5 % of P̄ (those need every round)."""
    rows = []
    for cell in _fig7_cells(SCALES[scale_name]):
        curves = [time_average_power(load_decisions(d)) for d in runs.folders(cell.name)]
        if not curves:
            continue
        per_device = np.mean(curves, axis=0)       # seeds averaged: rounds x devices
        mean, low, high = per_device.mean(axis=1), per_device.min(axis=1), per_device.max(axis=1)
        last = len(mean)
        points = np.unique(np.r_[np.geomspace(1, last, 200).round().astype(int), min(100, last), min(1000, last)])
        settle_mean, settle_all = settle_round(mean), settle_round(high)
        for t in points:
            rows.append({"variant": cell.name, "V": cell.V, "seeds": len(curves), "round": int(t),
                         "mean": mean[t - 1], "min": low[t - 1], "max": high[t - 1], "rounds": last,
                         "settle_mean_round": settle_mean, "settle_every_device_round": settle_all})
    return pd.DataFrame(rows)


def analyse_fig7(ctx: Context) -> Report:
    """Fig. 7: time-average power per round for V in {1, 100, 1e5} (m = 10, λ = 100)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    rows = []
    colours = {1.0: "tab:red", 100.0: "tab:blue", 1e5: "tab:green"}
    for cell in _fig7_cells(ctx.scale):
        curve = ctx.data[ctx.data["variant"] == cell.name] if len(ctx.data) else ctx.data
        if curve.empty:
            continue
        # V = 1 and V = 100 coincide until the queues bind (about round 100): wide underneath, dashed on top
        style = {1.0: {"lw": 3.4, "alpha": 0.5, "zorder": 2}, 100.0: {"lw": 1.4, "ls": "--", "zorder": 3}}
        ax.plot(curve["round"], curve["mean"], color=colours[cell.V], label=f"V = {cell.V:g} (device mean)",
                **style.get(cell.V, {"lw": 1.5, "zorder": 3}))
        ax.fill_between(curve["round"], curve["min"], curve["max"], color=colours[cell.V], alpha=0.12, lw=0,
                        label="band: range over devices" if not rows else None)
        at = curve.set_index("round")
        last = int(curve["rounds"].iloc[0])
        rows.append({"V": cell.V, "rounds": last, "mean_power_at_100": float(at.loc[min(100, last), "mean"]),
                     "mean_power_at_1000": float(at.loc[min(1000, last), "mean"]),
                     "mean_power_final": float(at.loc[last, "mean"]), "max_device_power_final": float(at.loc[last, "max"]),
                     "rounds_until_mean_within_5pct": float(curve["settle_mean_round"].iloc[0]),
                     "rounds_until_every_device_within_5pct": float(curve["settle_every_device_round"].iloc[0])})
    ax.axhline(1.0, color="black", ls=":", lw=1, label="P̄ = 1")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("round T")
    ax.set_ylabel("(1/T) Σ P q (time-average power)")
    ax.set_title(f"Fig. 7: convergence of the power constraint (m = 10, λ = 100; {_caption(ctx)})", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    path = save_figure(fig, ctx.figures / "fig7.png")
    table = pd.DataFrame(rows)
    md = ["Time-average power (band: range over devices; seeds averaged):", "", markdown_table(table), "",
          "Paper: larger V reaches P̄ = 1 more slowly; V = 1e5 not within a realistic number of rounds; "
          "V = 1 oscillates."]
    return Report("fig7", [path], {"power": rows}, "\n".join(md))


def _fig8_label(cell: TimingCell) -> str:
    return "uniform" if cell.policy == "uniform" else f"λ = {cell.lam:g}"


def _collect_fig8(runs: Runs, scale_name: str) -> pd.DataFrame:
    """Per policy: each device's σ and share of the selections (seeds averaged), and the fraction of
    rounds with k distinct devices, k = 1..m (all seeds' rounds pooled)."""
    rows = []
    for cell in _fig8_cells(SCALES[scale_name]):
        dirs = runs.folders(cell.name)
        if not dirs:
            continue
        devs = [pd.read_csv(d / "devices.csv") for d in dirs]
        share = np.mean([d["selections"].to_numpy() / d["selections"].sum() for d in devs], axis=0)
        common = {"variant": cell.name, "policy": _fig8_label(cell), "seeds": len(dirs)}
        rows += [{**common, "kind": "device", "sigma": sg, "share": sh} for sg, sh in zip(devs[0]["sigma"], share)]
        counts = np.concatenate([pd.read_csv(d / "rounds.csv", usecols=["num_selected"])["num_selected"].to_numpy()
                                 for d in dirs])
        freq = np.bincount(counts, minlength=cell.m + 1)[1:cell.m + 1] / len(counts)
        rows += [{**common, "kind": "distinct", "count": k, "fraction": f} for k, f in enumerate(freq, start=1)]
    return pd.DataFrame(rows)


def analyse_fig8(ctx: Context) -> Report:
    """Fig. 8: (a) selection frequency per device vs σ, (b) distinct devices per round, m = 10."""
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    cells = _fig8_cells(ctx.scale)
    rows = []
    width = 0.8 / len(cells)
    colours = ["tab:red", "tab:orange", "tab:blue", "tab:grey"]
    for k, cell in enumerate(cells):
        of = ctx.data[ctx.data["variant"] == cell.name] if len(ctx.data) else ctx.data
        if of.empty:
            continue
        label = _fig8_label(cell)
        devices = of[of["kind"] == "device"].sort_values("sigma", kind="stable")
        ax1.plot(devices["sigma"], devices["share"], color=colours[k], lw=1.3, label=label)
        dist = of[of["kind"] == "distinct"]
        counts, freq = dist["count"].to_numpy(int), dist["fraction"].to_numpy(float)
        ax2.bar(counts + (k - (len(cells) - 1) / 2) * width, freq, width=width, color=colours[k], label=label)
        top = devices["share"].to_numpy()[-len(devices) // 10:]
        rows.append({"policy": label, "mean_distinct": float((counts * freq).sum()),
                     "share_3_to_5": float(freq[(counts >= 3) & (counts <= 5)].sum()),
                     "mode": int(counts[np.argmax(freq)]),
                     "selection_share_top10pct_sigma": float(top.sum())})
    ax1.set_xlabel("σ_n of the device (ascending)")
    ax1.set_ylabel("share of selections")
    ax1.set_yscale("log")
    ax1.set_title("(a) selection frequency per device")
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=8)
    ax2.set_xlabel("distinct devices in a round (m = 10 draws)")
    ax2.set_ylabel("fraction of rounds")
    ax2.set_title("(b) devices per round")
    ax2.grid(alpha=0.3, axis="y")
    ax2.legend(fontsize=8)
    fig.suptitle(f"Fig. 8: heterogeneous channels, m = 10, V = 100; {_caption(ctx)}")
    path = save_figure(fig, ctx.figures / "fig8.png")
    table = pd.DataFrame(rows)
    md = ["Selection statistics:", "", markdown_table(table), "",
          "Paper: λ = 100 strongly favours large σ and mostly schedules 3-5 devices; λ = 1 looks like uniform."]
    return Report("fig8", [path], {"selection": rows}, "\n".join(md))


def _families(kind: str, cells_of: Callable[[Scale], list]) -> Callable:
    """The recipe's runs: its cells as variants of the training or the timing base (one family per kind
    and scale, so the cells of every recipe asked for run in one sweep)."""
    def families(scale_name: str, overrides: Sequence[str]):
        scale = SCALES[scale_name]
        if kind == "training":
            return {f"lyapunov/training/{scale_name}": (training_base(scale, overrides),
                                                        {c.name: scale.overrides(c) for c in cells_of(scale)})}
        return {f"lyapunov/timing/{scale_name}": (timing_base(scale, overrides),
                                                  {c.name: _timing_overrides(c) for c in cells_of(scale)})}
    return families


def _report_with(analyse: Callable[[Context], Report]) -> Callable[[pd.DataFrame, Path, str], Report]:
    return lambda data, figures, scale_name: analyse(Context(SCALES[scale_name], data, figures))


def _recipe(name: str, title: str, kind: str, cells_of: Callable[[Scale], list], analyse, makes: tuple,
            cost: dict) -> Recipe:
    def collect_training(runs: Runs, scale_name: str) -> pd.DataFrame:
        return training_data(runs, SCALES[scale_name], cells_of(SCALES[scale_name]))

    collect = collect_training if kind == "training" else {"fig7": _collect_fig7, "fig8": _collect_fig8}[name]
    return Recipe("lyapunov", name, title, makes, _families(kind, cells_of), collect, _report_with(analyse), cost)


# CPU minutes of all runs of 3 seeds, one torch thread each (benchmarks/recipe_costs.py; cpu: the sum of the
# runs' wall times in figures/README_lyapunov.md)
RECIPES: list[Recipe] = [
    _recipe("fig2", "time to target vs computation time, m in {1, 5, 10}", "training",
            lambda s: [lyapunov("het", INF, m) for m in (1, 5, 10)], analyse_fig2, ("fig2.png",),
            {"tiny": 0.09, "cpu": 2.5}),
    _recipe("fig3", "accuracy/loss vs time, lyapunov vs uniform, c = 0 and 2 s", "training", _fig3_cells,
            analyse_fig3, ("fig3.png",), {"tiny": 0.11, "cpu": 5.2}),
    _recipe("fig4", "α in {0, 1, ∞} at m = 10, 1 s computation", "training",
            lambda s: [c for a in (INF, 1.0, 0.0) for c in (lyapunov("het", a, 10), uniform("het", a, 10))],
            analyse_fig4, ("fig4.png",), {"tiny": 0.04, "cpu": 5.4}),
    _recipe("fig5", "accuracy/loss vs rounds (the runs of Fig. 3)", "training", _fig3_cells, analyse_fig5,
            ("fig5.png",), {"tiny": 0.04, "cpu": 5.2}),
    _recipe("fig6", "homogeneous channels, α in {∞, 1} (and the heterogeneous speed-ups beside)", "training",
            lambda s: [c for pair in _fig6_pairs() for c in pair], analyse_fig6, ("fig6.png",),
            {"tiny": 0.13, "cpu": 13.8}),
    _recipe("fig7", "time-average power per round for V in {1, 100, 1e5} (timing only)", "timing",
            _fig7_cells, analyse_fig7, ("fig7.png",), {"tiny": 0.01, "cpu": 0.3}),
    _recipe("fig8", "selection frequency vs σ and distinct devices per round (timing only)", "timing",
            _fig8_cells, analyse_fig8, ("fig8.png",), {"tiny": 0.01, "cpu": 0.3}),
    _recipe("table1", "best (m, λ) per computation-time range, heterogeneous channels, α in {∞, 1, 0}",
            "training", _table_cells("het", (INF, 1.0, 0.0)), _table_recipe("table1", "het", (INF, 1.0, 0.0)),
            ("table1.md", "table1.csv"), {"tiny": 0.3, "cpu": 32.3}),
    _recipe("table2", "best (m, λ) per computation-time range, homogeneous channels, α in {∞, 1}",
            "training", _table_cells("hom", (INF, 1.0)), _table_recipe("table2", "hom", (INF, 1.0)),
            ("table2.md", "table2.csv"), {"tiny": 0.21, "cpu": 20.6}),
]
