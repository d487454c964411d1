"""Scale: timing-only throughput at N = 100, per-device records at N = 10,000, and training with
N = 10,000 devices.

1. 10,000 rounds at N = 100, m = 10, Lyapunov with the exact solver, timing only (target: 5 s):
   CPU time in memory, with the records written to a folder, and with per-device arrays too, each
   against the channel draws and decisions alone (the floor), measured back to back.
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

import numpy as np
import torch

from wirelessfl.config import from_dict
from wirelessfl.experiments.run import simulate


def rss_mb() -> float:
    """Current resident set size in MB (Linux /proc)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() / 2 ** 20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


TIMING = {"seed": 0, "run": {"timing_only": True, "record_devices": False},
          "channel": {"profile": "linear"}, "link": {"model_bits": 32 * 555178, "p_max": "35 dB"},
          "devices": {"count": 100}, "scheduler": {"name": "lyapunov", "m": 10, "V": 100.0, "lam": 100.0}}


def timing_scenario(rounds: int, **run):
    return from_dict({**TIMING, "run": {**TIMING["run"], "rounds": rounds, **run}})


def decisions_alone(rounds: int) -> float:
    """CPU seconds of the channel draws and scheduling decisions of ``rounds`` rounds, nothing else:
    the floor of a timing-only round."""
    from wirelessfl.scheduling.base import RoundState
    from wirelessfl.sim.run.runner import Run

    run = Run(timing_scenario(rounds), None, progress=False)
    rng = np.random.default_rng(0)
    start = time.process_time()
    for r in range(rounds):
        gains = run.channel.draw(rng)
        run.scheduler.decide(RoundState(round=r, gains=gains, model_bits=run.bits, bandwidth_hz=22e6,
                                        noise_power=1.0, rng=rng))
    return time.process_time() - start


def whole_run(rounds: int, out=None, **run) -> float:
    """CPU seconds of ``simulate`` for a timing-only run of ``rounds`` rounds."""
    start = time.process_time()
    simulate(timing_scenario(rounds, **run), out, progress=False)
    return time.process_time() - start


def throughput(rounds: int) -> None:
    """10,000 timing-only rounds (target: 5 s), against the decisions alone, measured back to back
    three times (CPU seconds, min over the three: the machine is shared)."""
    import tempfile
    from pathlib import Path

    whole_run(50)  # warm-up
    marks = {"decisions alone": [], "simulate": [], "simulate, records to a folder": [],
             "simulate, records and per-device arrays to a folder": []}
    memory = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(3):
            marks["decisions alone"].append(decisions_alone(rounds))
            before = rss_mb()
            marks["simulate"].append(whole_run(rounds))
            memory.append(rss_mb() - before)
            marks["simulate, records to a folder"].append(whole_run(rounds, Path(tmp) / f"a{i}"))
            marks["simulate, records and per-device arrays to a folder"].append(
                whole_run(rounds, Path(tmp) / f"b{i}", record_devices=True))
    floor = min(marks["decisions alone"])
    print(f"timing-only, N=100, m=10, lyapunov/exact, {rounds} rounds (CPU s, min of 3; target <= 5 s):")
    for name, values in marks.items():
        best = min(values)
        print(f"  {name:52s} {best:6.2f} s  {best / rounds * 1e3:.3f} ms/round  "
              f"{best / floor:.2f}x the decisions alone")
    print(f"  resident memory growth of a run kept in memory: {max(memory):+.1f} MB (the round records)")


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
