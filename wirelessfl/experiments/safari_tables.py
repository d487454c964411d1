"""Spec 003 Tables 1-3 (the paper's MNIST setting) on Fashion-MNIST, through the simulator's sweeps.

The base scenario is ``scenarios/studies/safari_tables.toml``: logistic regression, M = 10 clients
with p classes each (``learning.partition = "classes_per_device"``), s clients excluded forever
(``devices.excluded_count``), m = 5 sampled without replacement per client round, one local epoch,
R = 150 rounds, plain averaging. Three sweeps over it share one folder (runs are found by key, so an
interrupted call resumes and a call with more seeds adds only the missing runs):

* Table 1: FedAvg over p in {10, 5, 2, 1} x s in {0, 2, 4};
* Table 2: SAFARI (q = 0.8, n_T = 1000, the largest set) over the same grid, minus FedAvg;
* Table 3: SAFARI at s = 4 with n_T in {50, 100, 500}, minus FedAvg (n_T = 1000 is Table 2's).

Run: ``python -m wirelessfl.experiments.safari_tables [--seeds k] [--p 1 2] [--s 4] [--report-only]``;
writes figures/safari_tables123.csv, .md and .png from every run found in the folder.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from ..config import load_scenario
from ..jsonio import read_json
from .sweep import expand, sweep

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "studies" / "safari_tables.toml"
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


def _parts(p_values, s_values) -> list[tuple[list[str], dict]]:
    """(overrides, grid) of the three sweeps."""
    ps, ss = list(p_values), list(s_values)
    parts = [(['learning.algorithm="fedavg"', "learning.aux_samples=0"],
              {"learning.classes_per_device": ps, "devices.excluded_count": ss}),
             (['learning.algorithm="safari"', f"learning.aux_samples={AUX_MAX}"],
              {"learning.classes_per_device": ps, "devices.excluded_count": ss})]
    if 4 in ss:
        parts.append((['learning.algorithm="safari"', "devices.excluded_count=4", f"learning.aux_samples={AUX_MAX}"],
                      {"learning.classes_per_device": ps, "learning.aux_samples": list(AUX_VALUES)}))
    return parts


def run(out: Path, seeds: int, p_values=P_VALUES, s_values=S_VALUES) -> None:
    """Run (or resume) the sweeps serially: one process, one torch thread (run.threads = 1)."""
    base = load_scenario(SCENARIO)
    for overrides, grid in _parts(p_values, s_values):
        sweep(base.replace(*overrides), grid=grid, seeds=seeds, executor="serial", out_dir=out)


def collect(out: Path, seeds: int) -> pd.DataFrame:
    """One row per finished run of the full grid: algorithm, p, s, n_T, seed and its accuracies."""
    base = load_scenario(SCENARIO)
    rows = []
    for overrides, grid in _parts(P_VALUES, S_VALUES):
        _, members = expand(base.replace(*overrides), grid, seeds)
        for m in members:
            run_dir = out / "runs" / m.key
            if not (run_dir / "summary.json").exists():
                continue
            summary = read_json(run_dir / "summary.json")
            acc = pd.read_csv(run_dir / "evals.csv")["accuracy"].to_numpy()
            lc = m.scenario.learning
            rows.append({"algorithm": lc.algorithm, "p": lc.classes_per_device,
                         "s": m.scenario.devices.excluded_count, "n_T": lc.aux_samples, "seed": m.seed,
                         "final": 100 * acc[-1], "last5": 100 * acc[-5:].mean(),
                         "label_coverage": summary["label_coverage"],
                         "server_rounds": summary["server_rounds"], "key": m.key})
    return pd.DataFrame(rows).drop_duplicates("key")


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over seeds per (algorithm, p, s, n_T), with SAFARI's gain over FedAvg and the
    paper's numbers beside (the gain is paired: same seed, so the same partition and excluded set)."""
    g = runs.groupby(["algorithm", "p", "s", "n_T"])
    table = g[["final", "last5", "label_coverage"]].mean().add_suffix("_mean")
    table = table.join(g[["final", "last5"]].std(ddof=0).add_suffix("_std")).join(g.size().rename("seeds"))
    table = table.reset_index()
    fed = runs[runs.algorithm == "fedavg"].set_index(["p", "s", "seed"])[["final", "last5"]]
    gains = []
    for _, r in table.iterrows():
        if r.algorithm == "fedavg":
            gains.append((np.nan, np.nan))
            continue
        mine = runs[(runs.algorithm == r.algorithm) & (runs.p == r.p) & (runs.s == r.s) & (runs.n_T == r.n_T)]
        d = [(x.final - fed.loc[(x.p, x.s, x.seed), "final"], x.last5 - fed.loc[(x.p, x.s, x.seed), "last5"])
             for x in mine.itertuples() if (x.p, x.s, x.seed) in fed.index]
        gains.append(tuple(np.mean(d, axis=0)) if d else (np.nan, np.nan))
    table["gain_final"], table["gain_last5"] = zip(*gains)
    table["paper_mnist"] = [PAPER_T1.get((r.s, r.p)) if r.algorithm == "fedavg"
                            else PAPER_T8_SAFARI.get((r.s, r.p)) if r.n_T == AUX_MAX else np.nan
                            for r in table.itertuples()]
    table["paper_mnist_gain"] = [np.nan if r.algorithm == "fedavg"
                                 else (PAPER_T2.get((r.s, r.p), 0.0) if r.n_T == AUX_MAX
                                       else PAPER_T3.get((r.n_T, r.p), 0.0 if r.s == 4 else np.nan))
                                 for r in table.itertuples()]
    return table


def _cell(table, alg, p, s, n_T, col) -> str:
    row = table[(table.algorithm == alg) & (table.p == p) & (table.s == s) & (table.n_T == n_T)]
    if row.empty:
        return "not run"
    r = row.iloc[0]
    if col == "acc":
        std = f" ± {r.last5_std:.1f}" if r.seeds > 1 else ""
        return f"{r.final_mean:.1f} / {r.last5_mean:.1f}{std}"
    return f"{r.gain_final:+.1f} / {r.gain_last5:+.1f}"


def _paper(value) -> str:
    return "–" if value == 0.0 else f"{value:.2f}"


def markdown(table: pd.DataFrame) -> str:
    """The three tables: ours (final / mean of the last 5 evaluations) with the paper's MNIST value."""
    counts = sorted(set(table.seeds)) if len(table) else [0]
    seeds = "/".join(str(int(c)) for c in counts)
    head = "| s | " + " | ".join(f"p = {p}: ours | paper" for p in P_VALUES) + " |"
    rule = "|---|" + "---|---|" * len(P_VALUES)
    out = [f"Accuracies in %; ours = final accuracy / mean of the last 5 evaluations (every 10 rounds), "
           f"mean over {seeds} seed(s) per cell; ± is the std over seeds of the last-5 mean, shown where a cell "
           "has more than one seed. Paper = MNIST.", "",
           "**Table 1: FedAvg accuracy**", "", head, rule]
    for s in S_VALUES:
        out.append(f"| {s} | " + " | ".join(f"{_cell(table, 'fedavg', p, s, 0, 'acc')} | {PAPER_T1[(s, p)]:.2f}"
                                            for p in P_VALUES) + " |")
    out += ["", f"**Table 2: SAFARI (q = 0.8, n_T = {AUX_MAX}) minus FedAvg, points** (paper: \"–\" = "
            "within 2 points)", "", head, rule]
    for s in S_VALUES:
        out.append(f"| {s} | " + " | ".join(f"{_cell(table, 'safari', p, s, AUX_MAX, 'gain')} | "
                                            f"{_paper(PAPER_T2.get((s, p), 0.0))}" for p in P_VALUES) + " |")
    out += ["", f"**SAFARI accuracy (n_T = {AUX_MAX})**, paper = MNIST Table 8 (5-seed means)", "", head, rule]
    for s in S_VALUES:
        out.append(f"| {s} | " + " | ".join(f"{_cell(table, 'safari', p, s, AUX_MAX, 'acc')} | "
                                            f"{PAPER_T8_SAFARI[(s, p)]:.2f}" for p in P_VALUES) + " |")
    out += ["", "**Table 3: SAFARI minus FedAvg at s = 4 against n_T, points**", "",
            head.replace("| s |", "| n_T |"), rule]
    for n in (*AUX_VALUES, AUX_MAX):
        out.append(f"| {n} | " + " | ".join(f"{_cell(table, 'safari', p, 4, n, 'gain')} | "
                                            f"{_paper(PAPER_T3.get((n, p), 0.0))}" for p in P_VALUES) + " |")
    return "\n".join(out) + "\n"


def plot(table: pd.DataFrame, path: Path) -> None:
    """(a) accuracy against s at p = 1 and 2, FedAvg and SAFARI, paper's MNIST dashed;
    (b) SAFARI's gain against n_T at s = 4."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for p, color in ((1, "C3"), (2, "C0")):
        for alg, n_T, marker in (("fedavg", 0, "o"), ("safari", AUX_MAX, "s")):
            t = table[(table.algorithm == alg) & (table.p == p) & (table.n_T == n_T)].sort_values("s")
            if len(t):
                a.errorbar(t.s, t.last5_mean, yerr=t.last5_std if t.seeds.min() > 1 else None, color=color,
                           marker=marker, label=f"{'FedAvg' if alg == 'fedavg' else 'SAFARI'} p={p} (FMNIST)")
        paper = [PAPER_T1[(s, p)] for s in S_VALUES]
        a.plot(S_VALUES, paper, color=color, ls="--", marker="o", mfc="none", alpha=0.6,
               label=f"FedAvg p={p} (paper, MNIST)")
        a.plot(S_VALUES, [PAPER_T8_SAFARI[(s, p)] for s in S_VALUES], color=color, ls=":", marker="s",
               mfc="none", alpha=0.6, label=f"SAFARI p={p} (paper, MNIST)")
        t = table[(table.algorithm == "safari") & (table.p == p) & (table.s == 4)].sort_values("n_T")
        if len(t):
            b.plot(t.n_T, t.gain_last5, color=color, marker="s", label=f"p={p} (FMNIST, last 5)")
        b.plot([50, 100, 500, 1000], [PAPER_T3[(n, p)] for n in (50, 100, 500, 1000)], color=color, ls="--",
               marker="o", mfc="none", alpha=0.6, label=f"p={p} (paper, MNIST)")
    a.set(xlabel="excluded clients s (of M = 10)", ylabel="test accuracy % (mean of last 5 evals)",
          title="FedAvg falls with s at p = 1; SAFARI recovers", xticks=S_VALUES)
    b.set(xscale="log", xlabel="auxiliary set size n_T", ylabel="SAFARI - FedAvg (points)",
          title="gain against n_T at s = 4")
    a.set_ylim(30, 95)  # room for the legend below the curves
    a.legend(fontsize=6.5, ncol=2, loc="lower left")
    b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--p", type=int, nargs="+", default=list(P_VALUES), help="subset of p to run now")
    ap.add_argument("--s", type=int, nargs="+", default=list(S_VALUES), help="subset of s to run now")
    ap.add_argument("--out", default="runs/safari_tables", help="sweep folder (resumable)")
    ap.add_argument("--figures", default="figures")
    ap.add_argument("--report-only", action="store_true", help="only write the tables from finished runs")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if not args.report_only:
        run(out, args.seeds, args.p, args.s)
    runs = collect(out, args.seeds)
    if runs.empty:
        print("no finished runs")
        return
    table = summarise(runs)
    fig_dir = Path(args.figures)
    fig_dir.mkdir(parents=True, exist_ok=True)
    table.to_csv(fig_dir / "safari_tables123.csv", index=False)
    text = ("# SAFARI Tables 1-3 (MNIST setting) on Fashion-MNIST\n\nGenerated by "
            "`python -m wirelessfl.experiments.safari_tables`; see figures/README_safari_fmnist.md.\n\n"
            + markdown(table))
    (fig_dir / "safari_tables123.md").write_text(text)
    plot(table, fig_dir / "safari_tables123.png")
    print(text)


if __name__ == "__main__":
    main()
