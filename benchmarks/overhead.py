"""Simulator overhead: per-round wall time of ``simulate`` over a bare PyTorch FedAvg loop.

Both train the same selected devices on the same minibatches in the same process. The simulator's
per-round time is the marginal cost of a round, (time of a 2R-round run - time of an R-round run) / R,
so dataset loading, model construction and the initial evaluation do not count; the bare loop replays
the devices the simulator selected, with the same aggregation weights. Target: ratio <= 1.10.

    python benchmarks/overhead.py [--rounds 20] [--scheduler lyapunov] [--model small_cnn]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from wirelessfl.config import from_dict
from wirelessfl.experiments.run import simulate
from wirelessfl.sim.run.runner import Run

from overhead_baseline import bare_fedavg_round


def scenario(rounds: int, scheduler: str, model: str):
    return from_dict({
        "name": "overhead", "seed": 0,
        "run": {"rounds": rounds, "eval_every_rounds": 10 ** 6},
        "channel": {"profile": "linear", "sigma_min": 0.1, "sigma_max": 10.0},
        "link": {"p_max": "35 dB"}, "devices": {"count": 100},
        "scheduler": {"m": 10, "V": 100.0, "lam": 1.0},
        "learning": {"dataset": "fashion_mnist", "model": model, "alpha": 1.0, "lr": 0.05},
    }, [f'scheduler.name="{scheduler}"'])  # uniform keeps m, drops V and lambda


def timed_simulate(rounds: int, scheduler: str, model: str):
    start = time.perf_counter()
    result = simulate(scenario(rounds, scheduler, model), progress=False)
    return time.perf_counter() - start, result


def bare_replay(rounds, scheduler: str, model: str) -> tuple[float, torch.Tensor]:
    """Train the rounds the simulator ran (rows of its rounds.csv, indexed by round), with a plain
    loop, and return (seconds, final params)."""
    sc = scenario(len(rounds), scheduler, model)
    trainer = Run(sc, None, progress=False).learner.trainer
    n = sc.devices.count
    params = trainer.params.clone()
    data = (trainer.dataset.x_train, trainer.dataset.y_train)
    start = time.perf_counter()
    for r, row in rounds.iterrows():
        devices = [int(v) for v in row["selected"].split()]
        q = np.array([float(v) for v in row["q_selected"].split()])
        batches = [trainer.minibatch_indices(d, r) for d in devices]
        params = bare_fedavg_round(trainer.model, params, data, batches, trainer.lr, trainer.local_steps,
                                   weights=1.0 / (n * q))
    return time.perf_counter() - start, params


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--scheduler", default="lyapunov", choices=("lyapunov", "uniform"))
    ap.add_argument("--model", default="small_cnn")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads for both sides")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    r = args.rounds
    t_short, _ = timed_simulate(r, args.scheduler, args.model)
    t_long, long_run = timed_simulate(2 * r, args.scheduler, args.model)
    sim_per_round = (t_long - t_short) / r
    # the bare loop replays the last R rounds of the long run (same devices, same batches)
    tail = long_run.rounds.iloc[r:].copy()
    tail.index = range(r, 2 * r)
    t_bare, _ = bare_replay(tail, args.scheduler, args.model)
    bare_per_round = t_bare / r
    devices = np.mean(tail["num_selected"])
    print(f"{args.scheduler}, {args.model}, N=100, m=10 ({devices:.1f} devices/round), {r} rounds, "
          f"{args.threads} thread(s)")
    print(f"simulate: {sim_per_round * 1e3:8.1f} ms/round")
    print(f"bare loop: {bare_per_round * 1e3:7.1f} ms/round")
    print(f"ratio simulate / bare = {sim_per_round / bare_per_round:.3f}  (target <= 1.10)")


if __name__ == "__main__":
    main()
