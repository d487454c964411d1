"""Training core and FedAvg: batched local SGD against a sequential loop, RNG, aggregation."""
from __future__ import annotations

import copy
import math
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from wirelessfl.learning import Dataset, DatasetNotFoundError, FedAvg, Trainer, load_dataset, partition
from wirelessfl.rng import stream

REPO = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny_dataset(shape=(1, 12, 12), n_train=400, n_test=100, seed=0) -> Dataset:
    # Continuous random inputs: no exact ties in ReLU / max-pool, so float rounding cannot flip a
    # kink and the batched and sequential trajectories stay within rounding of each other.
    g = torch.Generator().manual_seed(seed)
    return Dataset(
        name="tiny",
        x_train=torch.randn(n_train, *shape, generator=g),
        y_train=torch.randint(0, 10, (n_train,), generator=g),
        x_test=torch.randn(n_test, *shape, generator=g),
        y_test=torch.randint(0, 10, (n_test,), generator=g),
        num_classes=10,
        input_shape=shape,
    )


@pytest.fixture(scope="module")
def data():
    ds = tiny_dataset()
    parts = partition(ds.y_train.numpy(), 8, "iid", rng=stream(0, "partition"), samples_per_device=50)
    return ds, parts


def make(data, model="small_cnn", **kw):
    ds, parts = data
    kw = {"local_steps": 4, "batch_size": 8, "lr": 0.1, **kw}
    return Trainer(ds, parts, model, **kw)


def sequential_deltas(trainer: Trainer, devices, round_idx, lrs=None, steps=None):
    """Reference: one device after another with autograd and torch.optim.SGD."""
    out = []
    for j, n in enumerate(devices):
        model = copy.deepcopy(trainer.model).requires_grad_(True)
        torch.nn.utils.vector_to_parameters(trainer.params.clone(), model.parameters())
        lr = trainer.lr if lrs is None else lrs[j]
        k = trainer.local_steps if steps is None else steps[j]
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        batches = trainer.minibatch_indices(n, round_idx)
        for s in range(k):
            opt.zero_grad()
            F.cross_entropy(model(trainer.dataset.x_train[batches[s]]), trainer.dataset.y_train[batches[s]]).backward()
            opt.step()
        out.append(torch.nn.utils.parameters_to_vector(model.parameters()).detach() - trainer.params)
    return torch.stack(out)


@pytest.mark.parametrize("batching", ["vmap", "loop"])
@pytest.mark.parametrize("model", ["small_cnn", "mlp"])
def test_batched_equals_sequential(data, model, batching):
    tr = make(data, model, batching=batching)
    x0 = tr.params.clone()
    devices = [5, 0, 3, 6]
    got = tr.local_updates(devices, round_idx=2)
    ref = sequential_deltas(tr, devices, 2)
    assert got.shape == (4, tr.num_params)
    assert float(ref.norm()) > 1e-3  # the deltas are not trivial
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-6)
    assert torch.equal(tr.params, x0)  # local updates do not move the global model


def test_auto_batching_takes_the_measured_faster_path_and_matches_the_loop(data, monkeypatch):
    cnn, mlp = make(data, "small_cnn"), make(data, "mlp")
    # On the CPU (benchmarks/training.py): vmap only for convolution-free models from 5 devices on.
    assert [cnn.batching_for(k) for k in (1, 5, 20)] == ["loop"] * 3
    assert [mlp.batching_for(k) for k in (1, 4, 5, 20)] == ["loop", "loop", "vmap", "vmap"]
    monkeypatch.setattr(mlp, "device", torch.device("cuda"))  # the rule only, no tensor moves
    mlp.cuda_graphs = True
    # On an H200: the loop (each device's steps a captured CUDA graph) up to 31 devices, one batched
    # call from 32 on; steps that cannot be captured (a direction) batched from three on.
    assert [mlp.batching_for(k) for k in (1, 3, 31, 32, 100)] == ["loop", "loop", "loop", "vmap", "vmap"]
    assert [mlp.batching_for(k, plain=False) for k in (1, 2, 3, 100)] == ["loop", "loop", "vmap", "vmap"]
    mlp.cuda_graphs = False
    assert [mlp.batching_for(k) for k in (1, 2, 3, 100)] == ["loop", "loop", "vmap", "vmap"]
    monkeypatch.undo()
    devices = [0, 1, 2, 3, 4, 5]
    torch.testing.assert_close(mlp.local_updates(devices, 1),
                               make(data, "mlp", batching="loop").local_updates(devices, 1), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("batching", ["vmap", "loop"])
def test_chunking_and_selection_do_not_change_a_devices_update(data, batching):
    tr = make(data, batching=batching)
    full = tr.local_updates([1, 2, 4, 7], 3)
    chunked = make(data, max_devices_per_batch=3, batching=batching).local_updates([1, 2, 4, 7], 3)
    torch.testing.assert_close(chunked, full, rtol=1e-5, atol=1e-7)
    alone = tr.local_updates([4], 3)[0]
    reordered = tr.local_updates([7, 4, 0], 3)[1]
    torch.testing.assert_close(alone, full[2], rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(reordered, full[2], rtol=1e-5, atol=1e-7)


def test_seeds(data):
    a = make(data, root_seed=11)
    b = make(data, root_seed=11)
    c = make(data, root_seed=12)
    assert torch.equal(a.params, b.params) and not torch.equal(a.params, c.params)
    da = a.local_updates([0, 1], 5)
    assert torch.equal(da, b.local_updates([0, 1], 5))
    assert not torch.equal(a.minibatch_indices(0, 5), c.minibatch_indices(0, 5))
    assert not torch.equal(da, a.local_updates([0, 1], 6))  # another round, other batches


def test_minibatch_indices(data):
    ds, parts = data
    tr = make(data, local_steps=5, batch_size=10)
    b = tr.minibatch_indices(3, 0)
    assert b.shape == (5, 10) and b.dtype == torch.int64
    assert set(b.flatten().tolist()) == set(parts[3].tolist())  # 50 = 5 x 10: one full pass
    long = make(data, local_steps=12, batch_size=10).minibatch_indices(3, 0)
    assert set(long.flatten().tolist()) <= set(parts[3].tolist())


@pytest.mark.parametrize("batching", ["vmap", "loop"])
def test_per_device_steps_and_lr(data, batching):
    tr = make(data, "mlp", batching=batching)
    got = tr.local_updates([2, 5, 6], 1, local_steps=[4, 0, 2], lr=[0.1, 0.1, 0.05])
    ref = sequential_deltas(tr, [2, 5, 6], 1, lrs=[0.1, 0.1, 0.05], steps=[4, 0, 2])
    assert torch.count_nonzero(got[1]) == 0
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-6)


def test_aggregate_matches_hand_computation(data):
    tr = make(data, "logreg")
    x0 = tr.params.clone()
    deltas = torch.randn(3, tr.num_params, generator=torch.Generator().manual_seed(0))
    tr.aggregate(deltas, np.array([0.5, 2.0, -1.0]))
    torch.testing.assert_close(tr.params, x0 + 0.5 * deltas[0] + 2.0 * deltas[1] - deltas[2])
    with pytest.raises(ValueError):
        tr.aggregate(deltas, [1.0, 2.0])


def test_evaluate(data):
    ds, _ = data
    tr = make(data, eval_train_samples=64)
    res = tr.evaluate()
    assert set(res) == {"accuracy", "test_loss", "train_loss", "train_accuracy"}
    assert 0.0 <= res["accuracy"] <= 1.0 and 0.0 <= res["train_accuracy"] <= 1.0
    # Same numbers as a plain forward pass over the test set.
    model = copy.deepcopy(tr.model)
    torch.nn.utils.vector_to_parameters(tr.params, model.parameters())
    with torch.no_grad():
        logits = model(ds.x_test)
    assert res["accuracy"] == pytest.approx(float((logits.argmax(1) == ds.y_test).float().mean()))
    assert res["test_loss"] == pytest.approx(float(F.cross_entropy(logits, ds.y_test)), rel=1e-5)
    assert tr.model_bits == 32 * tr.num_params


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("batching", ["loop", "vmap"])
def test_cuda_matches_cpu_and_repeats_bit_for_bit(data, batching):
    cpu, gpu = make(data), make(data, device="cuda", batching=batching)
    torch.testing.assert_close(gpu.params.cpu(), cpu.params)
    first = gpu.local_updates([1, 3, 4], 0)
    torch.testing.assert_close(first.cpu(), cpu.local_updates([1, 3, 4], 0), rtol=1e-4, atol=1e-6)
    assert torch.equal(gpu.local_updates([1, 3, 4], 0), first)  # deterministic cuDNN algorithms
    FedAvg().round(gpu, np.array([1, 3]), np.ones(8), 8, 0)
    assert gpu.params.device.type == "cuda" and 0 <= gpu.evaluate()["accuracy"] <= 1


def test_empty_device_cannot_train():
    ds = tiny_dataset()
    tr = Trainer(ds, [np.arange(10), np.array([], dtype=np.int64)], "logreg")
    with pytest.raises(ValueError, match="no training samples"):
        tr.local_updates([1], 0)


# ---------------------------------------------------------------------------------------------
# FedAvg


def test_fedavg_weights():
    algo = FedAvg()
    q = np.array([0.5, 0.25, 1.0, 0.1])
    w = algo.aggregation_weights(np.array([1, 3, 1]), q, 4)
    np.testing.assert_allclose(w, [1 / (4 * 0.25), 1 / (4 * 0.1), 0.0])  # the repeat counts once
    with pytest.raises(ValueError):
        algo.aggregation_weights(np.array([0]), np.array([0.0, 1.0]), 2)


def test_fedavg_round_matches_bare_pytorch_loop(data):
    spec = importlib.util.spec_from_file_location("overhead_baseline", REPO / "benchmarks" / "overhead_baseline.py")
    baseline = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(baseline)
    tr = make(data)
    ds = tr.dataset
    q = np.linspace(0.2, 1.0, tr.num_devices)
    selected = np.array([6, 2, 6, 4])
    devices = np.unique(selected)
    x0 = tr.params.clone()
    expected = baseline.bare_fedavg_round(
        tr.model, x0, (ds.x_train, ds.y_train), [tr.minibatch_indices(int(n), 7) for n in devices],
        tr.lr, tr.local_steps, FedAvg().aggregation_weights(devices, q, tr.num_devices),
    )
    info = FedAvg().round(tr, selected, q, tr.num_devices, 7)
    assert info["num_trained"] == 3
    assert not torch.equal(tr.params, x0)
    torch.testing.assert_close(tr.params, expected, rtol=1e-4, atol=1e-6)


def test_fedavg_learns_fashion_mnist():
    try:
        full = load_dataset("fashion_mnist")
    except DatasetNotFoundError as e:
        pytest.skip(f"Fashion-MNIST not installed: {e}")
    ds = Dataset(  # the whole training set to draw from, a 2,000-image test set to keep it quick
        name=full.name, x_train=full.x_train, y_train=full.y_train, x_test=full.x_test[:2000],
        y_test=full.y_test[:2000], num_classes=10, input_shape=full.input_shape,
    )
    parts = partition(ds.y_train.numpy(), 10, "iid", rng=stream(0, "partition"), samples_per_device=200)
    tr = Trainer(ds, parts, "small_cnn", local_steps=10, batch_size=32, lr=0.05, eval_train_samples=1000)
    before = tr.evaluate()["accuracy"]
    algo, q = FedAvg(), np.full(10, 0.5)
    select = stream(0, "selection")
    for r in range(4):
        algo.round(tr, np.sort(select.choice(10, 5, replace=False)), q, 10, r)
    after = tr.evaluate()
    assert before < 0.3
    assert after["accuracy"] > 0.5, after  # chance is 0.1
    assert after["train_loss"] < 2.0


def test_fedavg_on_synthetic_with_logreg():
    from wirelessfl.learning import synthetic_federated

    fed = synthetic_federated(10, 0.5, 0.5, 120, np.random.default_rng(0))
    tr = Trainer(fed.dataset, fed.train_indices, "logreg", local_steps=10, batch_size=16, lr=0.05)
    before = tr.evaluate()["train_loss"]
    for r in range(5):
        FedAvg().round(tr, np.arange(10), np.ones(10), 10, r)
    assert tr.evaluate()["train_loss"] < 0.8 * before


def test_over_the_air_aggregate_error_matches_the_channel_and_its_closed_form(data):
    """AirComp: K devices invert their channels (b_k = sqrt(rho0) / h_k) and send their updates
    normalised to unit power; the server receives sqrt(rho0) sum_k s_k + z, z ~ N(0, N0), and takes
    y / (sqrt(rho0) K), scaled back. A Monte Carlo of that channel and the trainer's noisy aggregate
    both give an error of variance N0 / (rho0 K^2) x the updates' power per entry."""
    from wirelessfl.access import AirComp, Link
    from wirelessfl.config import LinkConfig

    k, n0, sigma = 6, 2.0, 0.3
    scheme = AirComp(Link(LinkConfig(noise_power=n0)), truncation_gain=0.5, p_max=8.0)  # rho0 = 4
    facts = scheme.uplink_facts(np.arange(k), np.ones(k), np.ones(k), np.ones(k, dtype=bool))
    closed = n0 / (4.0 * k * k)
    assert facts.noise_var == pytest.approx(closed, rel=1e-12)

    rng = np.random.default_rng(0)
    x = rng.normal(0.0, sigma, (200_000, k))  # one entry of each device's update per trial
    h = rng.rayleigh(1.0, x.shape)
    received = (h * (np.sqrt(4.0) / h) * (x / sigma)).sum(axis=1) + rng.normal(0.0, np.sqrt(n0), len(x))
    estimate = received / (np.sqrt(4.0) * k) * sigma
    assert np.var(estimate - x.mean(axis=1)) == pytest.approx(closed * sigma ** 2, rel=0.02)

    tr = make(data, "logreg")
    deltas = sigma * torch.randn(k, tr.num_params, generator=torch.Generator().manual_seed(1))
    errors = []
    for _ in range(40):
        x0 = tr.params.clone()
        tr.aggregate_noise_var = facts.noise_var
        tr.aggregate(deltas, np.full(k, 1.0 / k))
        errors.append(tr.params - x0 - deltas.mean(0))
    errors = torch.stack(errors).double()
    power = float(deltas.double().square().mean())
    assert float(errors.var()) == pytest.approx(closed * power, rel=0.03)
    assert abs(float(errors.mean())) < 4 * math.sqrt(closed * power / errors.numel())
    assert abs(float(torch.corrcoef(errors[:2])[0, 1])) < 0.1  # fresh noise every aggregation
    x0 = tr.params.clone()
    tr.aggregate(deltas, np.full(k, 1.0 / k))  # the noise was for one aggregate only
    torch.testing.assert_close(tr.params, x0 + deltas.mean(0))


def test_cuda_calls_run_cudnn_in_float32_deterministic_and_restore_the_callers_flags(data, monkeypatch):
    """TF32 convolutions put a CUDA run 1e-3 off the CPU's; autotuned algorithms vary between runs."""
    seen = []
    tr = make(data, "mlp")
    def flags():
        cudnn = torch.backends.cudnn
        return cudnn.allow_tf32, cudnn.deterministic, cudnn.benchmark, torch.get_float32_matmul_precision()

    monkeypatch.setattr(tr, "_loss_acc", lambda *a, **k: seen.append(flags()) or (0.0, 0.0))
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")  # a caller that allows TF32 matrix products
    try:
        before = flags()
        tr.evaluate()
        assert seen[-1] == before  # the CPU path leaves the flags alone
        monkeypatch.setattr(tr, "device", torch.device("cuda"))  # the flags only; evaluate's work is stubbed
        tr.evaluate()
        assert seen[-1] == (False, True, False, "highest")
        assert flags() == before
    finally:
        torch.set_float32_matmul_precision(precision)


@pytest.mark.parametrize("model", ["small_cnn", "mlp"])  # the CNN takes the loop path on the CPU
def test_a_direction_with_per_device_state_is_told_its_devices_on_both_paths(data, model):
    """SCAFFOLD-style: each device's step is g(y) + c[n] with a per-device table c. The direction gets
    ``devices`` (an int on the loop path, a (k,) tensor on the batched one): the same updates on both
    paths, equal to the device-by-device reference with c[n] added by hand."""
    ref_trainer = make(data, model, batching="loop")
    c = torch.randn(ref_trainer.num_devices, ref_trainer.num_params, generator=torch.Generator().manual_seed(3)) * 0.01
    seen = []

    def drift(g, y, x0, anchor_grad, devices):
        seen.append(devices if isinstance(devices, int) else tuple(devices.tolist()))
        return g + c[devices]

    devices = [5, 0, 3]
    loop = make(data, model, batching="loop").local_updates(devices, 2, direction=drift)
    assert 5 in seen and 3 in seen  # one device at a time on the loop path
    seen.clear()
    batched = make(data, model, batching="vmap").local_updates(devices, 2, direction=drift)
    assert seen[0] == (5, 0, 3)  # the stack's devices, in order
    torch.testing.assert_close(batched, loop, rtol=1e-4, atol=1e-6)
    for row, n in enumerate(devices):  # the reference: plain SGD with c[n] added to every step
        y = ref_trainer.params.clone()
        for batch in ref_trainer.minibatch_indices(n, 2):
            y = y - ref_trainer.lr * (ref_trainer.grad(y, data[0].x_train[batch], data[0].y_train[batch]) + c[n])
        torch.testing.assert_close(loop[row], y - ref_trainer.params, rtol=1e-4, atol=1e-6)
    # a direction without the keyword is called as before
    plain = make(data, model, batching="loop").local_updates(devices, 2, direction=lambda g, y, x0, a: g)
    torch.testing.assert_close(plain, make(data, model, batching="loop").local_updates(devices, 2))
