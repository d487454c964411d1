"""The batched path's gradients without torch's compiler (learning/lean_func.py): the same numbers as
torch's own transforms of F.cross_entropy, bit for bit, and none of the compiler's modules imported."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch._functorch import eager_transforms
from torch.func import grad, vmap

from wirelessfl.learning import lean_func, partition
from wirelessfl.learning.models import MODEL_NAMES
from wirelessfl.learning.numerics import plain_float32
from wirelessfl.rng import stream

from test_trainer import REPO, make, tiny_dataset

pytestmark = pytest.mark.usefixtures("one_torch_thread")
COMPILER = ("torch._dynamo", "torch._inductor", "sympy", "triton")


def stacked_inputs(trainer, k=5, seed=1):
    """k perturbed copies of the model and a minibatch for each (continuous inputs: no ReLU ties)."""
    g = torch.Generator().manual_seed(seed)
    y = trainer.params.cpu().expand(k, -1) + 0.05 * torch.randn(k, trainer.num_params, generator=g)
    ix = torch.randint(0, len(trainer.dataset.y_train), (k, 8), generator=g)
    return y, trainer.dataset.x_train[ix], trainer.dataset.y_train[ix]


@pytest.fixture(scope="module")
def images():
    """Fashion-MNIST's shape (every built-in model takes it), random continuous pixels."""
    ds = tiny_dataset(shape=(1, 28, 28), n_train=200, n_test=20)
    return ds, partition(ds.y_train.numpy(), 8, "iid", rng=stream(0, "partition"), samples_per_device=20)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device"))])
@pytest.mark.parametrize("model", MODEL_NAMES)
def test_batched_gradients_and_hvps_equal_torch_s_own_transforms_of_cross_entropy_bit_for_bit(images, model, device,
                                                                                               monkeypatch):
    trainer = make(images, model, batching="vmap", device=device)
    y, xb, yb = (t.to(device) for t in stacked_inputs(trainer))
    v = torch.randn(y.shape, generator=torch.Generator().manual_seed(2)).to(device)
    # both sides with the kernels the trainer's callers choose (numerics.float32_kernels)
    with plain_float32():
        ours_g, ours_h = trainer.batched_grad(y, xb, yb), trainer.batched_hvp(y, v, xb, yb)

    # torch's own: its _autograd_grad (with the compiler's context: outside the trainer's calls the
    # function is torch's) and F.cross_entropy (Trainer.loss)
    assert not hasattr(eager_transforms._autograd_grad, "_wirelessfl_lean")
    torch_grad = grad(trainer.loss)
    with plain_float32():
        ref_g = vmap(torch_grad)(y, xb, yb)
        ref_h = vmap(grad(lambda p, t, xs, ys: torch.dot(torch_grad(p, xs, ys), t)))(y, v, xb, yb)

    assert ours_g.abs().max() > 0 and ours_h.abs().max() > 0
    assert torch.equal(ours_g, ref_g), (ours_g - ref_g).abs().max()
    assert torch.equal(ours_h, ref_h), (ours_h - ref_h).abs().max()


TRAIN_TWICE = f"""
import sys
sys.path.insert(0, "tests")
import torch
loaded = set(sys.modules)
from test_trainer import tiny_dataset
from wirelessfl.learning import Trainer, partition
from wirelessfl.rng import stream
ds = tiny_dataset()
parts = partition(ds.y_train.numpy(), 8, "iid", rng=stream(0, "partition"), samples_per_device=50)
trainer = Trainer(ds, parts, "mlp", local_steps=2, batch_size=8, lr=0.1, batching="vmap")
trainer.local_updates(list(range(6)), 0)
w = trainer.params.expand(6, -1).clone()  # Per-FedAvg's exact variant: Hessian-vector products
trainer.batched_hvp(w, w, *trainer.batch(torch.arange(48).reshape(6, 8)))
trainer.hvp(w[0], w[0], *trainer.batch(torch.arange(8)))
new = set(sys.modules) - loaded
print(sorted(p for p in {COMPILER!r} if any(m == p or m.startswith(p + ".") for m in new)))

# then as after a user's torch.compile, which may switch compiled autograd on
import torch._dynamo.compiled_autograd as compiled
calls = []
own = compiled._disable
compiled._disable = lambda: (calls.append(1), own())[1]
trainer.local_updates(list(range(6)), 1)
print(len(calls))
"""


def test_a_batched_run_imports_nothing_of_torch_s_compiler_and_defers_to_it_once_it_is_loaded():
    done = subprocess.run([sys.executable, "-c", TRAIN_TWICE], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    imported, calls = done.stdout.strip().splitlines()[-2:]
    assert imported == "[]"
    assert int(calls) == 2  # torch's own context wraps the gradient of each of the 2 local steps again


def test_a_function_of_another_shape_is_left_alone(monkeypatch):
    def other(outputs, inputs, *, retain_graph=False):  # a torch whose private function changed
        raise AssertionError("not to be called")

    monkeypatch.setattr(eager_transforms, "_autograd_grad", other)
    with lean_func.lean_grad():
        assert eager_transforms._autograd_grad is other


def test_the_lean_function_holds_only_inside_the_trainer_s_transforms(images, monkeypatch):
    own = eager_transforms._autograd_grad
    assert not hasattr(own, "__wrapped__")
    seen = []
    trainer = make(images, "mlp", batching="vmap")
    y, xb, yb = stacked_inputs(trainer)
    monkeypatch.setattr(lean_func, "cross_entropy", lambda *a: (seen.append(eager_transforms._autograd_grad),
                                                                 lean_func.F.cross_entropy(*a))[1])
    trainer.batched_grad(y, xb, yb)
    assert seen and getattr(seen[0], "_wirelessfl_lean", False) and seen[0].__wrapped__ is own
    assert eager_transforms._autograd_grad is own  # a user's torch.func afterwards gets torch's own
    with lean_func.lean_grad(), lean_func.lean_grad():  # nested: still lean, then torch's again
        assert eager_transforms._autograd_grad.__wrapped__ is own
    assert eager_transforms._autograd_grad is own


def test_the_environment_switches_it_off(images, monkeypatch):
    monkeypatch.setenv(lean_func.ENV, "0")
    own = eager_transforms._autograd_grad
    with lean_func.lean_grad():
        assert eager_transforms._autograd_grad is own
    monkeypatch.setenv(lean_func.ENV, "1")
    with lean_func.lean_grad():
        assert eager_transforms._autograd_grad.__wrapped__ is own
