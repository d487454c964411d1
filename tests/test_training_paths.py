"""The training core's fast paths give the numbers of the reference paths: the module bound once per
update (binding.py) against functional_call every step, and on CUDA the captured local steps
(graphs.py) against the eager ones."""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.func import functional_call

from wirelessfl.learning import Trainer
from wirelessfl.learning.binding import FlatBinding

from test_trainer import data, make as make_trainer  # noqa: F401 (data: the fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def make(data, model="small_cnn", **kw):
    """test_trainer's tiny trainer, on the loop path unless told otherwise."""
    return make_trainer(data, model, **{"batching": "loop", **kw})


def functional_deltas(trainer: Trainer, devices, round_idx, direction=None):
    """Reference: each step through Trainer.grad (functional_call on a fresh flat leaf)."""
    out = []
    for n in devices:
        x0 = trainer.params
        y = x0.clone()
        for ix in trainer.minibatch_indices(n, round_idx):
            xb, yb = trainer.batch(ix)
            g = trainer.grad(y, xb, yb)
            if direction is not None:
                g = direction(g, y, x0, None)
            y.sub_(g, alpha=trainer.lr)
        out.append(y - x0)
    return torch.stack(out)


@pytest.mark.parametrize("model", ["small_cnn", "mlp", "logreg"])
def test_the_loop_path_gives_the_functional_path_s_numbers_bit_for_bit(data, model):
    trainer = make(data, model)
    assert torch.equal(trainer.local_updates([0, 5, 2], 3), functional_deltas(trainer, [0, 5, 2], 3))


def test_a_direction_on_the_loop_path_sees_the_current_local_model(data):
    trainer = make(data, "mlp")
    prox = lambda g, y, x0, anchor: g + 0.3 * (y - x0)  # FedProx's term: wrong if y were stale
    got = trainer.local_updates([1, 4], 2, direction=prox)
    assert torch.equal(got, functional_deltas(trainer, [1, 4], 2, direction=prox))
    assert not torch.equal(got, trainer.local_updates([1, 4], 2))


def test_the_binding_gives_the_module_its_parameters_back_and_handles_tied_weights():
    torch.manual_seed(0)
    shared = nn.Linear(4, 4)
    model = nn.Sequential(shared, nn.ReLU(), shared)  # one parameter in two places
    named = list(model.named_parameters())
    binding = FlatBinding(model)
    own = [p for _, p in named]
    flat = torch.cat([p.detach().reshape(-1) for p in own]) + 0.5
    x = torch.randn(3, 4)
    with binding.bound() as bind:
        leaves = bind(flat)
        g = binding.flat_grad(model(x).square().sum(), leaves)
    assert [p for _, p in model.named_parameters()] == own  # the module's own parameters are back
    leaf = flat.clone().requires_grad_(True)
    pieces = {n: piece.view(p.shape) for (n, p), piece in zip(named, torch.split(leaf, [p.numel() for p in own]))}
    (ref,) = torch.autograd.grad(functional_call(model, pieces, (x,)).square().sum(), leaf)
    assert torch.equal(g, ref)


def test_the_cpu_captures_no_graphs(data):
    trainer = make(data)
    trainer.local_updates([0], 0)
    assert not trainer.cuda_graphs and trainer._graphs is None


@cuda
@pytest.mark.parametrize("model", ["small_cnn", "mlp"])
def test_captured_local_steps_give_the_eager_steps_numbers_bit_for_bit(data, model):
    graphed, eager = make(data, model, device="cuda"), make(data, model, device="cuda")
    eager.cuda_graphs = False
    for round_idx in range(3):  # the first captures, the others replay
        assert torch.equal(graphed.local_updates([0, 6], round_idx), eager.local_updates([0, 6], round_idx))
    assert graphed._graphs is not None and len(graphed._graphs._graphs) == 1
    mixed = graphed.local_updates([1, 2], 5, local_steps=[4, 2], lr=[0.1, 0.05])  # another graph per (K, lr)
    assert torch.equal(mixed, eager.local_updates([1, 2], 5, local_steps=[4, 2], lr=[0.1, 0.05]))


@cuda
def test_the_batched_path_on_cuda_repeats_and_matches_the_cpu(data):
    gpu, cpu = make(data, device="cuda", batching="vmap"), make(data, batching="vmap")
    first = gpu.local_updates([0, 3, 5, 7], 1)
    assert torch.equal(gpu.local_updates([0, 3, 5, 7], 1), first)
    torch.testing.assert_close(first.cpu(), cpu.local_updates([0, 3, 5, 7], 1), rtol=1e-4, atol=1e-5)
