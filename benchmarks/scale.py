"""Scale: timing-only throughput at N = 100 and training with N = 10,000 devices.

1. 10,000 rounds at N = 100, m = 10, Lyapunov with the exact solver, timing only: wall time (target
   <= 60 s on 2 cores) and resident memory at 20% and 100% of the rounds (memory should grow only
   by the records kept, not per round otherwise).
2. N = 10,000 devices with the MLP on Fashion-MNIST, 10 draws per round, a few rounds of training:
   peak resident memory (target < 2 GB); devices are index arrays, models exist only for the
   devices selected in a round.

    python benchmarks/scale.py [--rounds 10000] [--train-rounds 20]
"""
from __future__ import annotations

import argparse
import resource
import sys
import time

import torch

from wirelessfl.config import from_dict
from wirelessfl.experiments.run import simulate


def rss_mb() -> float:
    """Current resident set size in MB (Linux /proc)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() / 2 ** 20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def throughput(rounds: int) -> None:
    base = {"seed": 0, "run": {"timing_only": True, "record_devices": False},
            "channel": {"profile": "linear"}, "link": {"model_bits": 32 * 555178, "p_max": "35 dB"},
            "devices": {"count": 100}, "scheduler": {"name": "lyapunov", "m": 10, "V": 100.0, "lam": 100.0}}
    simulate(from_dict({**base, "run": {**base["run"], "rounds": 50}}), progress=False)  # warm-up
    marks = {}
    for r in (rounds // 5, rounds):
        start, before = time.perf_counter(), rss_mb()
        simulate(from_dict({**base, "run": {**base["run"], "rounds": r}}), progress=False)
        marks[r] = (time.perf_counter() - start, rss_mb() - before)
    (r1, (t1, m1)), (r2, (t2, m2)) = marks.items()
    print(f"timing-only, N=100, m=10, lyapunov/exact: {r2} rounds in {t2:.1f} s "
          f"({t2 / r2 * 1e3:.2f} ms/round; target <= 60 s)")
    print(f"  resident memory growth: {m1:+.1f} MB after {r1} rounds, {m2:+.1f} MB after {r2} rounds "
          f"(records only; per-device arrays off)")


def training_at_scale(rounds: int, devices: int) -> None:
    torch.set_num_threads(1)
    sc = from_dict({"seed": 0, "run": {"rounds": rounds, "eval_every_rounds": rounds, "record_devices": False},
                    "channel": {"profile": "linear"}, "link": {"p_max": "35 dB"},
                    "devices": {"count": devices},
                    "scheduler": {"name": "lyapunov", "m": 10, "V": 100.0, "lam": 1.0},
                    "learning": {"model": "mlp", "lr": 0.05, "eval_train_samples": 2000}})
    start = time.perf_counter()
    res = simulate(sc, progress=False)
    wall = time.perf_counter() - start
    print(f"training, N={devices}, mlp, m=10: {rounds} rounds in {wall:.1f} s "
          f"({res.summary['mean_distinct_per_round']:.1f} devices/round, accuracy {res.summary['final_accuracy']:.3f})")
    print(f"  peak resident memory {peak_rss_mb():.0f} MB (target < 2048 MB)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10000)
    ap.add_argument("--train-rounds", type=int, default=20)
    ap.add_argument("--devices", type=int, default=10000)
    ap.add_argument("--skip-training", action="store_true")
    args = ap.parse_args()
    throughput(args.rounds)
    if not args.skip_training:
        training_at_scale(args.train_rounds, args.devices)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
