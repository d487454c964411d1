"""Training core: the selected devices' local updates, one batched vmap call per step vs a loop.

For each model and each number of selected devices m, two Trainers on the same data, the same
initial model and the same minibatch streams compute one round of local updates (K = 10 steps,
B = 32): ``batching="loop"`` (one device after another, the reference path) and
``batching="vmap"`` (torch.func: every device's step in one vectorised call). Prints the median
milliseconds per round of each, the loop/vmap ratio measured in this run (> 1: vmap faster), the
largest difference between the two paths' updates, and the path ``batching="auto"`` picks here.
``--device cuda`` runs both paths on the GPU (each timing waits for the GPU to finish).

    python benchmarks/training.py [--models mlp paper_cnn] [--m 1 5 10 20] [--repeats 5] [--threads 1]
    python benchmarks/training.py --device cuda --m 1 10 50 100
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from wirelessfl.learning import Trainer, load_dataset, partition


def compare(loop: Trainer, vmap: Trainer, devices: list[int], repeats: int):
    """Median ms per round of each path, timed alternately so that load changes hit both alike,
    and the largest difference between their updates."""
    diff = float((loop.local_updates(devices, 0) - vmap.local_updates(devices, 0)).abs().max())
    times = {"loop": [], "vmap": []}
    for r in range(repeats):
        for name, trainer in (("loop", loop), ("vmap", vmap)):
            start = time.perf_counter()
            trainer.local_updates(devices, round_idx=r + 1)
            if trainer.device.type == "cuda":  # kernels run asynchronously: time their end
                torch.cuda.synchronize(trainer.device)
            times[name].append(time.perf_counter() - start)
    return 1e3 * float(np.median(times["loop"])), 1e3 * float(np.median(times["vmap"])), diff


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["mlp", "paper_cnn"])
    ap.add_argument("--m", type=int, nargs="+", default=[1, 5, 10, 20])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="torch device of both paths, e.g. cpu or cuda")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    data = load_dataset("fashion_mnist")
    parts = partition(data.y_train.numpy(), max(args.m), "iid", rng=np.random.default_rng(0),
                      samples_per_device=500)
    where = (torch.cuda.get_device_name(args.device) if args.device.startswith("cuda")
             else f"{args.threads} torch thread(s), CPU")
    print(f"Median ms per round of local updates (K = 10, B = 32, {where})")
    print(f"{'model':>10} {'m':>3} {'loop ms':>9} {'vmap ms':>9} {'loop/vmap':>10} {'max |diff|':>11} {'auto':>5}")
    for model in args.models:
        trainers = {b: Trainer(data, parts, model, local_steps=10, batch_size=32, lr=0.05, batching=b,
                            device=args.device)
                    for b in ("loop", "vmap", "auto")}
        for m in args.m:
            devices = list(range(m))
            loop_ms, vmap_ms, diff = compare(trainers["loop"], trainers["vmap"], devices, args.repeats)
            print(f"{model:>10} {m:>3} {loop_ms:>9.1f} {vmap_ms:>9.1f} {loop_ms / vmap_ms:>9.2f}x "
                  f"{diff:>11.1e} {trainers['auto'].batching_for(m):>5}")


if __name__ == "__main__":
    main()
