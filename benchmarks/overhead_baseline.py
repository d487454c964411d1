"""Baseline for measuring the training core's overhead: a plain sequential PyTorch FedAvg round.

``bare_fedavg_round`` is what one would write without a simulator: for each selected device copy
the model, take K steps of ``torch.optim.SGD`` on its minibatches, collect the delta, and apply the
weighted sum. Fed the batches the Trainer would use (``Trainer.minibatch_indices``), it computes
the same round as ``FedAvg.round`` (up to float rounding), so the two can be timed against each other.

Run ``python benchmarks/overhead_baseline.py`` to print both per-round times and their ratio,
measured in the same process on the same machine.
"""
from __future__ import annotations

import argparse
import copy
import time
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters


def bare_fedavg_round(
    model: torch.nn.Module,
    params: torch.Tensor,
    data: tuple[torch.Tensor, torch.Tensor],
    device_batches: Sequence[torch.Tensor],
    lr: float,
    steps: int,
    weights: Sequence[float] | None = None,
) -> torch.Tensor:
    """One FedAvg round, device after device, with stock PyTorch.

    model: the architecture (its own parameters are not changed); params: the flat global model
    x_t; data: (x_train, y_train); device_batches[j]: LongTensor (>= steps, B) of indices into
    x_train for the j-th selected device; weights[j]: its aggregation weight (default 1/k).
    Returns x_t + sum_j weights[j] * (y_K^j - x_t) as a new flat tensor.
    """
    x, y = data
    k = len(device_batches)
    weights = [1.0 / k] * k if weights is None else list(weights)
    new = params.detach().clone()
    for batches, w in zip(device_batches, weights):
        local = copy.deepcopy(model)
        local.requires_grad_(True)
        vector_to_parameters(params.detach().clone(), local.parameters())
        opt = torch.optim.SGD(local.parameters(), lr=lr)
        for s in range(steps):
            b = batches[s]
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(local(x[b]), y[b]).backward()
            opt.step()
        new += w * (parameters_to_vector(local.parameters()).detach() - params)
    return new


def main(argv: Sequence[str] | None = None) -> None:
    """Time Trainer + FedAvg against ``bare_fedavg_round`` on the same batches and print the ratio."""
    from wirelessfl.learning import FedAvg, Trainer, load_dataset, partition
    from wirelessfl.rng import stream

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="fashion_mnist")
    ap.add_argument("--model", default="small_cnn")
    ap.add_argument("--devices", type=int, default=100, help="N")
    ap.add_argument("--selected", type=int, default=10, help="devices trained per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--local-steps", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--torch-device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    ds = load_dataset(args.dataset)
    parts = partition(ds.y_train.numpy(), args.devices, "iid", rng=stream(0, "partition"))
    trainer = Trainer(
        ds, parts, args.model, local_steps=args.local_steps, batch_size=args.batch_size, device=args.torch_device
    )
    algo = FedAvg()
    n = args.devices
    q = np.full(n, args.selected / n)
    x_dev, y_dev = ds.x_train.to(trainer.device), ds.y_train.to(trainer.device)
    sel_rng = stream(0, "selection")

    def sync():
        if trainer.device.type == "cuda":
            torch.cuda.synchronize()

    t_ours = t_bare = 0.0
    for r in range(args.rounds + 1):  # round 0 warms up both paths and is not timed
        selected = np.sort(sel_rng.choice(n, args.selected, replace=False))
        x_t = trainer.params.clone()
        batches = [trainer.minibatch_indices(int(d), r).to(trainer.device) for d in selected]
        weights = algo.aggregation_weights(selected, q, n)
        sync()
        t0 = time.perf_counter()
        bare = bare_fedavg_round(trainer.model, x_t, (x_dev, y_dev), batches, trainer.lr, args.local_steps, weights)
        sync()
        t1 = time.perf_counter()
        algo.round(trainer, selected, q, n, r)
        sync()
        t2 = time.perf_counter()
        if r > 0:
            t_bare += t1 - t0
            t_ours += t2 - t1
        err = float((trainer.params - bare).abs().max())
    print(
        f"{args.model} on {args.dataset}, {args.selected} devices x {args.local_steps} steps x B={args.batch_size}, "
        f"{args.torch_device}: bare loop {t_bare / args.rounds * 1e3:.1f} ms/round, "
        f"trainer {t_ours / args.rounds * 1e3:.1f} ms/round, ratio trainer/bare {t_ours / t_bare:.2f} "
        f"(last-round max |difference| {err:.2e})"
    )


if __name__ == "__main__":
    main()
