"""Scale: timing-only throughput at N = 100, per-device records at N = 10,000, and training with
N = 10,000 devices.

1. 10,000 rounds at N = 100, m = 10, Lyapunov with the exact solver, timing only: wall time and
   resident memory at 20% and 100% of the rounds (memory should grow only by the records kept).
2. N = 10,000 devices, 2,000 timing-only rounds, with per-device records (decisions.h5, streamed)
   and without them, each in a process of its own, back to back: peak resident memory (target
   < 400 MB) and the time ratio (target <= 1.5).
3. N = 10,000 devices with the MLP on Fashion-MNIST, 10 draws per round, a few rounds of training:
   peak resident memory (target < 2 GB); devices are index arrays, models exist only for the
   devices selected in a round.

    python benchmarks/scale.py [--rounds 10000] [--record-rounds 2000] [--train-rounds 20]
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


def records_child(devices: int, rounds: int, record: bool, out: str) -> None:
    """One timing-only run (in its own process): prints its wall time and peak memory."""
    sc = from_dict({"seed": 0, "run": {"rounds": rounds, "timing_only": True, "record_devices": record},
                    "channel": {"profile": "linear"}, "link": {"model_bits": 32 * 199210, "p_max": "35 dB"},
                    "devices": {"count": devices}, "scheduler": {"name": "lyapunov", "m": 10}})
    start = time.perf_counter()
    simulate(sc, out, progress=False)
    print(f"{time.perf_counter() - start:.3f} {peak_rss_mb():.0f}")


def per_device_records(devices: int, rounds: int) -> None:
    import subprocess
    import tempfile
    from pathlib import Path

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for record in (False, True, False, True):  # back to back, twice: the machine's speed drifts
            out = Path(tmp) / f"run-{record}-{len(results.get(record, []))}"
            proc = subprocess.run([sys.executable, __file__, "--child", str(devices), str(rounds), str(int(record)),
                                   str(out)], capture_output=True, text=True, check=True)
            wall, peak = map(float, proc.stdout.split())
            results.setdefault(record, []).append((wall, peak))
            size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 2 ** 20
            print(f"  N={devices}, {rounds} rounds, per-device records {'on ' if record else 'off'}: {wall:.1f} s, "
                  f"peak {peak:.0f} MB, run folder {size:.0f} MB")
    off, on = (min(w for w, _ in results[r]) for r in (False, True))
    peak_on = max(p for _, p in results[True])
    print(f"per-device records at N={devices}, {rounds} rounds: {on:.1f} s with, {off:.1f} s without: "
          f"ratio {on / off:.2f} (target <= 1.5); peak memory with them {peak_on:.0f} MB (target < 400 MB)")


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
    ap.add_argument("--record-rounds", type=int, default=2000)
    ap.add_argument("--skip-training", action="store_true")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        devices, rounds, record, out = args.child
        records_child(int(devices), int(rounds), bool(int(record)), out)
        return
    throughput(args.rounds)
    per_device_records(args.devices, args.record_rounds)
    if not args.skip_training:
        training_at_scale(args.train_rounds, args.devices)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
