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
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from ...config import Scenario
from ...experiments.analysis import (average_curves, best_setting_table, markdown_table, mean_time_to_target, on_grid,
                                    rolling_mean, shift_by_compute, speedup)
from ...sim.device_arrays import load_decisions
from ..recipes import SPREAD, Recipe, Report, Runs, data_seeds, packaged, pyplot, save_figure, seed_std


INF = math.inf

# ---------------------------------------------------------------------------------------------
# the paper's numbers, for the side-by-side comparisons

PAPER_TARGETS = {("het", INF): 0.775, ("het", 1.0): 0.73, ("het", 0.0): 0.65,
                 ("hom", INF): 0.775, ("hom", 1.0): 0.74}
"""Target accuracy of each (channel, alpha) case in the paper (CIFAR-10)."""

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

PAPER_NUMBERS = {
    "fig3_speedup_m10_c0": 8.5, "fig3_time_m10_lyapunov_s": 5339.0, "fig3_time_m10_uniform_s": 45748.0,
    "fig3_speedup_m1_c0": 1.3, "fig3_best_m_c2": 5, "fig3_speedup_best_c2": 1.31,
    "fig6_speedup_m1": 1.24, "fig6_speedup_m10": 6.7,
}


# ---------------------------------------------------------------------------------------------
# cells and scales


def alpha_label(alpha: float) -> str:
    """"inf", "1", "0": alpha as written in cell names and tables."""
    return "inf" if math.isinf(alpha) else f"{alpha:g}"


@dataclass(frozen=True)
class Cell:
    """One training setting: channel profile ("het" or "hom"), alpha, policy, m and lambda."""

    channel: str
    alpha: float
    policy: str
    m: int
    lam: float | None = None  # lyapunov only; uniform ignores lambda

    @property
    def name(self) -> str:
        """A stable name; it is the run's scenario name, so it is part of the cache key."""
        lam = f"-lam{self.lam:g}" if self.policy == "lyapunov" else ""
        return f"{self.channel}-a{alpha_label(self.alpha)}-{self.policy}-m{self.m}{lam}"

    @property
    def setting(self) -> str:
        """The label of this cell in the tables: "m=10 lam=100" or "m=5"."""
        return f"m={self.m} lam={self.lam:g}" if self.policy == "lyapunov" else f"m={self.m}"


def lyapunov(channel: str, alpha: float, m: int, lam: float = 100.0) -> Cell:
    """A Lyapunov-scheduler cell."""
    return Cell(channel, float(alpha), "lyapunov", m, float(lam))


def uniform(channel: str, alpha: float, m: int) -> Cell:
    """A uniform-sampling cell."""
    return Cell(channel, float(alpha), "uniform", m)


@dataclass(frozen=True)
class TimingCell:
    """One timing-only setting (Figs. 7 and 8): policy, m, V, lambda and the number of rounds."""

    policy: str
    m: int
    V: float
    lam: float
    rounds: int

    @property
    def name(self) -> str:
        """A stable name (part of the cache key)."""
        if self.policy == "uniform":
            return f"timing-uniform-m{self.m}-r{self.rounds}"
        return f"timing-lyapunov-m{self.m}-V{self.V:g}-lam{self.lam:g}-r{self.rounds}"


@dataclass(frozen=True)
class Scale:
    """How big the runs are: base overrides, targets, round budgets and evaluation intervals."""

    name: str
    training_overrides: tuple[str, ...]
    timing_overrides: tuple[str, ...]
    targets: dict                        # (channel, alpha) -> target accuracy
    rounds: dict                         # (policy, m, alpha) -> rounds; keys may use None for "any"
    evals_per_run: int                   # evaluate every max(1, rounds // evals_per_run) rounds
    timing_rounds: dict                  # "fig7" / "fig8" -> rounds
    compute_grid: np.ndarray             # computation times (s) for Fig. 2 and the tables
    fig2_compute_max: float = 20.0
    smooth: int = 1                      # rolling-mean window of the displayed curves

    def target(self, cell: Cell) -> float:
        """Target accuracy of the cell's (channel, alpha) case."""
        return self.targets[(cell.channel, cell.alpha)]

    def rounds_for(self, cell: Cell) -> int:
        """Round budget of a cell: the most specific entry of ``rounds`` that matches."""
        for key in ((cell.policy, cell.m, cell.alpha), (cell.policy, cell.m, None), (None, cell.m, cell.alpha),
                    (None, cell.m, None)):
            if key in self.rounds:
                return self.rounds[key]
        raise KeyError(f"scale {self.name}: no round budget for {cell.name}")

    def overrides(self, cell: Cell) -> dict:
        """Dotted overrides that turn the base scenario into this cell at this scale."""
        ov = {"learning.alpha": cell.alpha, "scheduler.name": cell.policy, "scheduler.m": cell.m,
              "run.target_accuracy": self.target(cell), "run.rounds": self.rounds_for(cell),
              "run.eval_every_rounds": max(1, self.rounds_for(cell) // self.evals_per_run)}
        if cell.channel == "het":
            ov["channel.profile"] = "linear"
        else:
            ov.update({"channel.profile": "homogeneous", "channel.sigma": 1.0})
        if cell.policy == "lyapunov":
            ov["scheduler.lam"] = cell.lam
        return ov


def _compute_grid(stops: Sequence[tuple[float, float]], end: float) -> np.ndarray:
    """Computation times: step ``s`` from each ``start`` up to the next start, then ``end``."""
    parts = []
    for (start, step), nxt in zip(stops, [s for s, _ in stops[1:]] + [end]):
        parts.append(np.arange(start, nxt, step))
    return np.round(np.append(np.concatenate(parts), end), 6)


_PAPER_ROUNDS = {(None, 1, None): 40000, (None, 5, None): 20000, (None, 10, None): 15000}

# Both full scales use the same timing-only horizons and computation-time grid.
_TIMING_ROUNDS = {"fig7": 6000, "fig8": 3000}
_COMPUTE_GRID = _compute_grid([(0, 0.02), (2, 0.1), (10, 0.5)], 50.0)

SCALES: dict[str, Scale] = {
    # The paper's setup. Its round budgets are ours (the paper gives times, not rounds): Fig. 3 has
    # uniform with m = 10 at 45,748 s, about 12,000 rounds of ~3.7 s.
    "paper": Scale(
        name="paper", training_overrides=(), timing_overrides=(),
        targets=dict(PAPER_TARGETS), rounds=_PAPER_ROUNDS,
        evals_per_run=400,
        timing_rounds=_TIMING_ROUNDS, compute_grid=_COMPUTE_GRID, smooth=5),
    # Fashion-MNIST on an MLP (784-200-200-10) on one CPU thread. The link keeps the paper's upload
    # size, so airtime per round -- and hence the computation-time axis -- is the paper's. One local
    # step at a small step size makes the target take hundreds of rounds, as the paper's CIFAR-10
    # runs take thousands: the speed-ups are ratios of airtime per round over the whole run, and
    # the first few dozen rounds (Lyapunov's queues filling, uniform's rare deep fades) are not
    # representative of them (figures/README.md measures both horizons). Targets sit below the
    # MLP's plateau for each alpha; budgets give every seed room past the target.
    "cpu": Scale(
        name="cpu",
        training_overrides=("learning.dataset=\"fashion_mnist\"", "learning.model=\"mlp\"", "learning.lr=0.02",
                            "learning.local_steps=1", "learning.eval_train_samples=2000"),
        timing_overrides=(),
        targets={("het", INF): 0.80, ("het", 1.0): 0.80, ("het", 0.0): 0.78,
                 ("hom", INF): 0.80, ("hom", 1.0): 0.80},
        rounds={(None, 1, None): 4000, (None, 5, None): 2000, (None, 10, None): 1500},
        evals_per_run=100,
        timing_rounds=_TIMING_ROUNDS, compute_grid=_COMPUTE_GRID, smooth=1),
    # Tests only: 6 devices, logistic regression, one local step, a handful of rounds.
    "tiny": Scale(
        name="tiny",
        training_overrides=("learning.dataset=\"fashion_mnist\"", "learning.model=\"logreg\"", "learning.lr=0.05",
                            "learning.samples_per_device=40", "learning.local_steps=1",
                            "learning.eval_train_samples=100", "devices.count=6"),
        timing_overrides=("devices.count=6",),
        targets={("het", INF): 0.3, ("het", 1.0): 0.3, ("het", 0.0): 0.2,
                 ("hom", INF): 0.3, ("hom", 1.0): 0.3},
        rounds={(None, 1, None): 4, (None, 5, None): 3, (None, 10, None): 3},
        evals_per_run=100,
        timing_rounds={"fig7": 30, "fig8": 20},
        compute_grid=np.array([0.0, 0.5, 1.0, 2.0, 5.0]), fig2_compute_max=5.0),
}


# ---------------------------------------------------------------------------------------------
# running cells through the shared cache


def training_base(scale: Scale, overrides: Iterable[str] = ()) -> Scenario:
    """scenarios/paper/training.toml with the scale's overrides, then the user's."""
    return packaged("paper/training", [*scale.training_overrides, *overrides])


def timing_base(scale: Scale, overrides: Iterable[str] = ()) -> Scenario:
    """scenarios/paper/timing.toml with the scale's overrides, then those of the user's that a run
    without training takes (not learning.*, not run.device)."""
    timing = [o for o in overrides if not o.startswith(("learning.", "run.device"))]
    return packaged("paper/timing", [*scale.timing_overrides, *timing])


# ---------------------------------------------------------------------------------------------
# analysis on seed-averaged curves


def seed_average(evals: Sequence[pd.DataFrame], metric: str = "accuracy", x: str = "time",
                 compute_s: float = 0.0, points: int = 400, smooth: int = 1) -> pd.DataFrame:
    """Seed average of one cell's runs on a uniform grid of simulated time (or rounds).

    Each run (recorded with no computation time) is shifted to ``compute_s`` per round,
    interpolated onto the grid from 0 to the end of the shortest run, and the runs are averaged
    (columns time_s or round, mean, std, min, max); ``smooth`` > 1 applies a trailing rolling mean
    to the mean, min and max.
    """
    if not evals:
        raise ValueError("no runs to average")
    xs = [shift_by_compute(e, compute_s) if x == "time" else e["round"].to_numpy(float) for e in evals]
    end = min(t[-1] for t in xs)
    grid = np.linspace(0.0, end, points)
    avg = average_curves((on_grid(t, e[metric].to_numpy(float), grid) for t, e in zip(xs, evals)), grid)
    for col in ("mean", "min", "max"):
        avg[col] = rolling_mean(avg[col].to_numpy(), smooth)
    return avg.rename(columns={"time_s": "time_s" if x == "time" else "round"})


def time_to_target_grid(evals_by_setting: dict[str, Sequence[pd.DataFrame]], target: float,
                        compute_grid: Iterable[float], smooth: int = 1) -> pd.DataFrame:
    """Time to target of each setting's seed-averaged curve at every computation time.

    Columns compute_s, setting, time_to_target_s (NaN where the averaged curve never reaches the
    target within the runs' budgets): the input of analysis.best_setting_table.
    """
    rows = []
    for setting, evals in evals_by_setting.items():
        for c in compute_grid:
            t = mean_time_to_target(evals, target, compute_s=float(c), smooth=smooth) if evals else math.nan
            rows.append({"compute_s": float(c), "setting": setting, "time_to_target_s": t})
    return pd.DataFrame(rows)


def rounds_to_target(evals: Sequence[pd.DataFrame], target: float, smooth: int = 1) -> float:
    """Rounds the seed-averaged accuracy-vs-round curve needs to reach the target."""
    from ...experiments.analysis import time_to_target

    avg = seed_average(evals, x="round", points=2000, smooth=smooth)
    return time_to_target(avg["round"], avg["mean"], target)


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


# ---------------------------------------------------------------------------------------------
# plotting helpers

_M_COLOURS = {1: "tab:blue", 5: "tab:orange", 10: "tab:green"}
_ALPHA_COLOURS = {INF: "tab:blue", 1.0: "tab:orange", 0.0: "tab:red"}


def _band(ax, avg: pd.DataFrame, x: str, label: str, colour: str, ls: str = "-") -> None:
    """A seed-averaged curve with its min-max band. Solid curves are drawn wide and underneath,
    dashed ones thin, on top and with markers, so that a dashed curve on a solid one stays visible
    (Fig. 3's uniform m = 1 lies on lyapunov m = 1)."""
    solid = ls == "-"
    ax.plot(avg[x], avg["mean"], color=colour, ls=ls, lw=2.6 if solid else 1.3, alpha=0.75 if solid else 1.0,
            zorder=2 if solid else 3, label=label, marker=None if solid else "x", markersize=4,
            markevery=max(len(avg) // 12, 1))
    ax.fill_between(avg[x], avg["min"], avg["max"], color=colour, alpha=0.15, lw=0)


def _target_line(ax, target: float) -> None:
    ax.axhline(target, color="grey", ls=":", lw=1, label=f"target {target:g}")


def _caption(ctx: "Context") -> str:
    """Scale and seeds, for every figure's title."""
    return f"{ctx.scale.name} scale, {ctx.seeds} seed{'s' if ctx.seeds != 1 else ''}"


# ---------------------------------------------------------------------------------------------
# the data a recipe keeps from its runs, and the view its report reads


EVAL_COLUMNS = ("round", "time_s", "accuracy", "train_loss")


@dataclass
class Context:
    """What a recipe's report reads: the scale, its data table and the folder to write to."""

    scale: Scale
    data: pd.DataFrame
    figures: Path

    @property
    def seeds(self) -> int:
        """How many seeds the data holds (per setting, at most)."""
        return data_seeds(self.data)

    def _of(self, name: str) -> pd.DataFrame:
        return self.data[self.data["variant"] == name] if len(self.data) else self.data

    def evals_by_seed(self, name: str) -> dict[int, pd.DataFrame]:
        """A training setting's evaluation curves keyed by seed (so that two policies can be compared on
        the same seed's data and channels)."""
        return {int(seed): g.reset_index(drop=True) for seed, g in self._of(name).groupby("seed", sort=True)}

    def evals(self, name: str) -> list[pd.DataFrame]:
        """A training setting's evaluation curves, one per seed."""
        return list(self.evals_by_seed(name).values())

    def airtime(self, name: str, horizon: str) -> float:
        """Mean airtime per round over ``horizon`` ("first30" or "to_target"), averaged over seeds."""
        per_seed = self._of(name).groupby("seed")[f"airtime_{horizon}_s"].first()
        return float(per_seed.mean()) if len(per_seed) else math.nan


def training_data(runs: Runs, scale: Scale, cells: Sequence[Cell]) -> pd.DataFrame:
    """Evaluation curves of the cells' runs, with each run's mean airtime per round over its first 30
    rounds and over the rounds its setting needs to the target (those need every round's length)."""
    frames = []
    for cell in cells:
        evals = runs.evals(cell.name)
        if not evals:
            continue
        to_target = rounds_to_target(evals, scale.target(cell), smooth=scale.smooth)
        n = int(round(to_target)) if to_target > 0 else 0
        for (seed, folder), e in zip(runs.seeds(cell.name), evals):
            r = pd.read_csv(folder / "rounds.csv", usecols=["t_start", "t_end"])
            lengths = (r["t_end"] - r["t_start"]).to_numpy(float)
            f = e[list(EVAL_COLUMNS)].copy()
            f.insert(0, "seed", seed)
            f.insert(0, "variant", cell.name)
            f["airtime_first30_s"] = lengths[:30].mean()
            f["airtime_to_target_s"] = lengths[:n].mean() if n else math.nan
            frames.append(f)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["variant", "seed", *EVAL_COLUMNS, "airtime_first30_s", "airtime_to_target_s"])


# ---------------------------------------------------------------------------------------------
# recipes


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


def _times(ctx: Context, cells: Sequence[Cell], compute_s: float) -> dict[str, float]:
    return {c.name: mean_time_to_target(ctx.evals(c.name), ctx.scale.target(c), compute_s=compute_s,
                                        smooth=ctx.scale.smooth) if ctx.evals(c.name) else math.nan
            for c in cells}


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


def _convergence_figure(ctx: Context, cells: Sequence[Cell], path: Path, x: str, computes: Sequence[float],
                        title: str, colour_of: Callable[[Cell], str], label_of: Callable[[Cell], str]) -> None:
    """A grid of panels: rows accuracy and training loss, columns the computation times."""
    plt = pyplot()
    fig, axes = plt.subplots(2, len(computes), figsize=(max(7.0, 5.2 * len(computes)), 7.2), squeeze=False)
    xcol = "time_s" if x == "time" else "round"
    for j, c in enumerate(computes):
        for i, metric in enumerate(("accuracy", "train_loss")):
            ax = axes[i][j]
            for cell in cells:
                evals = ctx.evals(cell.name)
                if not evals:
                    continue
                avg = seed_average(evals, metric, x=x, compute_s=c, smooth=ctx.scale.smooth)
                _band(ax, avg, xcol, label_of(cell), colour_of(cell), "-" if cell.policy == "lyapunov" else "--")
            if metric == "accuracy":
                targets = sorted({ctx.scale.target(cell) for cell in cells})
                for t in targets:
                    _target_line(ax, t)
                ax.set_ylim(bottom=max(0.0, min(targets) - 0.25))
            ax.set_xlabel("simulated wall-clock time (s)" if x == "time" else "round")
            ax.set_ylabel("test accuracy" if metric == "accuracy" else "training loss")
            if x == "time":
                ax.set_title(f"computation {c:g} s per round")
            ax.grid(alpha=0.3)
            if metric == "train_loss":
                ax.set_yscale("log")
        axes[0][0].legend(fontsize=8)
    width = fig.get_size_inches()[0]
    fig.suptitle(textwrap.fill(f"{title}; {_caption(ctx)}, band: min–max over seeds", int(width * 11)), fontsize=10)
    save_figure(fig, path, dpi=110)


def _case(cell: Cell) -> str:
    """The row label of a (channel, alpha) case in the speed-up tables, e.g. "α=inf het"."""
    return f"α={alpha_label(cell.alpha)} {cell.channel}"


def _rounds(ctx: Context, cell: Cell) -> float:
    evals = ctx.evals(cell.name)
    return rounds_to_target(evals, ctx.scale.target(cell), smooth=ctx.scale.smooth) if evals else math.nan


def _speedup_rows(ctx: Context, pairs: Sequence[tuple[Cell, Cell]], compute_s: float) -> pd.DataFrame:
    """Speed-up of each (lyapunov, uniform) pair, its spread over seeds, and where it comes from.

    Time to target is rounds x mean round length (airtime + computation), so the speed-up is about
    the ratio of rounds to target (uniform / lyapunov: below 1 when lyapunov's biased selection
    costs rounds) times the per-round gain (uniform / lyapunov mean round length up to the target).
    """
    rows = []
    for ly, un in pairs:
        t = _times(ctx, [ly, un], compute_s)
        overall = speedup(t[un.name], t[ly.name])
        by_seed_ly, by_seed_un = ctx.evals_by_seed(ly.name), ctx.evals_by_seed(un.name)
        per_seed = [speedup(*(mean_time_to_target([runs[s]], ctx.scale.target(ly), compute_s=compute_s,
                                                  smooth=ctx.scale.smooth) for runs in (by_seed_un, by_seed_ly)))
                    for s in sorted(set(by_seed_ly) & set(by_seed_un))]
        per_seed = [x for x in per_seed if not math.isnan(x)]
        r_ly, r_un = _rounds(ctx, ly), _rounds(ctx, un)
        rows.append({"case": _case(ly), "m": ly.m, "compute_s": compute_s,
                     "target": ctx.scale.target(ly), "lyapunov_s": t[ly.name], "uniform_s": t[un.name],
                     "speedup": overall,
                     "seed_mean": float(np.mean(per_seed)) if per_seed else math.nan,
                     "seed_std": seed_std(per_seed),
                     "rounds_ratio": speedup(r_un, r_ly),
                     "per_round_gain": speedup(ctx.airtime(un.name, "to_target") + compute_s,
                                               ctx.airtime(ly.name, "to_target") + compute_s)})
    return pd.DataFrame(rows)


def _horizon_rows(ctx: Context, pairs: Sequence[tuple[Cell, Cell]]) -> pd.DataFrame:
    """Mean airtime per round, uniform / lyapunov, over the first 30 rounds and up to the target.

    The two differ (lyapunov's queues start empty, uniform's heavy-tailed airtime needs many rounds
    to average out), which is why the cpu scale makes the target take hundreds of rounds.
    """
    rows = []
    for ly, un in pairs:
        row = {"case": _case(ly), "m": ly.m}
        for label, horizon in (("first 30", "first30"), ("to target", "to_target")):
            u, l = ctx.airtime(un.name, horizon), ctx.airtime(ly.name, horizon)
            row.update({f"uniform_s ({label})": u, f"lyapunov_s ({label})": l, f"ratio ({label})": speedup(u, l)})
        rows.append(row)
    return pd.DataFrame(rows)


HORIZON_LEGEND = ("Mean airtime per round (s, averaged over seeds) over the first 30 rounds and over the rounds "
                  "each policy needs to the target: the speed-ups are set by the second.")


SPEEDUP_LEGEND = ("speedup = uniform_s / lyapunov_s of the seed-averaged curves; seed_mean, seed_std: mean and "
                  f"{SPREAD} of the same ratio per seed (both policies on that seed's data and channels); "
                  "rounds_ratio = rounds to target, uniform / lyapunov; per_round_gain = uniform / lyapunov "
                  "mean round length (airtime + computation) over the rounds each needs to the target; "
                  "speedup ≈ rounds_ratio × per_round_gain.")


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
        pd.DataFrame(csv_rows).to_csv(csv_path, index=False)
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
        md_path.write_text("\n".join(md))
        return Report(name, [md_path, csv_path], {"ranges": csv_rows}, "\n".join(md))
    return analyse


# timing-only recipes -------------------------------------------------------------------------


def _fig7_cells(scale: Scale) -> list[TimingCell]:
    return [TimingCell("lyapunov", 10, v, 100.0, scale.timing_rounds["fig7"]) for v in (1.0, 100.0, 1e5)]


def _fig8_cells(scale: Scale) -> list[TimingCell]:
    r = scale.timing_rounds["fig8"]
    return [TimingCell("lyapunov", 10, 100.0, lam, r) for lam in (1.0, 10.0, 100.0)] + \
        [TimingCell("uniform", 10, 100.0, 100.0, r)]


def time_average_power(decisions: dict) -> np.ndarray:
    """(1/T) sum_{t<T} P_n^t q_n^t for T = 1..rounds: array rounds x devices."""
    pq = np.asarray(decisions["power"], float) * np.asarray(decisions["q"], float)
    return np.cumsum(pq, axis=0) / np.arange(1, pq.shape[0] + 1)[:, None]


def settle_round(curve: np.ndarray, level: float = 1.0, tol: float = 0.05) -> float:
    """First round after which ``curve`` stays within ``tol`` (relative) of ``level``; NaN if never."""
    outside = np.flatnonzero(np.abs(np.asarray(curve) - level) > tol * level)
    if outside.size == 0:
        return 1.0
    if outside[-1] == len(curve) - 1:
        return math.nan
    return float(outside[-1] + 2)  # rounds are counted from 1


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


# ---------------------------------------------------------------------------------------------
# the recipes of the paper


def _timing_overrides(cell: TimingCell) -> dict:
    ov = {"scheduler.name": cell.policy, "scheduler.m": cell.m, "run.rounds": cell.rounds}
    if cell.policy == "lyapunov":  # uniform takes neither V nor lambda
        ov.update({"scheduler.V": cell.V, "scheduler.lam": cell.lam})
    return ov


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
