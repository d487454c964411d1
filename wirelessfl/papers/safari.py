"""Reproduction of SAFARI, server-assisted federated learning under incomplete participation
(docs/papers/safari.md): the MNIST-setting Tables 1-3 and the Fashion-MNIST Tables 6-7 on
Fashion-MNIST with logistic regression, and SAFARI against the Lyapunov scheduler's starvation of
weak devices.

Every run goes through the simulator. The tables run variants of the packaged
``studies/safari_tables`` scenario: M clients holding p classes each (balanced scheme), s of them
excluded forever (drawn once per seed), m sampled without replacement per client round, one local
epoch, plain averaging; SAFARI's rounds are server rounds with probability 1 - q (q = 0.8), one epoch
over an auxiliary set of n_T training samples. FedAvg and SAFARI of one seed share the partition and
the excluded set, so SAFARI's gain is paired. The wireless study runs the variants of
``studies/safari_lyapunov_starvation``.

A recipe's data is one row per run (final accuracy, mean of the last 5 evaluations, label coverage,
server rounds; for the wireless study time to 70 %, late accuracy and the weakest devices' share of
the selections) and, for the wireless study, the accuracy curves.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..config import load_scenario
from .recipes import (SPREAD, Recipe, Report, Runs, figure_caption, packaged, pyplot, run_summary, save_figure,
                      seed_std, with_spread)

# ---------------------------------------------------------------------------------------------
# Tables 1-3 (MNIST setting): M = 10, p in {10, 5, 2, 1}, s in {0, 2, 4}, m = 5

P_VALUES, S_VALUES, AUX_VALUES, AUX_MAX = (10, 5, 2, 1), (0, 2, 4), (50, 100, 500), 1000

# The paper's MNIST numbers (%): Table 1 (FedAvg, single run), Tables 2 and 3 (SAFARI - FedAvg,
# q = 0.8; "-" is |gain| < 2 points), keyed by (s, p) and (n_T, p); Table 8 (5-seed means).
PAPER_T1 = {(0, 10): 92.69, (0, 5): 89.49, (0, 2): 86.17, (0, 1): 84.49,
            (2, 10): 92.64, (2, 5): 89.11, (2, 2): 86.54, (2, 1): 71.58,
            (4, 10): 92.62, (4, 5): 88.81, (4, 2): 77.81, (4, 1): 57.05}
PAPER_T2 = {(0, 2): 3.13, (0, 1): 4.47, (2, 2): 2.01, (2, 1): 16.53, (4, 2): 10.69, (4, 1): 31.07}
PAPER_T3 = {(50, 2): 4.82, (50, 1): 16.65, (100, 2): 6.87, (100, 1): 20.26, (500, 2): 9.16,
            (500, 1): 29.82, (1000, 2): 10.69, (1000, 1): 31.07}
PAPER_T8_SAFARI = {(0, 10): 92.60, (0, 5): 91.08, (0, 2): 89.42, (0, 1): 89.10,
                   (2, 10): 92.62, (2, 5): 90.68, (2, 2): 88.75, (2, 1): 88.50,
                   (4, 10): 92.51, (4, 5): 90.41, (4, 2): 88.27, (4, 1): 88.06}

# tiny: a few rounds of a few local steps; cpu and paper: the packaged scenario as written
TABLE_SCALES = {"tiny": ("run.rounds=3", "run.eval_every_rounds=1", "learning.local_steps=2",
                         "learning.eval_train_samples=200"), "cpu": (), "paper": ()}


def _table_variant(algorithm: str, p: int, s: int, n_t: int) -> str:
    return f"{algorithm}-p{p}-s{s}-nT{n_t}"


def _table_settings(which: str) -> list[tuple[str, int, int, int]]:
    """(algorithm, p, s, n_T) of the runs a table needs (SAFARI's gains need FedAvg's runs)."""
    fedavg = [("fedavg", p, s, 0) for p in P_VALUES for s in S_VALUES]
    if which == "table1":
        return fedavg
    if which == "table2":
        return fedavg + [("safari", p, s, AUX_MAX) for p in P_VALUES for s in S_VALUES]
    return ([("fedavg", p, 4, 0) for p in P_VALUES]
            + [("safari", p, 4, n) for p in P_VALUES for n in (*AUX_VALUES, AUX_MAX)])


def _table_families(which: str):
    def families(scale: str, overrides: Sequence[str]) -> dict:
        base = packaged("studies/safari_tables", [*TABLE_SCALES[scale], *overrides])
        variants = {_table_variant(a, p, s, n): {"learning.algorithm": a, "learning.classes_per_device": p,
                                                  "devices.excluded_count": s, "learning.aux_samples": n}
                    for a, p, s, n in _table_settings(which)}
        return {f"safari/tables/{scale}": (base, variants)}
    return families


def _run_row(folder: Path) -> dict:
    """A run's accuracies (%) and participation numbers."""
    summary = run_summary(folder)
    acc = pd.read_csv(folder / "evals.csv")["accuracy"].to_numpy()
    return {"final": 100 * acc[-1], "last5": 100 * acc[-5:].mean(), "label_coverage": summary["label_coverage"],
            "server_rounds": summary["server_rounds"]}


def _collect_tables(which: str):
    def collect(runs: Runs, scale: str) -> pd.DataFrame:
        rows = []
        for a, p, s, n in _table_settings(which):
            for seed, folder in runs.seeds(_table_variant(a, p, s, n)):
                rows.append({"algorithm": a, "p": p, "s": s, "n_T": n, "seed": seed, **_run_row(folder)})
        return pd.DataFrame(rows, columns=["algorithm", "p", "s", "n_T", "seed", "final", "last5", "label_coverage",
                                           "server_rounds"])
    return collect


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over seeds per (algorithm, p, s, n_T), with SAFARI's gain over FedAvg of the same
    seed (same partition and excluded set): the mean and std of the per-seed gains."""
    g = runs.groupby(["algorithm", "p", "s", "n_T"])
    table = g[["final", "last5", "label_coverage"]].mean().add_suffix("_mean")
    table = table.join(g[["final", "last5"]].agg(seed_std).add_suffix("_std")).join(g.size().rename("seeds"))
    table = table.reset_index()
    fed = runs[runs.algorithm == "fedavg"].set_index(["p", "s", "seed"])[["final", "last5"]]
    gains = []
    for r in table.itertuples():
        mine = runs[(runs.algorithm == r.algorithm) & (runs.p == r.p) & (runs.s == r.s) & (runs.n_T == r.n_T)]
        d = np.array([(x.final - fed.loc[(x.p, x.s, x.seed), "final"], x.last5 - fed.loc[(x.p, x.s, x.seed), "last5"])
                      for x in mine.itertuples() if r.algorithm != "fedavg" and (x.p, x.s, x.seed) in fed.index])
        gains.append((*d.mean(axis=0), seed_std(d[:, 0]), seed_std(d[:, 1])) if len(d) else (math.nan,) * 4)
    columns = ["gain_final", "gain_last5", "gain_final_std", "gain_last5_std"]
    table[columns] = pd.DataFrame(gains, columns=columns, index=table.index) if gains else math.nan
    return table


def _cell(table: pd.DataFrame, alg: str, p: int, s: int, n_t: int, what: str) -> str:
    row = table[(table.algorithm == alg) & (table.p == p) & (table.s == s) & (table.n_T == n_t)]
    if row.empty:
        return "not run"
    r = row.iloc[0]
    if what == "acc":
        return f"{r.final_mean:.1f} / {with_spread(r.last5_mean, r.last5_std, '.1f')}"
    return f"{r.gain_final:+.1f} / {with_spread(r.gain_last5, r.gain_last5_std, '+.1f', '.1f')}"


def _paper_gain(value) -> str:
    return "–" if value == 0.0 else f"{value:.2f}"


def _grid(table: pd.DataFrame, rows, label: str, cell) -> list[str]:
    head = f"| {label} | " + " | ".join(f"p = {p}: ours | paper" for p in P_VALUES) + " |"
    out = [head, "|---|" + "---|---|" * len(P_VALUES)]
    for key in rows:
        out.append(f"| {key} | " + " | ".join(cell(key, p) for p in P_VALUES) + " |")
    return out


def _legend(table: pd.DataFrame) -> str:
    seeds = "/".join(str(int(c)) for c in sorted(set(table.seeds))) if len(table) else "0"
    return (f"Accuracies in %; ours = final accuracy / mean of the last 5 evaluations (every 10 rounds), mean over "
            f"{seeds} seed(s) per cell; ± is the {SPREAD} of the last-5 mean (of SAFARI's per-seed gain in the "
            "gain tables), shown where a cell has more than one seed. Paper = MNIST; M = 10 clients, m = 5 per round, "
            "logistic regression on Fashion-MNIST.")


def report_table1(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """Table 1: FedAvg's accuracy against p and s."""
    table = summarise(data)
    md = [_legend(table), "", "**Table 1: FedAvg accuracy**", "",
          *_grid(table, S_VALUES, "s", lambda s, p: f"{_cell(table, 'fedavg', p, s, 0, 'acc')} | {PAPER_T1[(s, p)]:.2f}")]
    path = _plot_accuracy(table, figures / "safari_table1.png", algorithms=("fedavg",),
                          caption=figure_caption(scale, data))
    return Report("table1", [path], {"cells": table.to_dict("records")}, "\n".join(md + ["", "![](safari_table1.png)"]))


def report_table2(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """Table 2: SAFARI's gain over FedAvg (n_T = 1000), and SAFARI's accuracy (the paper's Table 8)."""
    table = summarise(data)
    md = [_legend(table), "", f"**Table 2: SAFARI (q = 0.8, n_T = {AUX_MAX}) minus FedAvg, points** (paper: \"–\" = "
          "within 2 points)", "",
          *_grid(table, S_VALUES, "s", lambda s, p: f"{_cell(table, 'safari', p, s, AUX_MAX, 'gain')} | "
                 f"{_paper_gain(PAPER_T2.get((s, p), 0.0))}"),
          "", f"**SAFARI accuracy (n_T = {AUX_MAX})**, paper = MNIST Table 8 (5-seed means)", "",
          *_grid(table, S_VALUES, "s", lambda s, p: f"{_cell(table, 'safari', p, s, AUX_MAX, 'acc')} | "
                 f"{PAPER_T8_SAFARI[(s, p)]:.2f}")]
    path = _plot_accuracy(table, figures / "safari_table2.png", algorithms=("fedavg", "safari"),
                          caption=figure_caption(scale, data))
    return Report("table2", [path], {"cells": table.to_dict("records")}, "\n".join(md + ["", "![](safari_table2.png)"]))


def report_table3(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """Table 3: SAFARI's gain at s = 4 against the auxiliary set's size."""
    table = summarise(data)
    md = [_legend(table), "", "**Table 3: SAFARI minus FedAvg at s = 4 against n_T, points**", "",
          *_grid(table, (*AUX_VALUES, AUX_MAX), "n_T", lambda n, p: f"{_cell(table, 'safari', p, 4, n, 'gain')} | "
                 f"{_paper_gain(PAPER_T3.get((n, p), 0.0))}")]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for p, color in ((1, "C3"), (2, "C0")):
        t = table[(table.algorithm == "safari") & (table.p == p) & (table.s == 4)].sort_values("n_T")
        if len(t):
            # p = 1 and p = 2 a little apart so that their error bars do not overlap
            ax.errorbar(t.n_T * (1.04 if p == 1 else 0.96), t.gain_last5, yerr=t.gain_last5_std.fillna(0), color=color,
                        marker="s", capsize=3, label=f"p={p} (FMNIST, last 5)")
        ax.plot([50, 100, 500, 1000], [PAPER_T3[(n, p)] for n in (50, 100, 500, 1000)], color=color, ls="--",
                marker="o", mfc="none", alpha=0.6, label=f"p={p} (paper, MNIST)")
    ax.set(xscale="log", xlabel="auxiliary set size n_T", ylabel="SAFARI - FedAvg (points), mean ± std over seeds",
           title="gain against n_T at s = 4")
    ax.legend(fontsize=7)
    path = save_figure(fig, figures / "safari_table3.png", caption=figure_caption(scale, data))
    return Report("table3", [path], {"cells": table.to_dict("records")}, "\n".join(md + ["", "![](safari_table3.png)"]))


def _plot_accuracy(table: pd.DataFrame, path: Path, algorithms: Sequence[str], caption: str) -> Path:
    """Accuracy (mean of the last 5 evaluations) against s at p = 1 and 2, the paper's MNIST dashed."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.2))
    for p, color in ((1, "C3"), (2, "C0")):
        for alg, n_t, marker, paper in (("fedavg", 0, "o", PAPER_T1), ("safari", AUX_MAX, "s", PAPER_T8_SAFARI)):
            if alg not in algorithms:
                continue
            name = "FedAvg" if alg == "fedavg" else "SAFARI"
            t = table[(table.algorithm == alg) & (table.p == p) & (table.n_T == n_t)].sort_values("s")
            if len(t):
                ax.errorbar(t.s, t.last5_mean, yerr=t.last5_std if t.seeds.min() > 1 else None, color=color,
                            marker=marker, label=f"{name} p={p} (FMNIST)")
            ax.plot(S_VALUES, [paper[(s, p)] for s in S_VALUES], color=color, ls="--" if alg == "fedavg" else ":",
                    marker=marker, mfc="none", alpha=0.6, label=f"{name} p={p} (paper, MNIST)")
    ax.set(xlabel="excluded clients s (of M = 10)", ylabel="test accuracy % (mean of last 5 evals)",
           xticks=S_VALUES, ylim=(30, 95))
    ax.legend(fontsize=6.5, ncol=2, loc="lower left")
    return save_figure(fig, path, caption=caption)


# ---------------------------------------------------------------------------------------------
# Tables 6-7 (Fashion-MNIST): M = 30 clients with p = 2 classes, m = 10, FedAvg against s and SAFARI

M67 = 30
S67 = (0, 6, 12, 18, 24)                  # s/M = 0, 0.2, 0.4, 0.6, 0.8 (the paper: s of M = 150)
AUX67 = {0.01: 600, 0.10: 6000, 0.20: 12000}  # n_T as a share of the 60,000 training images
PAPER_FEDAVG = {0: "87.71 ± 0.09", 6: "86.17 ± 1.57", 12: "82.37 ± 5.8", 18: "80.71 ± 0.38", 24: "78.53 ± 3.05"}
PAPER_SAFARI_S18 = {0.01: "82.0 ± 0.03", 0.10: "85.58 ± 1.05", 0.20: "85.14 ± 0.23"}
# one local epoch of batch 64 over a client's ~1,950 images: 31 steps (the simulator takes a fixed count)
T67_SCALES = {"tiny": ("run.rounds=3", "run.eval_every_rounds=1", "learning.local_steps=2",
                       "learning.eval_train_samples=200"),
              "cpu": ("run.rounds=150", "learning.local_steps=31"), "paper": ("run.rounds=150", "learning.local_steps=31")}


def _t67_settings() -> list[tuple[str, int, float]]:
    return [("fedavg", s, 0.0) for s in S67] + [("safari", 18, share) for share in AUX67]


def _t67_variant(algorithm: str, s: int, share: float) -> str:
    return f"t67-{algorithm}-s{s}-aux{share:g}"


def tables67_families(scale: str, overrides: Sequence[str]) -> dict:
    base = packaged("studies/safari_tables", ["devices.count=30", "learning.classes_per_device=2", "scheduler.m=10",
                                              *T67_SCALES[scale], *overrides])
    variants = {_t67_variant(a, s, share): {"learning.algorithm": a, "devices.excluded_count": s,
                                            "learning.aux_samples": AUX67.get(share, 0)}
                for a, s, share in _t67_settings()}
    return {f"safari/tables67/{scale}": (base, variants)}


def collect_tables67(runs: Runs, scale: str) -> pd.DataFrame:
    rows = []
    for a, s, share in _t67_settings():
        for seed, folder in runs.seeds(_t67_variant(a, s, share)):
            rows.append({"algorithm": a, "s": s, "aux_share": share, "seed": seed, **_run_row(folder)})
    return pd.DataFrame(rows, columns=["algorithm", "s", "aux_share", "seed", "final", "last5", "label_coverage",
                                       "server_rounds"])


def report_tables67(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """FedAvg against s and SAFARI at s/M = 0.6 against the auxiliary share, beside the paper's."""
    g = data.groupby(["algorithm", "s", "aux_share"])
    mean, std = g[["final", "last5", "label_coverage"]].mean(), g[["final", "last5"]].agg(seed_std)
    seeds = int(data["seed"].nunique()) if len(data) else 0
    md = [f"M = {M67} clients (paper 150, s scaled by s/M), p = 2 classes each, m = 10 per client round, one local "
          f"epoch (31 steps of 64 at the cpu scale), logistic regression, q = 0.8; {seeds} seed(s), mean ± std, accuracy in %.", "",
          "| algorithm | s/M | s (ours) | classes covered | ours: final | ours: mean of last 5 | paper |",
          "|---|---|---|---|---|---|---|"]
    numbers = {}
    for a, s, share in _t67_settings():
        if (a, s, share) not in mean.index:
            continue
        m, d = mean.loc[(a, s, share)], std.loc[(a, s, share)]
        name = "FedAvg" if a == "fedavg" else f"SAFARI({100 * share:.0f}%)"
        paper = PAPER_FEDAVG[s] if a == "fedavg" else PAPER_SAFARI_S18[share]
        md.append(f"| {name} | {s / M67:.1f} | {s} | {10 * m.label_coverage:.1f} | {with_spread(m.final, d.final)} | "
                  f"{with_spread(m.last5, d.last5)} | {paper} |")
        numbers[f"{name} s={s}"] = float(m.final)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    fed = data[data.algorithm == "fedavg"].groupby("s")["last5"].agg(["mean", seed_std])
    ax.errorbar(fed.index / M67, fed["mean"], yerr=fed["seed_std"].fillna(0), marker="o", capsize=3, color="C0",
                label="FedAvg")
    ax.plot([s / M67 for s in PAPER_FEDAVG], [float(v.split()[0]) for v in PAPER_FEDAVG.values()], color="C0",
            ls="--", marker="o", mfc="none", alpha=0.6, label="FedAvg, paper (M = 150)")
    saf = data[data.algorithm == "safari"].groupby("aux_share")["last5"].agg(["mean", seed_std])
    for k, (share, row) in enumerate(saf.iterrows()):  # side by side at s/M = 0.6, so their bars stay apart
        x = 18 / M67 + 0.02 * (k + 1)
        ax.errorbar([x], [row["mean"]], yerr=[np.nan_to_num(row["seed_std"])], marker="s",
                    capsize=3, ls="none", color=f"C{k + 1}", label=f"SAFARI {100 * share:.0f}% auxiliary")
        ax.plot([x], [float(PAPER_SAFARI_S18[share].split()[0])], marker="s", mfc="none", ls="none",
                color=f"C{k + 1}", alpha=0.6)
    ax.set(xlabel="excluded share s/M", ylabel="test accuracy %, last-5 mean ± std",
           title="FedAvg loses accuracy as clients are excluded (hollow: paper)")
    ax.legend(fontsize=7)
    path = save_figure(fig, figures / "safari_tables67.png", caption=figure_caption(scale, data))
    md += ["", "Paper (Tables 6-7, M = 150): FedAvg falls with s; at s/M = 0.6 SAFARI gains +1.3, +4.9 and +4.4 points "
           "with 1 %, 10 % and 20 % of the training set as auxiliary data.", "", "![](safari_tables67.png)"]
    return Report("tables67", [path], numbers, "\n".join(md))


# ---------------------------------------------------------------------------------------------
# the wireless study: SAFARI against the Lyapunov scheduler's starvation of weak devices

LABELS = {"fedavg_uniform": "FedAvg + uniform", "fedavg_lyapunov": "FedAvg + Lyapunov (lam 100)",
          "safari_lyapunov": "SAFARI + Lyapunov (lam 100)", "safari_uniform": "SAFARI + uniform",
          "fedavg_lyapunov_mean": "FedAvg + Lyapunov, plain average",
          "safari_lyapunov_mean": "SAFARI + Lyapunov, plain average"}
TAIL_S = 200.0  # "late" accuracy: the evaluations of the last TAIL_S simulated seconds
TARGET = 0.7
WIRELESS_SCALES = {"tiny": ("run.time_budget_s=30", "run.eval_every_s=5", "learning.local_steps=2",
                            "learning.eval_train_samples=200"), "cpu": (), "paper": ()}


def wireless_families(scale: str, overrides: Sequence[str]) -> dict:
    base = packaged("studies/safari_lyapunov_starvation", [*WIRELESS_SCALES[scale], *overrides])
    return {f"safari/wireless/{scale}": (base, {name: dict(ov) for name, ov in base.variants})}


def collect_wireless(runs: Runs, scale: str) -> pd.DataFrame:
    """Per run (kind "run"): the headline numbers; and its accuracy curve (kind "curve")."""
    rows = []
    for variant in LABELS:
        for seed, folder in runs.seeds(variant):
            summary = run_summary(folder)
            ev = pd.read_csv(folder / "evals.csv")
            sel = pd.read_csv(folder / "devices.csv")["selections"].to_numpy()
            budget = load_scenario(folder / "scenario.toml", environment=False).run.time_budget_s
            late = ev[ev.time_s >= budget - TAIL_S].accuracy
            client_rounds = summary["rounds"] - summary["server_rounds"]
            rows.append({"kind": "run", "variant": variant, "seed": seed, "final": 100 * summary["final_accuracy"],
                         "late_mean": 100 * late.mean(), "late_min": 100 * late.min(),
                         "time_to_target_s": summary["time_to_target_s"], "rounds": summary["rounds"],
                         "server_rounds": summary["server_rounds"], "ever_participated": summary["ever_participated"],
                         "weak2_per_round": sel[:2].mean() / max(client_rounds, 1),
                         "weak2_share": sel[:2].sum() / max(sel.sum(), 1),
                         "weak2_per_100s": 100 * sel[:2].mean() / summary["sim_time_s"],
                         "strong2_share": sel[-2:].sum() / max(sel.sum(), 1)})
            rows += [{"kind": "curve", "variant": variant, "seed": seed, "time_s": t, "accuracy": 100 * a}
                     for t, a in zip(ev.time_s, ev.accuracy)]
    return pd.DataFrame(rows)


def report_wireless(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """The headline table (mean ± std over seeds), and accuracy against simulated time where the data
    holds the curves."""
    runs = data[data["kind"] == "run"] if len(data) else data
    g = runs.groupby("variant")
    lines = [f"| variant | seeds | time to {100 * TARGET:.0f}% (s) | final acc % | mean acc, last {TAIL_S:.0f} s % | "
             f"min acc, last {TAIL_S:.0f} s % | rounds (server) | devices ever selected | weakest 2: share of client "
             "rounds | weakest 2: share of selections | weakest 2: selections per 100 s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for v in (v for v in LABELS if v in g.groups):
        r = g.get_group(v)
        ttt = r.time_to_target_s
        ttt_s = (with_spread(ttt.mean(), seed_std(ttt), ".0f") if ttt.notna().all()
                 else f"{ttt.mean():.0f} ({ttt.notna().sum()}/{len(r)} reached)" if ttt.notna().any() else "not reached")
        lines.append(f"| {LABELS[v]} | {len(r)} | {ttt_s} | {with_spread(r.final.mean(), seed_std(r.final), '.1f')} | "
                     f"{with_spread(r.late_mean.mean(), seed_std(r.late_mean), '.1f')} | {r.late_min.mean():.1f} | "
                     f"{r.rounds.mean():.0f} ({r.server_rounds.mean():.0f}) | {100 * r.ever_participated.mean():.0f}% | "
                     f"{100 * r.weak2_per_round.mean():.1f}% | {100 * r.weak2_share.mean():.1f}% | "
                     f"{r.weak2_per_100s.mean():.1f} |")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.3))
    curves = data[data["kind"] == "curve"] if "kind" in data and len(data) else pd.DataFrame()
    for i, v in enumerate(LABELS):
        of = curves[curves["variant"] == v] if len(curves) else curves
        if len(of):
            grid = np.arange(0.0, of["time_s"].max() + 1e-9, 10.0)
            acc = np.array([np.interp(grid, c["time_s"], c["accuracy"]) for _, c in of.groupby("seed")])
            ax.plot(grid, acc.mean(0), color=f"C{i}", label=f"{LABELS[v]} ({len(acc)} seeds)")
        elif v in g.groups:  # the data holds the run-level numbers only: the late accuracy as a level
            ax.axhline(g.get_group(v).late_mean.mean(), color=f"C{i}", ls="--", label=f"{LABELS[v]}: late mean")
    ax.axhline(100 * TARGET, color="grey", ls=":", lw=1)
    ax.set(xlabel="simulated wall-clock time (s)", ylabel="test accuracy (%)", ylim=(0, 90),
           title="20 devices with one class each, TDMA, m = 10, V = 100")
    ax.legend(fontsize=7, loc="lower right")
    path = save_figure(fig, figures / "safari_wireless.png", caption=figure_caption(scale, data))
    md = ["Mean ± std over seeds:", "", *lines, "", "The paper has no wireless study: Lyapunov's λ = 100 starves the "
          "weakest devices (and with them their classes); SAFARI's server rounds restore them.", "",
          "![](safari_wireless.png)"]
    return Report("wireless", [path], {"runs": runs.to_dict("records")}, "\n".join(md))


# ---------------------------------------------------------------------------------------------
# the recipes of the paper

# CPU minutes for 3 seeds, one torch thread (tiny: benchmarks/recipe_costs.py; cpu: the committed runs' wall
# times, tables 1-3 three times their seed's)
RECIPES: list[Recipe] = [
    Recipe("safari", "table1", "Table 1: FedAvg against p classes per client and s excluded clients (M = 10)",
           ("safari_table1.png",), _table_families("table1"), _collect_tables("table1"), report_table1,
           {"tiny": 0.2, "cpu": 9.5}),
    Recipe("safari", "table2", "Table 2: SAFARI (n_T = 1000) minus FedAvg, and SAFARI's accuracy",
           ("safari_table2.png",), _table_families("table2"), _collect_tables("table2"), report_table2,
           {"tiny": 0.23, "cpu": 16.8}),
    Recipe("safari", "table3", "Table 3: SAFARI minus FedAvg at s = 4 against the auxiliary set's size",
           ("safari_table3.png",), _table_families("table3"), _collect_tables("table3"), report_table3,
           {"tiny": 0.24, "cpu": 12.6}),
    Recipe("safari", "tables67", "Tables 6-7: FedAvg against s/M and SAFARI with 1, 10, 20 % auxiliary data (M = 30)",
           ("safari_tables67.png",), tables67_families, collect_tables67, report_tables67, {"tiny": 0.08, "cpu": 5.7}),
    Recipe("safari", "wireless", "SAFARI against Lyapunov's starvation of weak devices (TDMA, 20 devices)",
           ("safari_wireless.png",), wireless_families, collect_wireless, report_wireless,
           {"tiny": 0.14, "cpu": 2.7}),
]
