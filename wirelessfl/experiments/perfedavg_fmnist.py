"""Spec 004 reproduction at CPU scale: Per-FedAvg (FO, HF) against FedAvg + one-step update on
Fashion-MNIST (CIFAR-10 when its files are present), the paper's Table 1 protocol.

This drives the training core directly (no channel: Table 1 is about accuracy). n = 50 devices
in Per-FedAvg's 10 groups (its Table 2 layout, a = 196, test split a_test = 32 with the same
class layout), its MLP 80-60 with ELU, r = 0.2 (10 devices drawn uniformly without replacement per
round, stream "selection"), D = D' = D'' = 40, delta = 1e-3, plain average of the returned models.
After training every device takes one SGD step of size alpha on one batch of 40 of its own
training samples and is tested on its own test split; the table reports the unweighted mean over
the 50 devices, averaged over seeds (± 1.96 std / sqrt(seeds), spec A9).

Run: ``python -m wirelessfl.experiments.perfedavg_fmnist [--out DIR] [--rounds K] [--seeds R]``
(defaults: K = 300, 3 seeds, tau/alpha settings 10/0.01, 4/0.01, 4/0.1 and 4/0.01 with the diff.
hetero. layout, beta = 0.001; about 50 CPU-minutes in all).
``--part i/k`` runs every k-th (setting, seed) job only and saves it, so that jobs can run in
parallel; ``--report`` then assembles figures/perfedavg_table1.{md,csv} and figures/perfedavg.png
from the saved jobs (together with the wireless study's runs when ``--wireless DIR`` is given).
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from .. import rng as rngs
from ..jsonio import read_json, write_json_atomic

# Paper, Table 1 (K = 1000, MNIST a = 196 / CIFAR-10 a = 68, beta = 0.001), accuracy in %.
PAPER_TABLE1 = [
    ("MNIST", 10, 0.01, False, "75.96 ± 0.02", "78.00 ± 0.02", "79.85 ± 0.02"),
    ("MNIST", 4, 0.01, False, "60.18 ± 0.02", "64.55 ± 0.02", "70.94 ± 0.03"),
    ("CIFAR-10", 10, 0.001, False, "40.49 ± 0.07", "46.98 ± 0.1", "50.44 ± 0.15"),
    ("CIFAR-10", 4, 0.001, False, "38.38 ± 0.07", "34.04 ± 0.08", "43.73 ± 0.11"),
    ("CIFAR-10", 4, 0.01, False, "35.97 ± 0.17", "25.32 ± 0.18", "46.32 ± 0.12"),
    ("CIFAR-10", 4, 0.01, True, "58.59 ± 0.11", "37.71 ± 0.23", "71.25 ± 0.05"),
]
METHODS = ("fedavg", "perfedavg_fo", "perfedavg_hf")
LABELS = {"fedavg": "FedAvg + update", "perfedavg_fo": "Per-FedAvg (FO)", "perfedavg_hf": "Per-FedAvg (HF)",
          "perfedavg_exact": "Per-FedAvg (exact)"}
DATASET_A = {"fashion_mnist": 196, "mnist": 196, "cifar10": 68}


def build_federation(data, seed: int, a: int, num_devices: int = 50, single_class: bool = False):
    """Train and test index sets of the Per-FedAvg layout: (train parts, test parts)."""
    from ..learning import perfedavg_group_counts, perfedavg_test_unit, split_by_class_counts

    y_tr, y_te = data.y_train.numpy(), data.y_test.numpy()
    train = split_by_class_counts(y_tr, perfedavg_group_counts(num_devices, a, single_class=single_class),
                                  rngs.stream(seed, "partition"))
    a_test = perfedavg_test_unit(a, y_tr.size, y_te.size)
    test = split_by_class_counts(y_te, perfedavg_group_counts(num_devices, a_test, single_class=single_class),
                                 rngs.stream(seed, "test_split"))
    return train, test


def run_one(data, *, method: str, tau: int, alpha: float, beta: float, rounds: int, seed: int,
            single_class: bool = False, per_round: int = 10, eval_every: int = 50, delta: float = 1e-3,
            batch_size: int = 40) -> dict:
    """One training run; returns the final personalised accuracy (mean and std over devices), the
    unadapted model's mean accuracy on the devices' test splits, and the curve of evaluations."""
    from ..learning import FedAvg, PerFedAvg, Trainer

    a = DATASET_A[data.name]
    train, test = build_federation(data, seed, a, single_class=single_class)
    n = len(train)
    # vmap: one vectorised call for the 10 devices is faster than a loop for this small MLP on a CPU
    trainer = Trainer(data, train, "mlp_80_60", local_steps=tau, batch_size=batch_size, lr=beta, root_seed=seed,
                      eval_train_samples=1000, batching="vmap")
    alg = FedAvg() if method == "fedavg" else PerFedAvg(method.split("_")[1], alpha, delta=delta)
    factor = 1 if method == "fedavg" else alg.compute_factor
    q = np.full(n, per_round / n)  # uniform sampling without replacement: weights 1/(N q) = 1/(r n)
    pick = rngs.stream(seed, "selection")
    curve = []

    def evaluate(k):
        ev = trainer.personalised_evaluate(test, alpha)
        curve.append({"round": k, "grad_evals": k * tau * factor, "personal_accuracy": ev["personal_accuracy"],
                      "local_accuracy": ev["local_accuracy"]})
        return ev

    evaluate(0)
    for k in range(rounds):
        alg.round(trainer, np.sort(pick.choice(n, per_round, replace=False)), q, n, k)
        if (k + 1) % eval_every == 0 and k + 1 < rounds:
            evaluate(k + 1)
    ev = evaluate(rounds)
    return {"personal_accuracy": ev["personal_accuracy"], "personal_accuracy_std": ev["personal_accuracy_std"],
            "local_accuracy": ev["local_accuracy"], "curve": curve}


def parse_settings(text: str) -> list[tuple[int, float, bool]]:
    """"10:0.01,4:0.1:single" -> [(10, 0.01, False), (4, 0.1, True)] (tau, alpha, diff. hetero.)."""
    out = []
    for item in text.split(","):
        bits = item.split(":")
        out.append((int(bits[0]), float(bits[1]), len(bits) > 2 and bits[2] == "single"))
    return out


def run_jobs(args) -> None:
    import torch

    from ..learning import load_dataset

    torch.set_num_threads(1)
    data = load_dataset(args.dataset)
    jobs = [(s, seed) for s in parse_settings(args.settings) for seed in range(args.seeds)]
    i, k = (int(x) for x in args.part.split("/"))
    store = Path(args.out) / "perfedavg_runs"
    store.mkdir(parents=True, exist_ok=True)
    for (tau, alpha, single), seed in jobs[i::k]:
        for method in args.methods.split(","):
            name = f"{args.dataset}_tau{tau}_alpha{alpha:g}{'_single' if single else ''}_{method}_seed{seed}.json"
            if (store / name).exists():
                continue
            t0 = time.perf_counter()
            res = run_one(data, method=method, tau=tau, alpha=alpha, beta=args.beta, rounds=args.rounds,
                          seed=seed, single_class=single, eval_every=args.eval_every)
            res.update(dataset=args.dataset, tau=tau, alpha=alpha, single=single, method=method, seed=seed,
                       rounds=args.rounds, beta=args.beta, wall_s=time.perf_counter() - t0)
            write_json_atomic(store / name, res)
            print(name, f"{100 * res['personal_accuracy']:.2f}%", f"{res['wall_s']:.0f}s", flush=True)


def _paper_row(dataset: str, tau: int, alpha: float, single: bool):
    want = "MNIST" if dataset in ("mnist", "fashion_mnist") else "CIFAR-10"
    for row in PAPER_TABLE1:
        if row[0] == want and row[1] == tau and math.isclose(row[2], alpha) and row[3] == single:
            return row
    return None


def report(args) -> None:
    import pandas as pd

    store = Path(args.out) / "perfedavg_runs"
    runs = [read_json(p) for p in sorted(store.glob("*.json"))]
    df = pd.DataFrame([{k: v for k, v in r.items() if k != "curve"} for r in runs])
    rows = []
    for (dataset, tau, alpha, single), g in df.groupby(["dataset", "tau", "alpha", "single"], sort=False):
        row = {"dataset": dataset, "tau": tau, "alpha": alpha, "diff_hetero": single,
               "rounds": int(g["rounds"].iloc[0]), "beta": float(g["beta"].iloc[0])}
        paper = _paper_row(dataset, tau, alpha, single)
        for m in METHODS:
            acc = 100 * g.loc[g["method"] == m, "personal_accuracy"].to_numpy()
            row[f"{m}_mean"] = acc.mean() if acc.size else math.nan
            row[f"{m}_ci95"] = 1.96 * acc.std(ddof=1) / math.sqrt(acc.size) if acc.size > 1 else math.nan
            row[f"{m}_seeds"] = acc.size
            # spread over the 50 devices (std of the per-device personalised accuracies), mean over seeds
            row[f"{m}_device_std"] = 100 * g.loc[g["method"] == m, "personal_accuracy_std"].mean()
            row[f"{m}_local"] = 100 * g.loc[g["method"] == m, "local_accuracy"].mean()  # before adaptation
            row[f"{m}_paper"] = paper[4 + METHODS.index(m)] if paper else ""
        rows.append(row)
    table = pd.DataFrame(rows).sort_values(["dataset", "diff_hetero", "alpha", "tau"], ascending=[True, True, True, False])
    out = Path(args.out)
    table.to_csv(out / "perfedavg_table1.csv", index=False)
    lines = ["| dataset | tau | alpha | K | seeds | FedAvg + update: ours (paper, MNIST / CIFAR-10) | "
             "Per-FedAvg (FO): ours (paper) | Per-FedAvg (HF): ours (paper) |", "|---|---|---|---|---|---|---|---|"]
    for _, r in table.iterrows():
        cells = []
        for m in METHODS:
            ci = "" if math.isnan(r[f"{m}_ci95"]) else f" ± {r[f'{m}_ci95']:.2f}"
            cells.append(f"{r[f'{m}_mean']:.2f}{ci} ({r[f'{m}_paper'] or 'n/a'})")
        lines.append(f"| {r['dataset']}{' diff. hetero.' if r['diff_hetero'] else ''} | {r['tau']} | {r['alpha']:g} | "
                     f"{r['rounds']} | {r['fedavg_seeds']} | " + " | ".join(cells) + " |")
    lines += ["", "Spread over the 50 devices (std of their personalised accuracies, mean over seeds) and the "
              "unadapted model's mean accuracy on the devices' test splits, in %:", "",
              "| dataset | tau | alpha | " + " | ".join(f"{LABELS[m]}: device std / before adaptation" for m in METHODS)
              + " |", "|---|---|---|---|---|---|"]
    for _, r in table.iterrows():
        lines.append(f"| {r['dataset']}{' diff. hetero.' if r['diff_hetero'] else ''} | {r['tau']} | {r['alpha']:g} | "
                     + " | ".join(f"{r[f'{m}_device_std']:.1f} / {r[f'{m}_local']:.2f}" for m in METHODS) + " |")
    if args.wireless:
        lines += ["", *_wireless_table(Path(args.wireless))]
    (out / "perfedavg_table1.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    _figure(runs, out, Path(args.wireless) if args.wireless else None)


def _wireless_table(wireless: Path) -> list[str]:
    """The wireless study at the end of its simulated-time budget, mean over seeds (in %)."""
    import pandas as pd

    lines = ["Wireless study (scenarios/studies/perfedavg_wireless.toml, equal simulated time), mean over "
             "seeds ± 1.96 std / sqrt(seeds):", "",
             "| method | seeds | rounds in the budget | personalised acc. (final) | personalised acc. (last 5 evals) "
             "| global model acc. (final) | before adaptation (final) |", "|---|---|---|---|---|---|---|"]
    for m in ("fedavg", "perfedavg_fo", "perfedavg_hf"):
        dirs = sorted(wireless.glob(f"seed*/{m}")) or [wireless / m]
        evs = [pd.read_csv(d / "evals.csv") for d in dirs if (d / "evals.csv").exists()]
        if not evs:
            continue
        rounds = [json.loads((d / "summary.json").read_text())["rounds"] for d in dirs]

        def cell(values):
            v = 100 * np.asarray(values)
            ci = f" ± {1.96 * v.std(ddof=1) / math.sqrt(v.size):.2f}" if v.size > 1 else ""
            return f"{v.mean():.2f}{ci}"

        lines.append(f"| {LABELS[m]} | {len(evs)} | {np.mean(rounds):.0f} | "
                     f"{cell([e['personal_accuracy'].iloc[-1] for e in evs])} | "
                     f"{cell([e['personal_accuracy'].iloc[-5:].mean() for e in evs])} | "
                     f"{cell([e['accuracy'].iloc[-1] for e in evs])} | {cell([e['local_accuracy'].iloc[-1] for e in evs])} |")
    return lines


def _figure(runs: list[dict], out: Path, wireless: Path | None) -> None:
    """Top row: personalised accuracy against rounds; bottom row: against local computation (FedAvg
    step equivalents per participating device, i.e. rounds x tau x 1, 2 or 4). Last column: the
    wireless study against simulated time (top) and rounds (bottom)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = sorted({(r["dataset"], r["tau"], r["alpha"], r["single"]) for r in runs},
                      key=lambda s: (s[3], s[2], -s[1]))
    ncols = len(settings) + (1 if wireless else 0)
    fig, axes = plt.subplots(2, ncols, figsize=(4.2 * ncols, 7.0), squeeze=False)
    colors = {"fedavg": "C0", "perfedavg_fo": "C1", "perfedavg_hf": "C2", "perfedavg_exact": "C3"}
    for col, (dataset, tau, alpha, single) in enumerate(settings):
        for m in METHODS:
            curves = [r["curve"] for r in runs if (r["dataset"], r["tau"], r["alpha"], r["single"], r["method"])
                      == (dataset, tau, alpha, single, m)]
            if not curves:
                continue
            y = 100 * np.mean([[c["personal_accuracy"] for c in cur] for cur in curves], axis=0)
            label = f"{LABELS[m]} ({len(curves)} seeds)"
            axes[0][col].plot([c["round"] for c in curves[0]], y, color=colors[m], label=label)
            axes[1][col].plot([c["grad_evals"] for c in curves[0]], y, color=colors[m], label=label)
        axes[0][col].set_title(f"{dataset}, tau={tau}, alpha={alpha:g}{' diff. hetero.' if single else ''}",
                               fontsize=9)
        axes[0][col].set_xlabel("round")
        axes[1][col].set_xlabel("local computation per device (FedAvg steps)")
        for row in (0, 1):
            axes[row][col].set_ylabel("personalised accuracy (%)")
            axes[row][col].grid(alpha=0.3)
        axes[0][col].legend(fontsize=7)
    if wireless:
        import pandas as pd

        for m in ("fedavg", "perfedavg_fo", "perfedavg_hf"):
            # one run directory per seed (seed*/VARIANT/evals.csv) or a single one (VARIANT/evals.csv);
            # evaluations every eval_every_s line up by index across seeds
            evs = [pd.read_csv(p) for p in sorted(wireless.glob(f"seed*/{m}/evals.csv")) or
                   [wireless / m / "evals.csv"] if p.exists()]
            if not evs:
                continue
            k = min(len(e) for e in evs)
            mean = {c: np.mean([e[c].to_numpy()[:k] for e in evs], axis=0) for c in ("time_s", "round", "personal_accuracy")}
            label = f"{LABELS[m]} ({len(evs)} seeds)"
            axes[0][-1].plot(mean["time_s"], 100 * mean["personal_accuracy"], color=colors[m], label=label)
            axes[1][-1].plot(mean["round"], 100 * mean["personal_accuracy"], color=colors[m], label=label)
        axes[0][-1].set_title("wireless, Lyapunov scheduler (perfedavg_wireless.toml)", fontsize=9)
        axes[0][-1].set_xlabel("simulated time (s)")
        axes[1][-1].set_xlabel("round")
        for row in (0, 1):
            axes[row][-1].set_ylabel("personalised accuracy (%)")
            axes[row][-1].grid(alpha=0.3)
        axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "perfedavg.png", dpi=110)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="figures")
    ap.add_argument("--dataset", default="fashion_mnist", choices=("fashion_mnist", "mnist", "cifar10"))
    ap.add_argument("--settings", default="10:0.01,4:0.01,4:0.1,4:0.01:single",
                    help="comma-separated tau:alpha[:single] (single: the diff. hetero. layout)")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--beta", type=float, default=0.001)
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--part", default="0/1", help="i/k: run every k-th job starting at i")
    ap.add_argument("--report", action="store_true", help="only assemble table and figure from saved runs")
    ap.add_argument("--wireless", default="", help="run directory of scenarios/studies/perfedavg_wireless.toml "
                    "(or a folder of such directories named seed0, seed1, ...)")
    args = ap.parse_args(argv)
    if not args.report:
        run_jobs(args)
    if args.report or args.part == "0/1":
        report(args)


if __name__ == "__main__":
    main()
