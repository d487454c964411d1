"""A CPU-scale neural-network comparison of the FedShuffle family in the simulator (spec 001 sec. 6).

Fashion-MNIST, an MLP, 20 devices with log-normal dataset sizes (learning.size_sigma) and label skew,
uniform scheduling of m draws per round, one local epoch of ceil(|D_n| / B) steps per selected device
and a computation time per local step (devices.step_time_s = 0.1 s), so devices with more data straggle.
Compares FedAvgRR, FedAvgMin, FedNova and FedShuffle by training loss against rounds and simulated time.

    python -m wirelessfl.experiments.fedshuffle_nn --rounds 150 --out figures/fedshuffle_nn.png
"""
from __future__ import annotations

import argparse

import numpy as np

METHODS = ("fedavg_rr", "fedavg_min", "fednova", "fedshuffle")


def scenario(method: str, rounds: int, seed: int = 0, lr: float = 0.02, step_time_s: float = 0.1):
    from wirelessfl.config import from_dict

    return from_dict({
        "name": method, "seed": seed,
        "run": {"rounds": rounds, "eval_every_rounds": max(rounds // 15, 1), "threads": 1},
        "channel": {"profile": "linear"},
        "devices": {"count": 20, "step_time_s": step_time_s},
        "scheduler": {"name": "uniform", "m": 10},
        "learning": {"dataset": "fashion_mnist", "model": "mlp", "partition": "dirichlet_per_device",
                     "alpha": 0.3, "samples_per_device": 150, "size_sigma": 0.8, "batch_size": 16,
                     "lr": lr, "local_epochs": 1, "algorithm": method, "eval_train_samples": 3000},
    })


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=150)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--out", default="figures/fedshuffle_nn.png")
    args = ap.parse_args(argv)
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
