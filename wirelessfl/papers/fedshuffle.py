"""Reproduction of Horváth et al., "FedShuffle: recipes for better use of local work"
(docs/papers/fedshuffle.md): the quadratic experiment of Fig. 1 and a CPU analogue of Tables 2 and 3.

``fig1`` is the paper's own synthetic benchmark (wirelessfl.papers.quadratic, pure numpy: no
simulation, so the recipe has no runs and its data is computed directly): ||x^r - x*||^2 against
rounds for every FedShuffleGen method, with full participation (1a), with MVR momentum (1b), with 2
of 3 clients per round (1c) and with one client per round, uniform against importance sampling (1d).

``tables`` runs through the simulator: Fashion-MNIST, an MLP, 20 devices with label skew, uniform
scheduling of m = 10 draws, every method without and with global momentum 0.9 (and FedShuffleMVR), in
two settings, "imbalanced" (log-normal dataset sizes, one local epoch: the paper's Shakespeare trend)
and "epochs" (equal sizes, E_n ~ U{2..5} per device and round: its CIFAR-100 trend). Its data is one
row per run: the mean test accuracy of the last 3 evaluations, the final training loss and the
simulated time.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..config import from_dict
from ..experiments.analysis import markdown_table
from . import quadratic as quad
from .recipes import SPREAD, Recipe, Report, Runs, figure_caption, pyplot, save_figure, seed_std, with_spread

# ---------------------------------------------------------------------------------------------
# Fig. 1: the quadratic

FIG1_ROUNDS = {"tiny": 60, "cpu": 1000, "paper": 1000}
FIG1_POINTS = 200  # rounds kept per curve (evenly spaced, plus round 500 and the last)

# panel -> (title, methods, run keywords); Fig. 1d is its own panel with two sampling schemes
FIG1_PANELS = {
    "1a": ("full participation, η = 1/80", quad.METHODS[:-1], dict(eta=1 / 80)),
    "1b": ("momentum 0.9 (MVR), full participation, η = 1/80", quad.METHODS[:-1], dict(eta=1 / 80, momentum=0.9)),
    "1c": ("2 of 3 clients uniformly, η = 1/160", ("fedshuffle", "fedshuffle_so"), dict(eta=1 / 160, cohort=2)),
}
FIG1D = {"uniform p = 1/3, η = 1/500": dict(eta=1 / 500, probs=(1 / 3, 1 / 3, 1 / 3)),
         "IS p = (0.8, 0.1, 0.1), η = 1/300": dict(eta=1 / 300, probs=(0.8, 0.1, 0.1))}

# docs/papers/fedshuffle.md, "The paper's results the recipes compare with": ||x - x*||^2 the paper's
# Fig. 1 shows at the last round (full participation)
PAPER_FIG1 = {("1a", "fedavg"): "plateau ~1.7e-2", ("1a", "fedavg_rr"): "plateau ~1.7e-2",
              ("1a", "fedavg_min"): "~1e-3", ("1a", "fednova"): "~3e-4", ("1a", "fednova_rr"): "~4e-7",
              ("1a", "fedshuffle"): "~4e-7", ("1b", "fedavg_rr"): "plateau ~1.7e-4",
              ("1b", "fedshuffle"): "~4e-9 (FedShuffleMVR, best)", ("1c", "fedshuffle"): "~2e-4 (noisy)",
              ("1c", "fedshuffle_so"): "stalls near 1.85e-3"}


def _curve_rows(panel: str, label: str, curves: np.ndarray) -> list[dict]:
    """Seed mean, min and max of ||x^r - x*||^2 at the kept rounds."""
    last = curves.shape[1] - 1
    kept = np.unique(np.r_[np.linspace(0, last, FIG1_POINTS).round().astype(int), min(500, last), last])
    mean, low, high = curves.mean(0), curves.min(0), curves.max(0)
    return [{"panel": panel, "method": label, "seeds": curves.shape[0], "round": int(r), "mean": mean[r],
             "min": low[r], "max": high[r]} for r in kept]


def collect_fig1(runs: Runs, scale: str) -> pd.DataFrame:
    """Every curve of Fig. 1, computed directly (the quadratic needs no simulation)."""
    rounds = FIG1_ROUNDS[scale]
    rows = []
    for panel, (_, methods, kw) in FIG1_PANELS.items():
        for method in methods:
            rows += _curve_rows(panel, method, quad.run_seeds(method, rounds=rounds, **kw))
    problem = quad.paper_problem((8, 1, 1))
    for label, kw in FIG1D.items():
        curves = quad.run_seeds("fedshuffle", problem=problem, rounds=rounds, eta=kw["eta"], probs=np.array(kw["probs"]))
        rows += _curve_rows("1d", label, curves)
    return pd.DataFrame(rows)


def report_fig1(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """The four panels and the table of ||x - x*||^2 at round 500 and at the last round."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(21, 4))
    titles = {**{p: t for p, (t, _, _) in FIG1_PANELS.items()}, "1d": "1 of 3 clients (8, 1, 1 points): uniform vs IS"}
    rows = []
    for ax, (panel, title) in zip(axes, titles.items()):
        of = data[data["panel"] == panel]
        for method, curve in of.groupby("method", sort=False):
            ax.semilogy(curve["round"], curve["mean"], label=method)
            ax.fill_between(curve["round"], curve["min"], curve["max"], alpha=0.2)
            at = curve.set_index("round")["mean"]
            last = int(curve["round"].max())
            rows.append({"panel": panel, "method": method, "round 500": at.get(500, math.nan),
                         f"last round ({last})": at[last], "paper": PAPER_FIG1.get((panel, method), "")})
        ax.set_title(f"Fig. {panel}: {title}", fontsize=9)
        ax.set_xlabel("round")
        ax.set_ylabel(r"$\|x^r - x^\star\|^2$ (mean; band: range over seeds)")
        ax.legend(fontsize=7)
    path = save_figure(fig, figures / "fedshuffle_quadratic.png", caption=figure_caption(scale, data))
    table = pd.DataFrame(rows)
    shown = table.assign(**{c: table[c].map(lambda v: f"{v:.2g}") for c in table.columns if c.startswith(("round", "last"))})
    md = [f"||x^r - x*||^2, mean over {int(data['seeds'].max())} seeds (bands in the figure: range over seeds):", "",
          markdown_table(shown), "",
          "Paper (docs/papers/fedshuffle.md: the paper's results): "
          "FedAvg and FedAvgRR stall at FedAvg's fixed point (squared distance 0.0170), "
          "FedShuffle converges to its O(η) offset (~4e-7), FedShuffleMVR lower still; importance sampling beats "
          "uniform sampling of one client.", "", "![Fig. 1](fedshuffle_quadratic.png)"]
    numbers = {"final": {f"{r['panel']} {r['method']}": r[f"last round ({int(data['round'].max())})"] for r in rows}}
    return Report("fig1", [path], numbers, "\n".join(md))


# ---------------------------------------------------------------------------------------------
# Tables 2 and 3: the simulator's analogue

TABLE_METHODS = ("fedavg_min", "fedavg_mean", "fedavg_rr", "fednova", "fedshuffle")
# FedShuffleMVR diverged at lr 0.02 and 0.01 (imbalanced setting, rounds 11 and ~8) and, over 200 rounds, at
# 0.002 (rounds 115 and 145 of seeds 0 and 1)
MVR_LR = 0.001
SETTINGS = {"imbalanced": {"size_sigma": 0.8, "local_epochs": 1},
            "epochs": {"size_sigma": 0.0, "local_epochs": 2, "local_epochs_max": 5}}
TITLES = {"imbalanced": "Table 2 analogue (imbalanced sizes; paper: Shakespeare)",
          "epochs": "Table 3 analogue (E_n ~ U{2..5}; paper: CIFAR-100)"}
# docs/papers/fedshuffle.md, "The paper's results the recipes compare with": test accuracy (%) without / with
# momentum 0.9; Table 2 Shakespeare, Table 3 CIFAR-100
PAPER_TABLES = {"imbalanced": {"fedavg_min": (35.79, 51.13), "fedavg_mean": (36.95, 55.38),
                               "fedavg_rr": (48.61, 64.64), "fednova": (43.29, 61.65), "fedshuffle": (59.57, 67.63)},
                "epochs": {"fedavg_min": (48.49, 63.62), "fedavg_mean": (49.24, 64.75), "fedavg_rr": (50.29, 63.04),
                           "fednova": (50.63, 62.83), "fedshuffle": (51.97, 64.52)}}
TABLE_SCALES = {"tiny": dict(rounds=4, count=6, samples=40, train=200),
                "cpu": dict(rounds=200, count=20, samples=150, train=3000),
                "paper": dict(rounds=200, count=20, samples=150, train=3000)}


def table_base(scale: str, overrides: Sequence[str] = ()):
    """Fashion-MNIST MLP, 20 devices with label skew (and log-normal sizes), uniform m = 10, 0.1 s
    per local step, so devices with more data straggle."""
    size = TABLE_SCALES[scale]
    base = from_dict({
        "name": "fedshuffle_tables", "seed": 0,
        "run": {"rounds": size["rounds"], "eval_every_rounds": max(size["rounds"] // 15, 1), "threads": 1},
        "channel": {"profile": "linear"},
        "devices": {"count": size["count"], "step_time_s": 0.1},
        "scheduler": {"name": "uniform", "m": min(10, size["count"])},
        "learning": {"dataset": "fashion_mnist", "model": "mlp" if scale != "tiny" else "logreg",
                     "partition": "dirichlet_per_device", "alpha": 0.3, "samples_per_device": size["samples"],
                     "size_sigma": 0.8, "batch_size": 16, "lr": 0.02, "algorithm": "fedavg_rr",
                     "eval_train_samples": size["train"]},
    })
    return base.replace(*overrides) if overrides else base


def _table_runs() -> list[tuple[str, str, float]]:
    """(setting, method, momentum) of every run of the tables."""
    return [(setting, method, momentum) for setting in SETTINGS
            for method, momentum in ([(m, 0.0) for m in TABLE_METHODS] + [(m, 0.9) for m in TABLE_METHODS]
                                     + [("fedshuffle_mvr", 0.9)])]


def _variant(setting: str, method: str, momentum: float) -> str:
    return f"{setting}-{method}-momentum{momentum:g}"


def tables_families(scale: str, overrides: Sequence[str]) -> dict:
    """One family: a variant per (setting, method, momentum)."""
    variants = {}
    for setting, method, momentum in _table_runs():
        ov = {f"learning.{k}": v for k, v in SETTINGS[setting].items()}
        ov.update({"learning.algorithm": method, "learning.momentum": momentum,
                   "learning.lr": MVR_LR if method == "fedshuffle_mvr" else 0.02})
        variants[_variant(setting, method, momentum)] = ov
    return {f"fedshuffle/tables/{scale}": (table_base(scale, overrides), variants)}


def collect_tables(runs: Runs, scale: str) -> pd.DataFrame:
    """One row per finished run: its setting, method, momentum, seed, step size, rounds, the mean accuracy
    and training loss of its last 3 evaluations and its simulated time."""
    rows = []
    for setting, method, momentum in _table_runs():
        for seed, folder in runs.seeds(_variant(setting, method, momentum)):
            evals = pd.read_csv(folder / "evals.csv")
            ends = pd.read_csv(folder / "rounds.csv", usecols=["t_end"])["t_end"]
            rows.append({"setting": setting, "method": method, "momentum": momentum, "seed": seed,
                         "lr": MVR_LR if method == "fedshuffle_mvr" else 0.02, "rounds": len(ends),
                         "accuracy": float(evals["accuracy"].tail(3).mean()),
                         "train_loss": float(evals["train_loss"].tail(3).mean()), "sim_time_s": float(ends.iloc[-1])})
    return pd.DataFrame(rows, columns=["setting", "method", "momentum", "seed", "lr", "rounds", "accuracy",
                                       "train_loss", "sim_time_s"])


def _by_seed(data: pd.DataFrame, setting: str, momentum: float, column: str) -> pd.DataFrame:
    """``column`` of one table column's runs, a row per seed and a column per method."""
    runs = data[(data["setting"] == setting) & (data["momentum"] == momentum)]
    return runs.pivot_table(index="seed", columns="method", values=column)


def best_in_seeds(data: pd.DataFrame, setting: str, momentum: float, method: str = "fedshuffle",
                  column: str = "accuracy") -> tuple[int, int]:
    """(seeds in which ``method`` is the best of TABLE_METHODS, seeds with all of them): the highest
    accuracy, or the lowest training loss when ``column`` is "train_loss"."""
    by_seed = _by_seed(data, setting, momentum, column).reindex(columns=TABLE_METHODS).dropna()
    best = by_seed.idxmin(axis=1) if column == "train_loss" else by_seed.idxmax(axis=1)
    return int((best == method).sum()), len(by_seed)


def paired_gap(data: pd.DataFrame, setting: str, momentum: float, method: str = "fedshuffle",
               baseline: str = "fedavg_rr") -> tuple[float, float]:
    """Mean and std over seeds (SPREAD) of ``method``'s accuracy minus ``baseline``'s in the same seed, in
    points: the seeds share the split and the selections, so the pair removes each seed's own level."""
    by_seed = _by_seed(data, setting, momentum, "accuracy").reindex(columns=[method, baseline])
    gap = 100 * (by_seed[method] - by_seed[baseline]).dropna()
    return (float(gap.mean()), seed_std(gap)) if len(gap) else (math.nan, math.nan)


def report_tables(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """Both tables (test accuracy and training loss, mean ± std over seeds as recipes.SPREAD says) beside
    the paper's, how often FedShuffle is the best, and a figure of the accuracies."""
    stats = data.groupby(["setting", "method", "momentum"])[["accuracy", "train_loss"]].agg(["mean", seed_std])
    seeds = sorted(int(s) for s in data["seed"].unique())
    rounds = int(data["rounds"].max()) if len(data) else TABLE_SCALES[scale]["rounds"]
    lines = [f"{rounds} rounds; test accuracy (%) and training loss, each the mean of the last 3 evaluations; "
             f"mean over seeds {seeds} ± {SPREAD} (FedShuffleMVR with lr {MVR_LR}, the others 0.02).", ""]
    numbers: dict = {}
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), sharex=True)
    for (ax, ax_loss), (setting, title) in zip(axes.T, TITLES.items()):
        lines += [f"### {title}", "", "| method | ours: acc %, no momentum | ours: acc %, momentum 0.9 | "
                  "ours: train loss, no momentum | ours: train loss, momentum 0.9 | paper: acc %, no momentum | "
                  "paper: acc %, momentum |", "|---|---|---|---|---|---|---|"]
        for k, method in enumerate(TABLE_METHODS + ("fedshuffle_mvr",)):
            acc, loss = [], []
            for j, momentum in enumerate((0.0, 0.9)):
                key = (setting, method, momentum)
                if key not in stats.index:
                    acc.append("")
                    loss.append("")
                    continue
                mean, std = 100 * stats.loc[key, ("accuracy", "mean")], 100 * stats.loc[key, ("accuracy", "seed_std")]
                acc.append(with_spread(mean, std))
                loss.append(with_spread(stats.loc[key, ("train_loss", "mean")], stats.loc[key, ("train_loss", "seed_std")],
                                        ".3f"))
                numbers[f"{setting} {method} momentum {momentum:g}"] = float(mean)
                label = ("no momentum", "momentum 0.9")[j] if k == 0 else None
                ax.errorbar(k + (j - 0.5) * 0.3, mean, yerr=np.nan_to_num(std), fmt="os"[j],
                            color=f"C{j}", label=label)
                ax_loss.errorbar(k + (j - 0.5) * 0.3, stats.loc[key, ("train_loss", "mean")],
                                 yerr=np.nan_to_num(stats.loc[key, ("train_loss", "seed_std")]), fmt="os"[j],
                                 color=f"C{j}", label=label)
            paper = PAPER_TABLES[setting].get(method, ("", ""))
            lines.append(f"| {method} | {acc[0]} | {acc[1]} | {loss[0]} | {loss[1]} | {paper[0]} | {paper[1]} |")
        wins = [best_in_seeds(data, setting, momentum) for momentum in (0.0, 0.9)]
        lows = [best_in_seeds(data, setting, momentum, column="train_loss") for momentum in (0.0, 0.9)]
        lines += ["", f"FedShuffle has the highest accuracy of the five in {wins[0][0]} of {wins[0][1]} seeds without "
                  f"momentum and {wins[1][0]} of {wins[1][1]} with, and the lowest training loss in {lows[0][0]} of "
                  f"{lows[0][1]} and {lows[1][0]} of {lows[1][1]}."]
        gaps = [paired_gap(data, setting, momentum) for momentum in (0.0, 0.9)]
        paper_gaps = [PAPER_TABLES[setting]["fedshuffle"][j] - PAPER_TABLES[setting]["fedavg_rr"][j] for j in (0, 1)]
        lines += [f"FedShuffle − FedAvgRR in the same seed: {with_spread(*gaps[0], '+.2f', '.2f')} points without "
                  f"momentum and {with_spread(*gaps[1], '+.2f', '.2f')} with (paper {paper_gaps[0]:+.2f} and "
                  f"{paper_gaps[1]:+.2f}).", ""]
        numbers[f"{setting} fedshuffle - fedavg_rr"] = [g[0] for g in gaps]
        ax_loss.set_xticks(range(len(TABLE_METHODS) + 1), TABLE_METHODS + ("fedshuffle_mvr",), rotation=30,
                           fontsize=8)
        ax.set_ylabel("test accuracy %, last 3 evaluations")
        ax_loss.set_ylabel("training loss, last 3 evaluations")
        ax_loss.set_yscale("log")
        ax.set_title(f"{title}\nmean ± std over seeds", fontsize=9)
        for a in (ax, ax_loss):
            a.grid(alpha=0.3, axis="y", which="both")
        ax.legend(fontsize=8)
    path = save_figure(fig, figures / "fedshuffle_tables.png", caption=figure_caption(scale, data))
    lines += ["Paper: FedShuffle is the best of the five without and with momentum in both tables; momentum "
              "helps every method.", "", "![Tables 2 and 3](fedshuffle_tables.png)"]
    return Report("tables", [path], numbers, "\n".join(lines))


# ---------------------------------------------------------------------------------------------
# the network: training loss against rounds and simulated time (the imbalanced setting, no momentum)

NN_METHODS = ("fedavg_rr", "fedavg_min", "fednova", "fedshuffle")
NN_ROUNDS = {"tiny": 4, "cpu": 150, "paper": 150}


def nn_families(scale: str, overrides: Sequence[str]) -> dict:
    """A variant per method, imbalanced sizes, one local epoch, NN_ROUNDS rounds."""
    rounds = NN_ROUNDS[scale]
    variants = {f"nn-{m}": {"learning.algorithm": m, "run.rounds": rounds,
                            "run.eval_every_rounds": max(rounds // 15, 1)} for m in NN_METHODS}
    return {f"fedshuffle/nn/{scale}": (table_base(scale, overrides), variants)}


def collect_nn(runs: Runs, scale: str) -> pd.DataFrame:
    """Every evaluation of every run, with the run's mean computation and airtime per round."""
    frames = []
    for method in NN_METHODS:
        for seed, folder in runs.seeds(f"nn-{method}"):
            e = pd.read_csv(folder / "evals.csv")[["round", "time_s", "train_loss", "accuracy"]]
            r = pd.read_csv(folder / "rounds.csv", usecols=["comp_s", "comm_s"])
            frames.append(e.assign(method=method, seed=seed, comp_s=r["comp_s"].mean(), comm_s=r["comm_s"].mean()))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["round", "time_s", "train_loss", "accuracy", "method", "seed", "comp_s", "comm_s"])


def report_nn(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """Training loss against rounds and simulated time, accuracy against rounds (mean over seeds), and
    the last evaluation's numbers."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    rows = []
    for method in NN_METHODS:
        runs = data[data["method"] == method]
        if runs.empty:
            continue
        mean = runs.groupby("round")[["time_s", "train_loss", "accuracy"]].mean().reset_index()
        axes[0].plot(mean["round"], mean["train_loss"], label=method)
        axes[1].plot(mean["time_s"], mean["train_loss"], label=method)
        axes[2].plot(mean["round"], mean["accuracy"], label=method)
        last = runs[runs["round"] == runs["round"].max()]
        rows.append({"method": method,
                     "train loss": with_spread(last["train_loss"].mean(), seed_std(last["train_loss"]), ".3f"),
                     "test accuracy": with_spread(last["accuracy"].mean(), seed_std(last["accuracy"]), ".3f"),
                     "computation per round (s)": f"{runs.groupby('seed')['comp_s'].first().mean():.2f}",
                     "simulated time (s)": f"{last['time_s'].mean():.0f}"})
    for ax, xl, yl in zip(axes, ("round", "simulated time (s)", "round"), ("train loss", "train loss", "test accuracy")):
        ax.set_xlabel(xl)
        ax.set_ylabel(yl)
        ax.legend(fontsize=8)
    axes[0].set_yscale("log")
    axes[1].set_yscale("log")
    path = save_figure(fig, figures / "fedshuffle_nn.png", caption=figure_caption(scale, data))
    rounds = int(data["round"].max()) if len(data) else 0
    md = [f"Mean over seeds {sorted(int(s) for s in data['seed'].unique())} ± {SPREAD}, at round {rounds} "
          "(imbalanced sizes, one local epoch, lr 0.02, 0.1 s per local step):", "",
          markdown_table(pd.DataFrame(rows)), "",
          "Paper (Table 2, Shakespeare, no momentum): FedShuffle > FedAvg > FedNova > FedAvgMin.", "",
          "![training loss and accuracy](fedshuffle_nn.png)"]
    return Report("nn", [path], {"final": rows}, "\n".join(md))


# ---------------------------------------------------------------------------------------------
# the recipes of the paper

# CPU minutes for 3 seeds, one torch thread (tiny: benchmarks/recipe_costs.py; cpu: the sum of the committed runs'
# wall times, 2 worker processes on 2 cores at a load of 2-3)
RECIPES: list[Recipe] = [
    Recipe("fedshuffle", "fig1", "the quadratic: ||x - x*||^2 against rounds, full and partial participation, "
           "momentum, importance sampling", ("fedshuffle_quadratic.png",), lambda scale, overrides: {},
           collect_fig1, report_fig1, {"tiny": 0.01, "cpu": 0.05, "paper": 0.05}),
    Recipe("fedshuffle", "nn", "a network on Fashion-MNIST: training loss against rounds and simulated time, "
           "imbalanced sizes", ("fedshuffle_nn.png",), nn_families, collect_nn, report_nn, {"tiny": 0.1, "cpu": 6.2}),
    Recipe("fedshuffle", "tables", "Tables 2 and 3 analogue: every method without and with momentum, imbalanced "
           "sizes and random local epochs", ("fedshuffle_tables.png",), tables_families, collect_tables,
           report_tables, {"tiny": 0.26, "cpu": 102}),
]
