"""Sweep executors: speed-up of a 2-process pool over serial, and Dask's overhead over the pool.

Runs the same sweep of 8 short timing-only runs (4 values of V x 2 seeds, N = 100 heterogeneous
devices, Lyapunov scheduler) serially, in a local process pool and on a Dask LocalCluster, back to
back in this one process, each into a fresh folder and each timed from the call to the finished
table (pool and cluster start-up included: that is what a user waits for). With --repeat R the
three are measured R times, interleaved, and the medians are used. Prints the times and the ratios
and checks that the three tables agree.

    python benchmarks/sweep.py [--rounds 300] [--workers 2] [--repeat 1]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from wirelessfl.config import from_dict
from wirelessfl.experiments.executors import cores as _cores
from wirelessfl.experiments.sweep import METRICS, load_table, sweep

GRID = ["scheduler.V=1,10,100,1000"]


def scenario(rounds: int):
    return from_dict({
        "name": "bench", "run": {"rounds": rounds, "timing_only": True},
        "channel": {"profile": "linear", "sigma_min": 0.1, "sigma_max": 10.0},
        "devices": {"count": 100},
        "link": {"model_bits": 32 * 555178, "p_max": "35 dB", "bandwidth_hz": 22e6},
        "scheduler": {"name": "lyapunov", "m": 10},
    })


def one(executor: str, out: str, rounds: int, workers: int) -> None:
    """Child mode: time one sweep and print the seconds as JSON."""
    t0 = time.perf_counter()
    res = sweep(scenario(rounds), grid=GRID, seeds=2, executor=executor, workers=workers,
                out_dir=out, progress=False)
    seconds = time.perf_counter() - t0
    assert res.failed == 0, res.table["error"].tolist()
    print(json.dumps({"seconds": seconds}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=300, help="rounds per run (default 300)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1, help="measure each executor this many times")
    ap.add_argument("--one", nargs=2, metavar=("EXECUTOR", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        return one(args.one[0], args.one[1], args.rounds, args.workers)

    times: dict[str, list[float]] = {"serial": [], "process": [], "dask": []}
    run_s: dict[str, list[float]] = {e: [] for e in times}  # mean wall time of one run, inside the worker
    tables = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeat):
            for executor in times:
                out = Path(tmp) / f"{executor}-{r}"
                proc = subprocess.run([sys.executable, __file__, "--rounds", str(args.rounds), "--workers",
                                       str(args.workers), "--one", executor, str(out)],
                                      capture_output=True, text=True, check=True)
                times[executor].append(json.loads(proc.stdout.strip().splitlines()[-1])["seconds"])
                tables[executor] = load_table(out)
                run_s[executor].append(float(tables[executor]["wall_time_s"].mean()))
    cols = [c for c in METRICS if c != "wall_time_s"] + ["key"]
    same = all(tables[e][cols].equals(tables["serial"][cols]) for e in tables)
    med = {e: statistics.median(t) for e, t in times.items()}
    per_run = statistics.median(run_s["serial"])

    print(f"8 runs (N=100, m=10, {args.rounds} rounds, timing-only; {per_run:.2f} s per run serially), "
          f"{args.workers} workers, {_cores()} cores, median of {args.repeat}")
    for e, t in med.items():
        print(f"  {e:8s} {t:7.2f} s   (each: {', '.join(f'{x:.2f}' for x in times[e])}; "
              f"one run inside: {statistics.median(run_s[e]):.2f} s)")
    print(f"process pool speed-up over serial:      {med['serial'] / med['process']:.2f}x")
    print(f"Dask LocalCluster time / process pool:  {med['dask'] / med['process']:.2f}x "
          f"(+{med['dask'] - med['process']:.2f} s)")
    print(f"tables identical across executors: {same}")


if __name__ == "__main__":
    main()
