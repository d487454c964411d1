"""What a checkpoint of a SCAFFOLD run writes, against the N x d array of control variates it keeps.

A SCAFFOLD run with the small CNN on Fashion-MNIST, N devices, m per round, a checkpoint every
``--every`` rounds. For each checkpoint it prints the bytes written (checkpoint.pt plus what the
journal grew by) beside N x d x 4, the size of the devices' control variates, and the time the
checkpoint took; then the final journal size against the whole array.

    python benchmarks/device_state.py [--devices 500] [--m 10] [--rounds 12] [--every 2]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from wirelessfl.config import from_dict
from wirelessfl.experiments.run import simulate
from wirelessfl.sim.run import runner


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=500)
    parser.add_argument("--m", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--every", type=int, default=2)
    args = parser.parse_args()
    scenario = from_dict({
        "seed": 1, "run": {"rounds": args.rounds, "eval_every_rounds": args.rounds, "checkpoint_every": args.every},
        "devices": {"count": args.devices}, "scheduler": {"name": "uniform", "m": args.m},
        "learning": {"algorithm": "scaffold", "model": "small_cnn", "samples_per_device": 100, "local_steps": 2,
                     "eval_train_samples": 1000}})
    rows = []
    real = runner.save_checkpoint

    def measured(path: Path, state: dict) -> None:
        journal = path.parent / "device_state"
        before = sum(f.stat().st_size for f in journal.glob("*.journal")) if journal.exists() else 0
        start = time.perf_counter()
        real(path, state)
        rows.append((state["engine"]["rounds_done"], path.stat().st_size, before, time.perf_counter() - start))

    runner.save_checkpoint = measured
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = simulate(scenario, Path(tmp) / "run", progress=False)
        elapsed = time.perf_counter() - start
        journal = sum(f.stat().st_size for f in (Path(tmp) / "run" / "device_state").glob("*.journal"))
    d = result.summary["model_bits"] // 32
    whole = args.devices * d * 4
    print(f"SCAFFOLD, small CNN (d = {d:,}), N = {args.devices}, m = {args.m}: control variates N x d x 4 = "
          f"{whole / 2 ** 20:.1f} MiB; run {elapsed:.1f} s")
    print("round  checkpoint.pt  journal grew  written / (N x d x 4)")
    previous = 0
    for rounds_done, size, before, _ in rows:
        grew = before - previous  # the journal grew in the state_dict just before this save
        previous = before
        print(f"{rounds_done:5d}  {size / 2 ** 20:10.2f} MiB  {grew / 2 ** 20:9.2f} MiB  {(size + grew) / whole:10.3f}")
    print(f"journal at the end: {journal / 2 ** 20:.1f} MiB ({journal / whole:.2f} x the array)")


if __name__ == "__main__":
    main()
