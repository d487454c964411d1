"""Training core: the selected devices' local updates (loop and batched paths), against plain PyTorch.

For each model and each number of selected devices m, Trainers on the same data, the same initial
model and the same minibatch streams compute one round of local updates (K = 10 steps, B = 32):
``batching="loop"`` (one device after another) and ``batching="vmap"`` (every device's step in one
vectorised call). Prints the median milliseconds per round of each, loop/vmap (> 1: vmap faster),
the largest difference between the two paths' updates, the path ``batching="auto"`` picks here and
its samples per second. At m = 1 it also times a plain ``nn.Module`` loop with ``torch.optim.SGD`` on
the same minibatches in the same process (the goal: the loop path within 1.1x of it).
``--device cuda`` runs everything on the GPU (each timing waits for the GPU to finish) and adds:
the loop path without its CUDA graphs (``eager``, up to m = 10: it must give the same numbers bit for
bit).

``--end-to-end SCENARIO`` instead runs a scenario's variants with ``wirelessfl run`` in a fresh
process (``run.device`` and ``run.threads`` set from ``--device`` and ``--threads``) and prints the
command's wall time and each variant's ``wall_time_s``.

    python benchmarks/training.py [--models mlp paper_cnn] [--m 1 5 10 20] [--repeats 5] [--threads 1]
    python benchmarks/training.py --device cuda --m 1 3 10 100 300 1000 --repeats 3
    python benchmarks/training.py --end-to-end scenarios/async.toml [--variants fedasync] [--device cuda]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from wirelessfl.learning import Trainer, load_dataset, partition

from overhead_baseline import bare_fedavg_round

K, B, LR = 10, 32, 0.05


def _wait(device: torch.device) -> None:
    if device.type == "cuda":  # kernels run asynchronously: time their end
        torch.cuda.synchronize(device)


def timed(fn, device: torch.device) -> float:
    start = time.perf_counter()
    fn()
    _wait(device)
    return time.perf_counter() - start


def plain_loop(trainer: Trainer):
    """One device's K steps in plain PyTorch (overhead_baseline.bare_fedavg_round: a copy of the module,
    torch.optim.SGD, the delta applied with weight 1), on the minibatches the trainer's device 0 takes
    in the given round."""
    data = (trainer._x_train, trainer._y_train)
    return lambda round_idx: bare_fedavg_round(trainer.model, trainer.params, data,
                                               [trainer.minibatch_indices(0, round_idx).to(trainer.device)],
                                               LR, K, weights=[1.0])


def bench_model(model: str, data, parts, args, device: torch.device) -> None:
    cuda = device.type == "cuda"
    make = lambda **kw: Trainer(data, parts, model, local_steps=K, batch_size=B, lr=LR, device=device, **kw)
    paths = {b: make(batching=b) for b in ("loop", "vmap", "auto")}
    extra = {}
    if cuda:
        extra["eager"] = make(batching="loop")
        extra["eager"].cuda_graphs = False
    for m in args.m:
        devices = list(range(m))
        ref = paths["loop"].local_updates(devices, 0)
        diff = float((ref - paths["vmap"].local_updates(devices, 0)).abs().max())
        _wait(device)
        times = {name: [] for name in (*paths, *extra) if name != "auto"}
        plain = plain_loop(paths["loop"]) if m == 1 else None
        if plain is not None:
            times["plain"] = []
        same = None
        if "eager" in extra and m <= 10:
            same = bool(torch.equal(ref, extra["eager"].local_updates(devices, 0)))
        for r in range(args.repeats):
            for name in times:
                if name == "eager" and m > 10:
                    continue
                if name == "plain":
                    times[name].append(timed(lambda: plain(r + 1), device))
                    continue
                trainer = paths.get(name) or extra[name]
                times[name].append(timed(lambda: trainer.local_updates(devices, r + 1), device))
        ms = {name: 1e3 * float(np.median(t)) for name, t in times.items() if t}
        auto = paths["auto"].batching_for(m)
        rate = m * K * B / ms[auto] * 1e3 / 1e6
        line = (f"{model:>10} {m:>5} {ms['loop']:>9.2f} {ms['vmap']:>9.2f} {ms['loop'] / ms['vmap']:>9.2f}x "
                f"{diff:>10.1e} {auto:>5} {rate:>9.3f}")
        if "plain" in ms:
            line += f"   plain {ms['plain']:.2f} ms, loop/plain {ms['loop'] / ms['plain']:.3f}"
        if "eager" in ms:
            line += f"   eager {ms['eager']:.2f} ms ({'same numbers' if same else 'NUMBERS DIFFER'})"
        print(line, flush=True)


def end_to_end(args) -> None:
    """``wirelessfl run`` of a scenario's variants in a fresh process: its wall time and the variants'."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "wirelessfl.cli", "run", args.end_to_end, "--out", tmp, "--overwrite",
               "--no-progress", "--set", f"run.device={args.device}", "--set", f"run.threads={args.threads}"]
        for v in args.variants or []:
            cmd += ["--variant", v]
        for kv in args.set or []:
            cmd += ["--set", kv]
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            sys.exit(f"the run failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        where = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else \
            f"CPU, {args.threads} torch thread(s)"
        print(f"{args.end_to_end} on {where} {' '.join(args.set or [])}: {wall:.1f} s for the command")
        for summary in sorted(Path(tmp).glob("*/summary.json")):
            s = json.loads(summary.read_text())
            print(f"  {summary.parent.name:>10}: {s['wall_time_s']:.1f} s wall, {s['aggregations']} aggregations, "
                  f"final accuracy {s['final_accuracy']:.4f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["mlp", "paper_cnn"])
    ap.add_argument("--m", type=int, nargs="+", default=[1, 5, 10, 20])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda")
    ap.add_argument("--end-to-end", metavar="SCENARIO", help="time `wirelessfl run SCENARIO` instead")
    ap.add_argument("--variants", nargs="+", help="with --end-to-end: only these variants")
    ap.add_argument("--set", action="append", metavar="KEY=VALUE", help="with --end-to-end: passed to the run")
    args = ap.parse_args(argv)
    if args.end_to_end:
        return end_to_end(args)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    data = load_dataset("fashion_mnist")
    parts = partition(data.y_train.numpy(), max(args.m), "iid", rng=np.random.default_rng(0),
                      samples_per_device=500)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"{args.threads} torch thread(s), CPU"
    print(f"Median ms per round of local updates (K = {K}, B = {B}, {where}, torch {torch.__version__})")
    print(f"{'model':>10} {'m':>5} {'loop ms':>9} {'vmap ms':>9} {'loop/vmap':>10} {'max|diff|':>10} {'auto':>5} "
          f"{'M samp/s':>9}")
    for model in args.models:
        bench_model(model, data, parts, args, device)


if __name__ == "__main__":
    main()
