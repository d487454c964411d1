"""Reproduction of Fallah, Mokhtari, Ozdaglar, "Personalized Federated Learning: A Meta-Learning
Approach" (Per-FedAvg, docs/papers/perfedavg.md): its Table 1 protocol, FedAvg at equal local
computation, and the same methods over a wireless uplink.

Every run is a scenario run by the simulator. The Table 1 recipes run variants of the packaged
``studies/perfedavg_table1`` scenario: n = 50 devices in Per-FedAvg's 10 groups (its Table 2 layout,
each device with its own test split of the same class layout), the MLP 80-60 with ELU, r = 0.2 (10
devices a round uniformly without replacement, so the 1/(N q) weights are the plain average), one
variant per (tau, alpha, layout) setting and method (FedAvg + one-step update, Per-FedAvg FO and HF).
The wireless recipe runs the variants of ``studies/perfedavg_wireless`` (Lyapunov scheduler, TDMA
uplink, the same simulated-time budget for every method).

One module per paper (above the 500 lines the project aims for): its recipes, the data they collect
and the reports drawn from it are read together against the paper.

A recipe's data is one row per evaluation of each run: the personalised accuracy (every device
takes one SGD step of size alpha on 40 of its own training samples and is tested on its own test
split; the unweighted mean over devices), its spread over the devices, the unadapted model's mean
accuracy on the devices' splits ("before adaptation") and the global test accuracy, with the run's
setting and run-level numbers beside it. The tables are read at each run's last evaluation: mean
over seeds ± the population std over seeds, the spread every paper's report gives (recipes.SPREAD;
the 95 % half-width of docs/papers/perfedavg.md, "Where the simulator departs from the paper", is
1.96 sqrt(n / (n - 1)) / sqrt(n) times it: 1.39 times for 3 seeds).

Scales: "cpu" is Fashion-MNIST for K = 300 rounds (MNIST and CIFAR-10 are not installed here; the
paper's MNIST rows are the closest comparison); "paper" is the paper's Table 1 as printed (MNIST
a = 196 and CIFAR-10 a = 68, K = 1000; the datasets must be installed); "tiny" is 10 devices and a
few rounds, for tests only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..learning.perfedavg import GRADIENT_EVALUATIONS
from .recipes import (SPREAD, Recipe, Report, Runs, figure_caption, last_rows, packaged, pyplot, run_summary, save_figure,
                      seed_std, wireless_figure, with_spread)

# ---------------------------------------------------------------------------------------------
# the paper's numbers

PAPER_TABLE1 = {
    # (dataset, tau, alpha, diff. hetero.): FedAvg + update, Per-FedAvg (FO), Per-FedAvg (HF), in %
    ("MNIST", 10, 0.01, False): ("75.96 ± 0.02", "78.00 ± 0.02", "79.85 ± 0.02"),
    ("MNIST", 4, 0.01, False): ("60.18 ± 0.02", "64.55 ± 0.02", "70.94 ± 0.03"),
    ("CIFAR-10", 10, 0.001, False): ("40.49 ± 0.07", "46.98 ± 0.1", "50.44 ± 0.15"),
    ("CIFAR-10", 4, 0.001, False): ("38.38 ± 0.07", "34.04 ± 0.08", "43.73 ± 0.11"),
    ("CIFAR-10", 4, 0.01, False): ("35.97 ± 0.17", "25.32 ± 0.18", "46.32 ± 0.12"),
    ("CIFAR-10", 4, 0.01, True): ("58.59 ± 0.11", "37.71 ± 0.23", "71.25 ± 0.05"),
}
"""Table 1 of the paper (K = 1000, beta = 0.001)."""

METHODS = ("fedavg", "perfedavg_fo", "perfedavg_hf")
LABELS = {"fedavg": "FedAvg + update", "perfedavg_fo": "Per-FedAvg (FO)", "perfedavg_hf": "Per-FedAvg (HF)"}
COLOURS = {"fedavg": "C0", "perfedavg_fo": "C1", "perfedavg_hf": "C2"}
PAPER_DATASET = {"fashion_mnist": "MNIST", "mnist": "MNIST", "cifar10": "CIFAR-10"}
"""Whose paper row a dataset is compared with (Fashion-MNIST has MNIST's shape and size)."""


def steps_factor(method: str) -> int:
    """Gradient evaluations of a local step relative to a FedAvg step (1, 2 for FO, 4 for HF)."""
    return 1 if method == "fedavg" else GRADIENT_EVALUATIONS[method.split("_")[1]]


# ---------------------------------------------------------------------------------------------
# settings and scales


@dataclass(frozen=True)
class Setting:
    """One row of Table 1: dataset, the layout's unit a (type-A devices hold 5a samples), tau, alpha
    and the layout (``single``: the paper's "diff. hetero.", type-B devices hold one class)."""

    dataset: str
    a: int
    tau: int
    alpha: float
    single: bool = False

    @property
    def name(self) -> str:
        """A stable name (with the method, the run's variant name, so part of the cache key)."""
        return f"{self.dataset}-a{self.a}-tau{self.tau}-alpha{self.alpha:g}{'-single' if self.single else ''}"

    @property
    def label(self) -> str:
        """The row label of the tables."""
        return f"{self.dataset}{' diff. hetero.' if self.single else ''}"

    def variant(self, method: str) -> str:
        """The variant name of this setting's run of ``method``."""
        return f"{self.name}-{method}"

    def overrides(self, method: str) -> dict:
        """Dotted overrides of studies/perfedavg_table1 for this setting's run of ``method``."""
        return {"learning.dataset": self.dataset, "learning.samples_per_device": 5 * self.a,
                "learning.partition": "perfedavg_groups_single" if self.single else "perfedavg_groups",
                "learning.local_steps": self.tau, "learning.per_alpha": self.alpha, "learning.algorithm": method}

    def paper(self) -> tuple[str, str, str] | None:
        """The paper's (FedAvg, FO, HF) numbers for this setting: its row for the dataset ours stands
        for, else its row of the other dataset, named (the diff. hetero. row exists for CIFAR-10 only);
        None where it has no such row."""
        own = PAPER_DATASET[self.dataset]
        for dataset in (own, *sorted(set(PAPER_DATASET.values()) - {own})):
            row = PAPER_TABLE1.get((dataset, self.tau, self.alpha, self.single))
            if row is not None:
                return row if dataset == own else tuple(f"{dataset}: {value}" for value in row)
        return None


@dataclass(frozen=True)
class Scale:
    """Table 1 at one scale: base overrides, the settings, rounds and the evaluation interval."""

    overrides: tuple[str, ...]
    settings: tuple[Setting, ...]
    rounds: int
    eval_every: int
    text: str


_FMNIST = "fashion_mnist"
TABLE1_SCALES = {
    # Fashion-MNIST; tau = 4 at alpha = 0.1 (FO's collapse at a large alpha, which the paper shows
    # on CIFAR-10) and the diff. hetero. layout are rows the paper runs on CIFAR-10 only
    "cpu": Scale((), (Setting(_FMNIST, 196, 10, 0.01), Setting(_FMNIST, 196, 4, 0.01), Setting(_FMNIST, 196, 4, 0.1),
                      Setting(_FMNIST, 196, 4, 0.01, single=True)), rounds=300, eval_every=25,
                 text="Fashion-MNIST (the paper's numbers in brackets are MNIST's where it has the same tau and "
                      "alpha), 50 devices in 10 groups (a = 196), MLP 80-60 ELU, r = 0.2, D = D' = D'' = 40, "
                      "beta = 0.001"),
    "paper": Scale((), (Setting("mnist", 196, 10, 0.01), Setting("mnist", 196, 4, 0.01),
                        Setting("cifar10", 68, 10, 0.001), Setting("cifar10", 68, 4, 0.001),
                        Setting("cifar10", 68, 4, 0.01), Setting("cifar10", 68, 4, 0.01, single=True)),
                   rounds=1000, eval_every=50,
                   text="the paper's Table 1: MNIST (a = 196) and CIFAR-10 (a = 68), 50 devices in 10 groups, "
                        "MLP 80-60 ELU, r = 0.2, D = D' = D'' = 40, beta = 0.001"),
    "tiny": Scale(("devices.count=10", "scheduler.m=2", "learning.batch_size=8", "learning.lr=0.05",
                   "learning.eval_train_samples=100"),
                  (Setting(_FMNIST, 8, 2, 0.01), Setting(_FMNIST, 8, 1, 0.1, single=True)), rounds=3, eval_every=1,
                  text="10 devices in 10 groups (a = 8), 2 a round, batches of 8, beta = 0.05 (test scale)"),
}
"""Overrides of studies/perfedavg_table1 and the settings of Table 1, per scale."""

EQUAL_COMPUTE_FACTOR = 4
"""FedAvg runs 4x the rounds of Table 1 (HF's local computation per round is 4x FedAvg's)."""

WIRELESS_SCALES = {
    "cpu": (),
    "paper": (),  # the wireless study has no counterpart in the paper: its own setup
    "tiny": ("devices.count=10", "learning.samples_per_device=40", "scheduler.m=3", "learning.local_steps=2",
             "learning.batch_size=8", "learning.eval_train_samples=100", "run.time_budget_s=12",
             "run.eval_every_s=4"),
}
"""Overrides of studies/perfedavg_wireless per scale."""


def _table1_base(scale: str, overrides: Sequence[str]):
    """studies/perfedavg_table1 at a scale, then the user's overrides."""
    s = TABLE1_SCALES[scale]
    return packaged("studies/perfedavg_table1", [*s.overrides, f"run.rounds={s.rounds}",
                                                 f"run.eval_every_rounds={s.eval_every}", *overrides])


def equal_compute_variant(setting: Setting, scale: str) -> str:
    """The variant name of the long FedAvg run of the equal-computation comparison."""
    return f"{setting.variant('fedavg')}-r{EQUAL_COMPUTE_FACTOR * TABLE1_SCALES[scale].rounds}"


def table1_variants(scale: str) -> dict[str, dict]:
    """Every (setting, method) run of Table 1 at a scale."""
    return {st.variant(m): st.overrides(m) for st in TABLE1_SCALES[scale].settings for m in METHODS}


def equal_compute_variants(scale: str) -> dict[str, dict]:
    """The first setting's FO and HF runs (Table 1's own) and FedAvg run for 4x the rounds."""
    s = TABLE1_SCALES[scale]
    first = s.settings[0]
    rounds = EQUAL_COMPUTE_FACTOR * s.rounds
    # evaluated every 2 x Table 1's interval, so at FO's (2x) and HF's (4x) local computation too
    return {**{first.variant(m): first.overrides(m) for m in ("perfedavg_fo", "perfedavg_hf")},
            equal_compute_variant(first, scale): {**first.overrides("fedavg"), "run.rounds": rounds,
                                                  "run.eval_every_rounds": 2 * s.eval_every}}


def table1_families(scale: str, overrides: Sequence[str]):
    """Table 1's runs as variants of studies/perfedavg_table1 (one family, shared with equal_compute)."""
    return {f"perfedavg/table1/{scale}": (_table1_base(scale, overrides), table1_variants(scale))}


def equal_compute_families(scale: str, overrides: Sequence[str]):
    """The equal-computation runs, in Table 1's family: its FO and HF runs are run once for both."""
    return {f"perfedavg/table1/{scale}": (_table1_base(scale, overrides), equal_compute_variants(scale))}


def wireless_families(scale: str, overrides: Sequence[str]):
    """The wireless study's variants (one method each) on studies/perfedavg_wireless."""
    base = packaged("studies/perfedavg_wireless", [*WIRELESS_SCALES[scale], *overrides])
    return {f"perfedavg/wireless/{scale}": (base, {m: {"learning.algorithm": m} for m in METHODS})}


# ---------------------------------------------------------------------------------------------
# what is kept from the runs

EVAL_COLUMNS = ("round", "time_s", "personal_accuracy", "personal_accuracy_std", "local_accuracy", "accuracy")




def run_rows(variant: str, seed: int, run_dir: Path) -> pd.DataFrame:
    """Every evaluation of one run (EVAL_COLUMNS, its index in the run) with the run's totals beside it:
    rounds, simulated time and its split into uplink and computation, wall time."""
    evals = pd.read_csv(run_dir / "evals.csv")
    frame = evals[list(EVAL_COLUMNS)].copy()
    frame.insert(0, "eval_index", np.arange(len(frame)))
    frame.insert(0, "seed", seed)
    frame.insert(0, "variant", variant)
    summary = run_summary(run_dir)
    for key in ("rounds", "sim_time_s", "total_comm_s", "total_comp_s"):
        frame[key] = summary.get(key, math.nan)
    frame["wall_s"] = summary.get("wall_time_s", math.nan)
    return frame


def _concat(frames: list[pd.DataFrame], columns: Sequence[str]) -> pd.DataFrame:
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(columns))


def _setting_rows(runs: Runs, setting: Setting, method: str, variant: str) -> list[pd.DataFrame]:
    """The evaluations of a setting's runs of one method, with the setting and the local computation
    (rounds x tau x the method's gradient evaluations per step, in FedAvg steps per device)."""
    frames = []
    for seed, run_dir in runs.seeds(variant):
        frame = run_rows(variant, seed, run_dir)
        frame.insert(2, "setting", setting.name)
        frame.insert(3, "method", method)
        for key, value in (("dataset", setting.dataset), ("a", setting.a), ("tau", setting.tau),
                           ("alpha", setting.alpha), ("diff_hetero", setting.single)):
            frame[key] = value
        frame["fedavg_steps"] = frame["round"] * setting.tau * steps_factor(method)
        frames.append(frame)
    return frames


SETTING_COLUMNS = ("variant", "seed", "setting", "method", "eval_index", *EVAL_COLUMNS, "rounds", "sim_time_s",
                   "total_comm_s", "total_comp_s", "wall_s", "dataset", "a", "tau", "alpha", "diff_hetero",
                   "fedavg_steps")


def collect_table1(runs: Runs, scale: str) -> pd.DataFrame:
    """Table 1's data: every evaluation of each (setting, method) run."""
    frames = [f for st in TABLE1_SCALES[scale].settings for m in METHODS
              for f in _setting_rows(runs, st, m, st.variant(m))]
    return _concat(frames, SETTING_COLUMNS)


def collect_equal_compute(runs: Runs, scale: str) -> pd.DataFrame:
    """The equal-computation data: the first setting's FO and HF runs and FedAvg's long run."""
    first = TABLE1_SCALES[scale].settings[0]
    frames = [*(f for m in ("perfedavg_fo", "perfedavg_hf") for f in _setting_rows(runs, first, m, first.variant(m))),
              *_setting_rows(runs, first, "fedavg", equal_compute_variant(first, scale))]
    return _concat(frames, SETTING_COLUMNS)


WIRELESS_COLUMNS = ("variant", "seed", "eval_index", *EVAL_COLUMNS, "rounds", "sim_time_s", "total_comm_s",
                    "total_comp_s", "wall_s")


def collect_wireless(runs: Runs, scale: str) -> pd.DataFrame:
    """The wireless study's data: every evaluation of each run with the run's totals beside it (only
    evals.csv and summary.json are read, so the committed run folders convert as they are)."""
    return _concat([run_rows(m, seed, d) for m in METHODS for seed, d in runs.seeds(m)], WIRELESS_COLUMNS)


# ---------------------------------------------------------------------------------------------
# numbers


def final_rows(data: pd.DataFrame) -> pd.DataFrame:
    """Each run's last evaluation (the numbers the tables report)."""
    return last_rows(data, "eval_index")


def seed_stats(values: Sequence[float]) -> tuple[float, float]:
    """(mean, std over seeds as recipes.SPREAD says) in %, the std NaN for one seed."""
    v = 100 * np.asarray(values, dtype=float)
    std = seed_std(v)
    return float(v.mean()) if v.size else math.nan, std


def table1_rows(data: pd.DataFrame, scale: str) -> list[dict]:
    """Per setting: each method's final personalised accuracy over seeds (mean, population std), spread over
    devices and accuracy before adaptation, the gaps to FedAvg, the seeds in which HF > FO > FedAvg,
    and the paper's numbers."""
    final = final_rows(data)
    rows = []
    for st in TABLE1_SCALES[scale].settings:
        of = final[final["setting"] == st.name] if len(final) else final
        if of.empty:
            continue
        row = {"setting": st.name, "dataset": st.dataset, "tau": st.tau, "alpha": st.alpha, "diff_hetero": st.single,
               "rounds": int(of["round"].max()), "seeds": int(of["seed"].nunique())}
        paper = st.paper()
        by_seed = {}
        for k, m in enumerate(METHODS):
            runs = of[of["method"] == m]
            row[f"{m}_mean"], row[f"{m}_std"] = seed_stats(runs["personal_accuracy"])
            row[f"{m}_device_std"] = float(100 * runs["personal_accuracy_std"].mean())
            row[f"{m}_before_adaptation"] = float(100 * runs["local_accuracy"].mean())
            row[f"{m}_paper"] = paper[k] if paper else "n/a"
            by_seed[m] = runs.set_index("seed")["personal_accuracy"]
        for m in METHODS[1:]:
            row[f"{m}_minus_fedavg"] = row[f"{m}_mean"] - row["fedavg_mean"]
        seeds = by_seed["fedavg"].index.intersection(by_seed["perfedavg_fo"].index).intersection(
            by_seed["perfedavg_hf"].index)
        ordered = (by_seed["perfedavg_hf"][seeds] > by_seed["perfedavg_fo"][seeds]) & \
                  (by_seed["perfedavg_fo"][seeds] > by_seed["fedavg"][seeds])
        row["hf_fo_fedavg_ordered_seeds"] = f"{int(ordered.sum())}/{len(seeds)}"
        rows.append(row)
    return rows


def table1_markdown(rows: list[dict], scale: str) -> list[str]:
    """Table 1 as the paper prints it (ours, the paper's in brackets), then the spread over devices
    and the accuracy before adaptation."""
    lines = [f"Personalised accuracy (%) after one local step, {TABLE1_SCALES[scale].text}; mean over seeds ± "
             f"{SPREAD} at each run's last evaluation; ours (paper).", "",
             "| setting | tau | alpha | K | seeds | FedAvg + update | Per-FedAvg (FO) | Per-FedAvg (HF) | "
             "HF > FO > FedAvg (seeds) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = []
        for m in METHODS:
            cells.append(f"{_cell(r, m)} ({r[f'{m}_paper']})")
        lines.append(f"| {_label(r)} | {r['tau']} | {r['alpha']:g} | {r['rounds']} | {r['seeds']} | "
                     + " | ".join(cells) + f" | {r['hf_fo_fedavg_ordered_seeds']} |")
    lines += ["", "Spread over the devices (std of their personalised accuracies, mean over seeds) and the unadapted "
              "model's mean accuracy on the devices' test splits, in %:", "",
              "| setting | tau | alpha | " + " | ".join(f"{LABELS[m]}: device std / before adaptation"
                                                       for m in METHODS) + " |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {_label(r)} | {r['tau']} | {r['alpha']:g} | " + " | ".join(
            f"{r[f'{m}_device_std']:.1f} / {r[f'{m}_before_adaptation']:.2f}" for m in METHODS) + " |")
    return lines


def _label(row: dict) -> str:
    return f"{row['dataset']}{' diff. hetero.' if row['diff_hetero'] else ''}"


def seed_mean_curve(runs: pd.DataFrame, x: str) -> pd.DataFrame:
    """The seed-averaged personalised accuracy (%) against ``x``, evaluations matched by their index in
    the run and cut to the shortest run (Table 1 runs of a variant evaluate at the same rounds; the
    wireless runs evaluate every eval_every_s, at rounds that differ between seeds)."""
    shortest = int(runs.groupby("seed")["eval_index"].max().min())
    kept = runs[runs["eval_index"] <= shortest]
    curve = kept.groupby("eval_index")[[x, "personal_accuracy"]].mean().reset_index()
    curve["personal_accuracy"] *= 100
    return curve


# ---------------------------------------------------------------------------------------------
# reports


def table1_figure(data: pd.DataFrame, scale: str, path: Path) -> Path:
    """One column per setting: personalised accuracy against rounds (top) and against local computation
    per participating device in FedAvg steps (bottom: rounds x tau x 1, 2 or 4); mean over seeds."""
    plt = pyplot()
    settings = [st for st in TABLE1_SCALES[scale].settings if (data["setting"] == st.name).any()]
    fig, axes = plt.subplots(2, max(len(settings), 1), figsize=(4.2 * max(len(settings), 1), 7.0), squeeze=False)
    for col, st in enumerate(settings):
        for m in METHODS:
            runs = data[(data["setting"] == st.name) & (data["method"] == m)]
            if runs.empty:
                continue
            label = f"{LABELS[m]} ({runs['seed'].nunique()} seeds)"
            for row, x in enumerate(("round", "fedavg_steps")):
                curve = seed_mean_curve(runs, x)
                axes[row][col].plot(curve[x], curve["personal_accuracy"], color=COLOURS[m], label=label)
        axes[0][col].set_title(f"{st.label}, tau = {st.tau}, alpha = {st.alpha:g}", fontsize=9)
        axes[0][col].set_xlabel("round")
        axes[1][col].set_xlabel("local computation per device (FedAvg steps)")
        for row in (0, 1):
            axes[row][col].set_ylabel("personalised accuracy (%)")
            axes[row][col].grid(alpha=0.3)
        axes[0][col].legend(fontsize=7)
    fig.suptitle("Per-FedAvg, Table 1 protocol (mean over seeds)", fontsize=10)
    return save_figure(fig, path, dpi=110, caption=figure_caption(scale, data))


TABLE1_NOTES = [
    "Paper (MNIST rows): HF > FO > FedAvg + update in personalised accuracy, and fewer local steps "
    "(tau = 10 -> 4) lower all three; on CIFAR-10 FO falls below FedAvg + update at alpha = 0.01 (its "
    "first-order approximation drops the Hessian term, whose weight grows with alpha) and the diff. hetero. "
    "layout raises every method.",
]


def report_table1(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """Table 1: the table beside the paper's, the figure and the numbers, from the data alone."""
    rows = table1_rows(data, scale)
    path = table1_figure(data, scale, figures / "perfedavg_table1.png")
    md = [*table1_markdown(rows, scale), "", *TABLE1_NOTES, "",
          "![personalised accuracy against rounds and local computation](perfedavg_table1.png)"]
    return Report("table1", [path], {"rows": rows}, "\n".join(md))


def equal_compute_rows(data: pd.DataFrame, scale: str) -> list[dict]:
    """Per Per-FedAvg variant: its final personalised accuracy and its local computation budget, and
    FedAvg's personalised accuracy at the same computation (each seed's run interpolated between its
    evaluations, NaN beyond its last; mean and std over seeds)."""
    fedavg = data[data["method"] == "fedavg"]
    if fedavg.empty:
        return []
    rows = []
    for m in ("perfedavg_fo", "perfedavg_hf"):
        runs = data[data["method"] == m]
        if runs.empty:
            continue
        final = final_rows(runs)
        steps = float(final["fedavg_steps"].max())
        at = [np.interp(steps, run["fedavg_steps"], run["personal_accuracy"], right=math.nan)
              for _, run in fedavg.sort_values("eval_index").groupby("seed")]
        (acc, acc_std), (ref, ref_std) = seed_stats(final["personal_accuracy"]), seed_stats(at)
        rows.append({"method": m, "rounds": int(final["round"].max()), "fedavg_steps": steps,
                     "seeds": int(final["seed"].nunique()), "personal_mean": acc, "personal_std": acc_std,
                     "fedavg_same_steps_mean": ref, "fedavg_same_steps_std": ref_std,
                     "fedavg_rounds_same_steps": steps / float(final["tau"].iloc[0])})
    return rows


def report_equal_compute(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """FedAvg + update at the local computation of Per-FedAvg's runs: table, figure, numbers."""
    rows = equal_compute_rows(data, scale)
    first = TABLE1_SCALES[scale].settings[0]
    lines = [f"{first.label}, tau = {first.tau}, alpha = {first.alpha:g}: Per-FedAvg's personalised accuracy "
             "(%) at the end of its Table 1 runs against FedAvg + update run for "
             f"{EQUAL_COMPUTE_FACTOR}x the rounds and read at the same local computation per participating device "
             f"(FedAvg steps: rounds x tau x 1, 2 or 4; mean over seeds ± {SPREAD}).", "",
             "| method | rounds | FedAvg steps per device | seeds | personalised acc. | FedAvg + update at the "
             "same steps (its rounds) |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {LABELS[r['method']]} | {r['rounds']} | {r['fedavg_steps']:.0f} | {r['seeds']} | "
                     f"{_cell(r, 'personal')} | {_cell(r, 'fedavg_same_steps')} "
                     f"({r['fedavg_rounds_same_steps']:.0f}) |")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for m in METHODS:
        runs = data[data["method"] == m]
        if len(runs):
            curve = seed_mean_curve(runs, "fedavg_steps")
            ax.plot(curve["fedavg_steps"], curve["personal_accuracy"], color=COLOURS[m],
                    label=f"{LABELS[m]} ({runs['seed'].nunique()} seeds, {int(runs['round'].max())} rounds)")
    ax.set_xlabel("local computation per device (FedAvg steps)")
    ax.set_ylabel("personalised accuracy (%)")
    ax.set_title("Equal local computation", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    path = save_figure(fig, figures / "perfedavg_equal_compute.png", dpi=110, caption=figure_caption(scale, data))
    md = [*lines, "", "Paper (Fig. 1a, MNIST): at equal runtime HF reaches a higher personalised accuracy than "
          "FedAvg + update.", "", "![personalised accuracy against local computation](perfedavg_equal_compute.png)"]
    return Report("equal_compute", [path], {"rows": rows}, "\n".join(md))


def wireless_rows(data: pd.DataFrame) -> list[dict]:
    """Per method at the end of the simulated-time budget, over seeds: rounds run, uplink and computation
    time, personalised accuracy (final and mean of the last five evaluations), global model accuracy and
    accuracy before adaptation (mean and std over seeds, in %)."""
    final = final_rows(data)
    rows = []
    for m in METHODS:
        runs = data[data["variant"] == m]
        last = final[final["variant"] == m] if len(final) else final
        if runs.empty:
            continue
        # the mean of each run's last five evaluations
        tail = runs[runs["eval_index"] > runs.groupby("seed")["eval_index"].transform("max") - 5]
        last5 = tail.groupby("seed")["personal_accuracy"].mean()
        row = {"method": m, "seeds": int(last["seed"].nunique()), "rounds": float(last["rounds"].mean()),
               "comm_s": float(last["total_comm_s"].mean()), "comp_s": float(last["total_comp_s"].mean())}
        for key, values in (("personal", last["personal_accuracy"]), ("personal_last5", last5),
                            ("global", last["accuracy"]), ("before_adaptation", last["local_accuracy"])):
            row[f"{key}_mean"], row[f"{key}_std"] = seed_stats(values)
        rows.append(row)
    # the headline: the personalised accuracy gained over FedAvg + update in the same time, paired by seed
    by_seed = final.pivot_table(index="seed", columns="variant", values="personal_accuracy") if len(final) else None
    for r in rows:  # rows exist only where runs do, so by_seed is set here
        gain = by_seed[r["method"]] - by_seed.get("fedavg", math.nan)
        r["personal_minus_fedavg_mean"], r["personal_minus_fedavg_std"] = seed_stats(gain.dropna())
    return rows


def _cell(row: dict, key: str, sign: str = "") -> str:
    """"mean ± std" of ``key`` (stored as key_mean and key_std); no ± for one seed."""
    return with_spread(row[f"{key}_mean"], row[f"{key}_std"], f"{sign}.2f", ".2f")


def wireless_markdown(rows: list[dict], ends_s: tuple[float, float]) -> list[str]:
    """The wireless table: rounds in the budget and the accuracies at its end."""
    lines = [f"The same simulated-time budget for every method (the runs end at the first round past it: "
             f"{ends_s[0]:.0f} to {ends_s[1]:.0f} s); mean over seeds ± {SPREAD}, in %:", "",
             "| method | seeds | rounds in the budget | uplink / computation (s) | personalised acc. (final) | "
             "personalised acc. (last 5 evals) | global model acc. (final) | before adaptation (final) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {LABELS[r['method']]} | {r['seeds']} | {r['rounds']:.0f} | {r['comm_s']:.0f} / "
                     f"{r['comp_s']:.0f} | {_cell(r, 'personal')} | {_cell(r, 'personal_last5')} | "
                     f"{_cell(r, 'global')} | {_cell(r, 'before_adaptation')} |")
    gains = [f"{LABELS[r['method']]} {_cell(r, 'personal_minus_fedavg', sign='+')}" for r in rows
             if r["method"] != "fedavg"]
    if gains and not any(math.isnan(r["personal_minus_fedavg_mean"]) for r in rows):
        lines += ["", "Final personalised accuracy against FedAvg + update in the same seed (points): "
                  + ", ".join(gains) + "."]
    return lines


def _wireless_line(method: str, runs: pd.DataFrame) -> dict:
    """A method's colour, and its label with the seeds it has."""
    return {"color": COLOURS[method], "label": f"{LABELS[method]} ({runs['seed'].nunique()} seeds)"}


def report_wireless(data: pd.DataFrame, figures: Path, scale: str) -> Report:
    """The wireless study's report: table, figure and numbers, from the data alone."""
    rows = wireless_rows(data)
    ends = (float(data["sim_time_s"].min()), float(data["sim_time_s"].max())) if len(data) else (0.0, 0.0)
    path = wireless_figure(data, figures / "perfedavg_wireless.png", METHODS,
                           (("time_s", "personal_accuracy", "simulated time (s)", "personalised accuracy (%)"),
                            ("round", "personal_accuracy", "round", "personalised accuracy (%)")),
                           seed_mean_curve, _wireless_line,
                           "Per-FedAvg over a TDMA uplink, Lyapunov scheduler (mean over seeds)",
                           figure_caption(scale, data), figsize=(10, 4), title_size=10, dpi=110)
    md = [*wireless_markdown(rows, ends), "",
          "The paper has no wireless study. A Per-FedAvg round computes 2x (FO) or 4x (HF) as long as a FedAvg "
          "round, so within the same simulated time it runs fewer rounds.", "",
          "![personalised accuracy against simulated time and rounds](perfedavg_wireless.png)"]
    return Report("wireless", [path], {"rows": rows}, "\n".join(md))


# ---------------------------------------------------------------------------------------------
# the recipes of the paper

# CPU minutes of all runs of 3 seeds (one torch thread each). tiny: the CPU time of a process running
# the recipe alone (data loading included); cpu: the sum of the committed runs' wall times (serial, on
# two shared cores; equal_compute counts the Table 1 runs it shares).
RECIPES: list[Recipe] = [
    Recipe("perfedavg", "table1", "Table 1 protocol: Per-FedAvg (FO, HF) vs FedAvg + one-step update",
           ("perfedavg_table1.png",), table1_families, collect_table1, report_table1,
           {"tiny": 0.16, "cpu": 9.4}),
    Recipe("perfedavg", "equal_compute", "FedAvg + update at Per-FedAvg's local computation (4x the rounds)",
           ("perfedavg_equal_compute.png",), equal_compute_families, collect_equal_compute, report_equal_compute,
           {"tiny": 0.1, "cpu": 6.4}),
    Recipe("perfedavg", "wireless", "FedAvg, FO and HF over a TDMA uplink at equal simulated time",
           ("perfedavg_wireless.png",), wireless_families, collect_wireless, report_wireless,
           {"tiny": 0.09, "cpu": 16.9}),
]
