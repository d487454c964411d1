"""A CPU-scale neural-network comparison of the FedShuffle family in the simulator (spec 001 sec. 6).

Fashion-MNIST, an MLP, 20 devices with log-normal dataset sizes (learning.size_sigma) and label skew,
uniform scheduling of m draws per round, one local epoch of ceil(|D_n| / B) steps per selected device
and a computation time per local step (devices.step_time_s = 0.1 s), so devices with more data straggle.
Compares FedAvgRR, FedAvgMin, FedNova and FedShuffle by training loss against rounds and simulated time.

    python -m wirelessfl.experiments.fedshuffle_nn --rounds 150 --out figures/fedshuffle_nn.png

``--tables DIR`` runs the analogue of the paper's Tables 2 and 3 instead (spec 001 sec. 6): every
method without and with global momentum 0.9 (plus FedShuffleMVR) in two settings, "imbalanced"
(log-normal sizes, one epoch: the Shakespeare trend) and "epochs" (equal sizes, E_n ~ U{2..5} per
device and round: the CIFAR-100 trend), and writes fedshuffle_nn_tables.md / .csv there.
"""
from __future__ import annotations

import argparse

import numpy as np

METHODS = ("fedavg_rr", "fedavg_min", "fednova", "fedshuffle")
TABLE_METHODS = ("fedavg_min", "fedavg_mean", "fedavg_rr", "fednova", "fedshuffle")
# spec 001 sec. 6: test accuracy (%) without / with momentum 0.9; Table 2 Shakespeare, Table 3 CIFAR-100
PAPER = {"imbalanced": {"fedavg_min": (35.79, 51.13), "fedavg_mean": (36.95, 55.38), "fedavg_rr": (48.61, 64.64),
                        "fednova": (43.29, 61.65), "fedshuffle": (59.57, 67.63)},
         "epochs": {"fedavg_min": (48.49, 63.62), "fedavg_mean": (49.24, 64.75), "fedavg_rr": (50.29, 63.04),
                    "fednova": (50.63, 62.83), "fedshuffle": (51.97, 64.52)}}
SETTINGS = {"imbalanced": {"size_sigma": 0.8, "local_epochs": 1},
            "epochs": {"size_sigma": 0.0, "local_epochs": 2, "local_epochs_max": 5}}


def scenario(method: str, rounds: int, seed: int = 0, lr: float = 0.02, step_time_s: float = 0.1,
             momentum: float = 0.0, setting: str = "imbalanced"):
    from wirelessfl.config import from_dict

    learning = {**SETTINGS[setting], "momentum": momentum}
    return from_dict({
        "name": method, "seed": seed,
        "run": {"rounds": rounds, "eval_every_rounds": max(rounds // 15, 1), "threads": 1},
        "channel": {"profile": "linear"},
        "devices": {"count": 20, "step_time_s": step_time_s},
        "scheduler": {"name": "uniform", "m": 10},
        "learning": {"dataset": "fashion_mnist", "model": "mlp", "partition": "dirichlet_per_device",
                     "alpha": 0.3, "samples_per_device": 150, "size_sigma": 0.8, "batch_size": 16,
                     "lr": lr, "algorithm": method, "eval_train_samples": 3000, **learning},
    })


MVR_LR = 0.002  # FedShuffleMVR diverged at lr 0.02 and 0.01 (imbalanced setting, rounds 11 and ~8)


def tables(rounds: int, seeds: list[int], out_dir: str) -> None:
    """The Table 2 / Table 3 analogue: final test accuracy (mean of the last 3 evaluations) per
    setting, method and momentum, mean ± std over seeds, next to the paper's numbers.

    Every finished run is appended to OUT/fedshuffle_nn_runs.csv at once and skipped when the
    command is started again, so an interrupted table resumes; a diverging run is recorded as such."""
    import csv
    from pathlib import Path

    import pandas as pd

    from wirelessfl import simulate
    from wirelessfl.experiments.run import TrainingDiverged

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "fedshuffle_nn_runs.csv"
    fields = ["setting", "method", "momentum", "seed", "lr", "accuracy", "train_loss", "sim_time_s"]
    done = pd.read_csv(log) if log.exists() else pd.DataFrame(columns=fields)
    have = {(r.setting, r.method, float(r.momentum), int(r.seed)) for r in done.itertuples()}
    for setting in SETTINGS:
        runs = [(m, 0.0) for m in TABLE_METHODS] + [(m, 0.9) for m in TABLE_METHODS] + [("fedshuffle_mvr", 0.9)]
        for method, momentum in runs:
            for seed in seeds:
                if (setting, method, momentum, seed) in have:
                    continue
                lr = MVR_LR if method == "fedshuffle_mvr" else 0.02
                row = {"setting": setting, "method": method, "momentum": momentum, "seed": seed, "lr": lr}
                try:
                    res = simulate(scenario(method, rounds, seed, lr=lr, momentum=momentum, setting=setting),
                                   progress=False)
                    row.update(accuracy=float(res.evals["accuracy"].tail(3).mean()),
                               train_loss=float(res.evals["train_loss"].iloc[-1]),
                               sim_time_s=float(res.rounds["t_end"].iloc[-1]))
                except TrainingDiverged:
                    row.update(accuracy=float("nan"), train_loss=float("nan"), sim_time_s=float("nan"))
                new_file = not log.exists()
                with open(log, "a", newline="") as fh:
                    writer = csv.DictWriter(fh, fieldnames=fields)
                    if new_file:
                        writer.writeheader()
                    writer.writerow(row)
                print(row, flush=True)
    df = pd.read_csv(log)
    stats = df.groupby(["setting", "method", "momentum"])["accuracy"].agg(["mean", "std"]) * 100
    lines = [f"Test accuracy (%), mean of the last 3 evaluations, mean ± std over seeds {seeds}, {rounds} rounds "
             f"(FedShuffleMVR with lr {MVR_LR}, the others 0.02).", ""]
    for setting, title in (("imbalanced", "Table 2 analogue (imbalanced sizes; paper: Shakespeare)"),
                           ("epochs", "Table 3 analogue (E_n ~ U{2..5}; paper: CIFAR-100)")):
        lines += [f"### {title}", "", "| method | ours, no momentum | ours, momentum 0.9 | paper, no momentum | paper, momentum |",
                  "|---|---|---|---|---|"]
        for method in TABLE_METHODS + ("fedshuffle_mvr",):
            cells = []
            for momentum in (0.0, 0.9):
                key = (setting, method, momentum)
                cells.append(f"{stats.loc[key, 'mean']:.2f} ± {stats.loc[key, 'std']:.2f}" if key in stats.index else "")
            paper = PAPER[setting].get(method, ("", ""))
            lines.append(f"| {method} | {cells[0]} | {cells[1]} | {paper[0]} | {paper[1]} |")
        lines.append("")
    (out / "fedshuffle_nn_tables.md").write_text("\n".join(lines))
    print("\n".join(lines))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=150)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--out", default="figures/fedshuffle_nn.png")
    ap.add_argument("--tables", metavar="DIR", help="run the Table 2 / 3 analogue into DIR instead")
    args = ap.parse_args(argv)
    if args.tables:
        tables(args.rounds, args.seeds, args.tables)
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from wirelessfl import simulate

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for method in args.methods:
        finals = []
        for seed in args.seeds:
            res = simulate(scenario(method, args.rounds, seed), progress=False)
            ev = res.evals
            finals.append((ev["train_loss"].iloc[-1], ev["accuracy"].iloc[-1], res.rounds["t_end"].iloc[-1],
                           res.rounds["comp_s"].mean(), res.rounds["comm_s"].mean()))
            if seed == args.seeds[0]:
                axes[0].plot(ev["round"], ev["train_loss"], label=method)
                axes[1].plot(ev["time_s"], ev["train_loss"], label=method)
                axes[2].plot(ev["round"], ev["accuracy"], label=method)
        f = np.array(finals)
        print(f"{method:12s} train loss {f[:, 0].mean():.4f}  test accuracy {f[:, 1].mean():.4f}  "
              f"simulated time {f[:, 2].mean():.1f} s  per round: computation {f[:, 3].mean():.2f} s, "
              f"uplink {f[:, 4].mean():.2f} s  ({len(args.seeds)} seed(s))", flush=True)
    for ax, xl, yl in zip(axes, ("round", "simulated time (s)", "round"), ("train loss", "train loss", "test accuracy")):
        ax.set_xlabel(xl)
        ax.set_ylabel(yl)
        ax.legend(fontsize=8)
    axes[0].set_yscale("log")
    axes[1].set_yscale("log")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
