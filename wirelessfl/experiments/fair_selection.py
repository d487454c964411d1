"""Spec 000 reproduction at CPU scale: Random, Power-of-Choice, DivFL, SubTrunc and UnionFL on
non-iid Fashion-MNIST (the paper's Table I setting with Fashion-MNIST in place of MNIST), plus the
lambda (Table II) and window (Table III) studies.

Every run is a normal scenario run through the simulator (``simulate``): 100 devices holding 3
classes each (balanced split), kappa = 10 distinct devices per round, LeNet-5, E local SGD steps,
plain mean of the kappa updates; fairness metrics (per-device test accuracy on label-matched test
sets of 100 samples, client dissimilarity = std of those accuracies) at every evaluation. Seeds are
paired: seed s gives every method the same partition, initial model and selection stream.

Run: ``python -m wirelessfl.experiments.fair_selection [--rounds R] [--seeds k] [--workers w] [--out DIR]``;
writes DIR/fair_selection_table{1,2,3}.{csv,md}, DIR/fair_selection_runs.csv and DIR/fair_selection.png.
With ``--wireless`` it runs scenarios/studies/fair_selection_wireless.toml instead (the strategies
next to lyapunov and uniform on a heterogeneous TDMA uplink) and writes
DIR/fair_selection_wireless.{png,csv}.
"""
from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

# Paper (spec 000 sec. 5), MNIST columns: accuracy %, dissimilarity %.
PAPER_TABLE1 = {"random": ("82.99 ± 0.99", "9.16 ± 0.18"), "power_of_choice": ("82.42 ± 1.97", "8.59 ± 0.38"),
                "divfl": ("82.16 ± 0.91", "8.89 ± 0.59"), "subtrunc": ("83.72 ± 0.81", "7.96 ± 0.62"),
                "unionfl": ("83.57 ± 0.34", "8.59 ± 0.34")}
PAPER_TABLE2 = {0.01: ("82.18 ± 0.99", "8.90 ± 0.63"), 0.10: ("83.13 ± 1.04", "8.38 ± 0.56"),
                0.25: ("83.60 ± 0.78", "8.18 ± 0.55"), 0.50: ("83.76 ± 0.42", "8.14 ± 0.34"),
                0.75: ("83.94 ± 0.33", "8.07 ± 0.41"), 0.95: ("83.72 ± 0.81", "7.96 ± 0.62")}
PAPER_TABLE3 = {2: ("83.27 ± 0.54", "8.77 ± 0.35"), 5: ("83.57 ± 0.34", "8.59 ± 0.34"),
                10: ("83.74 ± 0.36", "8.52 ± 0.18")}
LABELS = {"random": "Random", "power_of_choice": "Power-of-Choice", "divfl": "DivFL",
          "subtrunc": "SubTrunc", "unionfl": "UnionFL"}


def base_config(rounds: int, local_steps: int, lr: float, probe_samples: int | None, eval_every: int,
                dataset: str = "fashion_mnist") -> dict:
    """The Table I setting as a scenario dict (scheduler.name and the studies' keys are set per run)."""
    return {
        "name": "fair_selection", "seed": 0,
        "run": {"rounds": rounds, "eval_every_rounds": eval_every, "record_devices": False},
        "devices": {"count": 100},
        "scheduler": {"name": "random", "kappa": 10, **({"fair_probe_samples": probe_samples}
                                                       if probe_samples else {})},
        "learning": {"dataset": dataset, "model": "lenet", "partition": "classes_per_device",
                     "classes_per_device": 3, "local_steps": local_steps, "batch_size": 32, "lr": lr,
                     "eval_train_samples": 2000, "fairness_metrics": True, "device_test_samples": 100},
    }


def _distinct_in_windows(selected: list[str], window: int = 5) -> float:
    """Mean number of distinct devices selected per window of ``window`` consecutive rounds."""
    sets = [set(s.split()) for s in selected]
    counts = [len(set().union(*sets[i:i + window])) for i in range(0, len(sets) - window + 1)]
    return float(np.mean(counts)) if counts else float("nan")


def run_one(job: tuple) -> dict:
    """One (table, label, seed, scheduler overrides) job; returns its headline numbers."""
    import torch

    from ..config import from_dict
    from .run import simulate

    table, label, seed, overrides, cfg = job
    torch.set_num_threads(1)
    cfg = {**cfg, "seed": seed, "scheduler": {**cfg["scheduler"], **overrides}}
    t0 = time.perf_counter()
    res = simulate(from_dict(cfg), progress=False)
    last = res.evals.iloc[-1]
    curve = res.evals[["round", "accuracy", "dissimilarity"]].to_dict("list")
    return {"table": table, "label": label, "seed": seed, "scheduler": overrides["name"],
            "accuracy": 100 * last["accuracy"], "device_acc_mean": 100 * last["device_acc_mean"],
            "dissimilarity": 100 * last["dissimilarity"], "pairwise_gap": 100 * last["pairwise_gap"],
            "device_acc_p10": 100 * last["device_acc_p10"], "train_loss": last["train_loss"],
            "distinct_per_5_rounds": _distinct_in_windows(list(res.rounds["selected"])),
            "selections": "|".join(res.rounds["selected"]), "wall_s": time.perf_counter() - t0,
            "curve": curve}


def _table(rows, key, paper, title, note) -> list[str]:
    import pandas as pd

    df = pd.DataFrame(rows)
    lines = [f"## {title}", "", note, "",
             "| " + key + " | ours: acc % | ours: dissim % | ours: worst-10% acc % | ours: train loss | "
             "distinct devices / 5 rounds | paper (MNIST): acc % | paper: dissim % |",
             "|---|---|---|---|---|---|---|---|"]
    out = []
    for label, g in df.groupby("label", sort=False):
        def ms(col, fmt=".2f"):
            return f"{g[col].mean():{fmt}} ± {g[col].std(ddof=0):{fmt}}"
        p = paper.get(label, ("–", "–"))
        lines.append(f"| {label} | {ms('accuracy')} | {ms('dissimilarity')} | {ms('device_acc_p10')} | "
                     f"{ms('train_loss', '.3f')} | {g['distinct_per_5_rounds'].mean():.1f} | {p[0]} | {p[1]} |")
        out.append({"label": label, "seeds": len(g), **{f"{c}_{s}": getattr(g[c], s)()
                    for c in ("accuracy", "dissimilarity", "device_acc_p10", "train_loss", "pairwise_gap")
                    for s in ("mean", "std")}, "distinct_per_5_rounds": g["distinct_per_5_rounds"].mean(),
                    "paper_accuracy": p[0], "paper_dissimilarity": p[1]})
    return lines, out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--dataset", default="fashion_mnist", choices=("fashion_mnist", "mnist", "cifar10"),
                    help="the paper's MNIST setting runs on Fashion-MNIST by default; cifar10 needs its files")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--local-steps", type=int, default=5)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--probe-samples", type=int, default=200,
                    help="local samples per device for the reported loss and gradient (0: all)")
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default="figures")
    ap.add_argument("--wireless", action="store_true", help="run the wireless study instead of the tables")
    ap.add_argument("--scenario", default="scenarios/studies/fair_selection_wireless.toml")
    ap.add_argument("--runs", default=None, help="--wireless: keep the run directories here")
    ap.add_argument("--phi", action="store_true", help="run Table IV only: SubTrunc with phi(x) = x")
    args = ap.parse_args(argv)
    if args.wireless:
        return wireless(args.scenario, Path(args.out), args.runs)
    cfg = base_config(args.rounds, args.local_steps, args.lr, args.probe_samples or None, args.eval_every,
                      args.dataset)
    if args.phi:
        return phi_study(cfg, args)
    jobs = []
    for seed in range(args.seeds):
        for name in PAPER_TABLE1:
            jobs.append(("I", name, seed, {"name": name}))
        # Table II: SubTrunc's lambda with distances divided by their maximum (the faithful scale makes
        # lambda b <= 1.05 negligible against the sum of n gradient distances, see the README)
        for lam in (0.25, 0.95):
            jobs.append(("II", f"normalized, lambda = {lam}", seed,
                         {"name": "subtrunc", "fair_lambda": lam, "fair_normalize_distances": True}))
        for w in (2, 10):
            jobs.append(("III", w, seed, {"name": "unionfl", "fair_window": w}))
    jobs = [(*j, cfg) for j in jobs]
    t0 = time.perf_counter()
    rows = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for row in pool.map(run_one, jobs):
            print(row["table"], row["label"], row["seed"], f"acc {row['accuracy']:.2f} dis "
                  f"{row['dissimilarity']:.2f} ({row['wall_s']:.0f}s)", flush=True)
            rows.append(row)
    total = time.perf_counter() - t0
    write_outputs(rows, args, Path(args.out), total)


def write_outputs(rows: list[dict], args, out: Path, total_s: float) -> None:
    """Tables (md + csv), the per-run csv and the figure."""
    import pandas as pd

    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame([{k: v for k, v in r.items() if k != "curve"} for r in rows]).to_csv(
        out / "fair_selection_runs.csv", index=False)
    t1 = [r for r in rows if r["table"] == "I"]
    divfl = {r["seed"]: r["selections"] for r in t1 if r["label"] == "divfl"}
    same = [r["selections"] == divfl.get(r["seed"]) for r in t1 if r["label"] == "subtrunc"]
    setting = (f"100 devices, 3 classes each (balanced split), kappa = 10, LeNet-5, Fashion-MNIST, "
               f"{args.rounds} rounds of E = {args.local_steps} local SGD steps (batch 32, lr {args.lr}), "
               f"stochastic greedy r = 10, reported losses and gradients on {args.probe_samples or 'all'} "
               f"local samples per device, {args.seeds} seeds (mean ± population std).")
    md1, csv1 = _table([{**r, "label": LABELS[r["label"]]} for r in t1], "method",
                       {LABELS[k]: v for k, v in PAPER_TABLE1.items()}, "Table I: methods", setting +
                       f" SubTrunc (lambda = 0.95, b = 1.10, faithful scale) made the same selections as DivFL "
                       f"in {sum(same)} of {len(same)} seeds.")
    t2 = [{**r, "label": r["label"]} for r in rows if r["table"] == "II"]
    t2 += [{**r, "label": "DivFL (lambda = 0)"} for r in t1 if r["label"] == "divfl"]
    md2, csv2 = _table(t2, "SubTrunc", {"normalized, lambda = 0.95": PAPER_TABLE2[0.95],
                                        "normalized, lambda = 0.25": PAPER_TABLE2[0.25],
                                        "DivFL (lambda = 0)": PAPER_TABLE2[0.01]},
                       "Table II: SubTrunc, lambda (distances normalised)", setting)
    t3 = [{**r, "label": f"W = {r['label']}"} for r in rows if r["table"] == "III"]
    t3 += [{**r, "label": "W = 5"} for r in t1 if r["label"] == "unionfl"]
    md3, csv3 = _table(sorted(t3, key=lambda r: int(r["label"].split()[-1])), "UnionFL (mu = 1)",
                       {f"W = {k}": v for k, v in PAPER_TABLE3.items()}, "Table III: UnionFL, window W", setting)
    for name, md, data in (("table1", md1, csv1), ("table2", md2, csv2), ("table3", md3, csv3)):
        pd.DataFrame(data).to_csv(out / f"fair_selection_{name}.csv", index=False)
        (out / f"fair_selection_{name}.md").write_text(
            "\n".join(md) + f"\n\nGenerated by `python -m wirelessfl.experiments.fair_selection` "
            f"({total_s / 60:.1f} min wall).\n")
        print("\n".join(md))
    plot(t1, out / "fair_selection.png")


def plot(rows: list[dict], path: Path) -> None:
    """Accuracy and dissimilarity against rounds (mean over seeds) for the Table I methods."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for name, label in LABELS.items():
        curves = [r["curve"] for r in rows if r["label"] == name]
        if not curves:
            continue
        rounds = np.asarray(curves[0]["round"])
        for ax, key in zip(axes, ("accuracy", "dissimilarity")):
            y = 100 * np.mean([c[key] for c in curves], axis=0)
            ax.plot(rounds, y, marker="o", ms=3, label=label)
    axes[0].set_ylabel("test accuracy (%)")
    axes[1].set_ylabel("client dissimilarity (std of per-device acc., pp)")
    for ax in axes:
        ax.set_xlabel("round")
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle("Fair client selection, Fashion-MNIST, 100 devices x 3 classes, kappa = 10 (mean over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def phi_study(cfg: dict, args) -> None:
    """Table IV: SubTrunc with phi(x) = x (faithful scale), written to DIR/fair_selection_table4.md."""
    import pandas as pd

    jobs = [("IV", "identity", seed, {"name": "subtrunc", "fair_phi": "identity"}, cfg) for seed in range(args.seeds)]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        rows = list(pool.map(run_one, jobs))
    out = Path(args.out)
    runs = out / "fair_selection_runs.csv"
    divfl = {}
    if runs.exists():
        old = pd.read_csv(runs)
        divfl = {int(r.seed): r.selections for r in old[old.label == "divfl"].itertuples()}
    same = sum(r["selections"] == divfl.get(r["seed"]) for r in rows)
    md, data = _table([{**r, "label": "phi(x) = x"} for r in rows], "SubTrunc (lambda = 0.95)",
                      {"phi(x) = x": ("83.42 ± 0.12", "7.91 ± 0.35")}, "Table IV: SubTrunc, phi",
                      f"Same setting as Table I. Same selections as DivFL in {same} of {len(rows)} seeds.")
    pd.DataFrame(data).to_csv(out / "fair_selection_table4.csv", index=False)
    (out / "fair_selection_table4.md").write_text("\n".join(md) + "\n\nGenerated by "
                                                  "`python -m wirelessfl.experiments.fair_selection --phi`.\n")
    print("\n".join(md))


def wireless(scenario_path: str, out: Path, runs_dir: str | None = None) -> None:
    """Run every variant of the wireless study; plot accuracy and dissimilarity against simulated time."""
    import pandas as pd
    import torch

    from ..config import load_scenario
    from .run import run_variants

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    results = run_variants(load_scenario(scenario_path), runs_dir, progress=False)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, res in results.items():
        last, r = res.evals.iloc[-1], res.rounds
        rows.append({"variant": name, "rounds": len(r), "sim_time_s": res.summary["sim_time_s"],
                     "accuracy": 100 * last["accuracy"], "dissimilarity": 100 * last["dissimilarity"],
                     "device_acc_p10": 100 * last["device_acc_p10"],
                     "model_airtime_s": float((r["comm_s"] - r["extra_airtime_s"]).sum()),
                     "extra_airtime_s": float(r["extra_airtime_s"].sum()),
                     "bootstrap_s": float(r["extra_airtime_s"].iloc[0]) if name in ("divfl", "subtrunc", "unionfl") else 0.0,
                     "mean_round_s": float((r["t_end"] - r["t_start"]).mean()),
                     "distinct_devices": int(len(set(" ".join(r["selected"]).split()))),
                     "wall_s": res.summary["wall_time_s"]})
        print(rows[-1], flush=True)
    pd.DataFrame(rows).to_csv(out / "fair_selection_wireless.csv", index=False)
    plot_wireless(results, out / "fair_selection_wireless.png")
    print(f"{(time.perf_counter() - t0) / 60:.1f} min wall")


def plot_wireless(results: dict, path: Path) -> None:
    """Accuracy and dissimilarity against simulated time, one line per variant (run results)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for name, res in results.items():
        ev = res.evals
        style = {"lyapunov": "--", "uniform": "--", "divfl": ":"}.get(name, "-")
        width = 3 if name == "divfl" else 1.5  # divfl and subtrunc coincide here: keep both visible
        for ax, key in zip(axes, ("accuracy", "dissimilarity")):
            ax.plot(ev["time_s"], 100 * ev[key], style, lw=width, marker="o", ms=3, label=name)
    axes[0].set_ylabel("test accuracy (%)")
    axes[1].set_ylabel("client dissimilarity (std of per-device acc., pp)")
    for ax in axes:
        ax.set_xlabel("simulated time (s)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    rounds = len(next(iter(results.values())).rounds)
    fig.suptitle(f"Fair selection over a heterogeneous TDMA uplink, {rounds} rounds per strategy "
                 "(evaluations every 5 rounds)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
