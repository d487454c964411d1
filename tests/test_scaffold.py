"""SCAFFOLD (option II) against a plain reference loop written here, its two-vector uplink, its
per-device control variates (checkpointed by what changed) and kill-and-resume."""
import numpy as np
import pandas as pd
import pytest
import torch

from wirelessfl.config import from_dict
from wirelessfl.experiments.run import simulate
from wirelessfl.learning.algorithms import Updates
from wirelessfl.learning.datasets import Dataset
from wirelessfl.learning.partition import partition
from wirelessfl.learning.scaffold import CONTROL_VARIATES, Scaffold
from wirelessfl.learning.trainer import Trainer
from wirelessfl.rng import stream

pytestmark = pytest.mark.usefixtures("one_torch_thread")

FEATURES, CLASSES, DEVICES = 5, 3, 6


def logistic_problem() -> Dataset:
    g = torch.Generator().manual_seed(3)
    w = torch.randn(FEATURES, CLASSES, generator=g)
    x = torch.randn(360, FEATURES, generator=g)
    y = (x @ w + 0.5 * torch.randn(360, CLASSES, generator=g)).argmax(dim=1)
    return Dataset("logistic", x[:300], y[:300], x[300:], y[300:], CLASSES, (FEATURES,))


def make_trainer(batching: str) -> Trainer:
    data = logistic_problem()
    parts = partition(data.y_train.numpy(), DEVICES, "iid", rng=stream(1, "partition"), samples_per_device=50)
    return Trainer(data, parts, "logreg", local_steps=4, batch_size=8, lr=0.3, batching=batching)


def softmax_regression_grad(W, b, x, y):
    """The gradient of the mean cross-entropy of softmax(x W^T + b), by hand (float64)."""
    z = x @ W.T + b
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(y)), y] -= 1.0
    p /= len(y)
    return p.T @ x, p.sum(axis=0)


def reference_scaffold(trainer: Trainer, rounds, eta_g: float):
    """SCAFFOLD as Karimireddy et al. write it (option II), on the trainer's data and minibatches."""
    x_all = trainer.dataset.x_train.double().numpy()
    y_all = trainer.dataset.y_train.numpy()
    x = trainer.params.double().numpy().copy()  # nn.Linear's layout: W (C, F) row-major, then b (C,)
    d, K, lr = x.size, trainer.local_steps, trainer.lr
    c, c_dev = np.zeros(d), np.zeros((DEVICES, d))
    for r, selected in enumerate(rounds):
        dys, dcs = [], []
        for n in selected:
            y = x.copy()
            for batch in trainer.minibatch_indices(n, r).numpy():
                gW, gb = softmax_regression_grad(y[:CLASSES * FEATURES].reshape(CLASSES, FEATURES),
                                                 y[CLASSES * FEATURES:], x_all[batch], y_all[batch])
                y = y - lr * (np.concatenate([gW.ravel(), gb]) + c - c_dev[n])
            c_new = c_dev[n] - c + (x - y) / (K * lr)
            dys.append(y - x)
            dcs.append(c_new - c_dev[n])
            c_dev[n] = c_new
        x = x + eta_g * np.mean(dys, axis=0)
        c = c + np.sum(dcs, axis=0) / DEVICES
    return x, c, c_dev


ROUNDS = [[0, 2, 5], [1, 2, 3], [0, 4, 5], [2, 3, 5]]


@pytest.mark.parametrize("batching", ["loop", "vmap"])
def test_scaffold_gives_the_reference_loops_iterates_on_both_batching_paths(batching):
    trainer = make_trainer(batching)
    algorithm = Scaffold(server_lr=0.8, aggregation="mean")
    algorithm.setup(trainer)
    x_ref, c_ref, c_dev_ref = reference_scaffold(trainer, ROUNDS, eta_g=0.8)
    for r, selected in enumerate(ROUNDS):
        algorithm.round(trainer, np.array(selected), np.full(DEVICES, 0.5), DEVICES, r)
    np.testing.assert_allclose(trainer.params.numpy(), x_ref, atol=2e-5)
    np.testing.assert_allclose(algorithm.c.numpy(), c_ref, atol=2e-5)
    np.testing.assert_allclose(algorithm.c_devices[np.arange(DEVICES)].numpy(), c_dev_ref, atol=2e-5)
    # the server's variate is the mean of the devices' (which the reference never uses to compute it)
    np.testing.assert_allclose(c_ref, c_dev_ref.mean(axis=0), atol=1e-12)
    assert np.abs(c_ref).max() > 1e-2  # the control variates did something


def test_a_stale_update_applies_its_pair_and_a_lost_one_changes_nothing():
    trainer = make_trainer("loop")
    algorithm = Scaffold()
    algorithm.setup(trainer)
    pairs = algorithm.local_updates(trainer, np.array([1, 4]), 0)
    d = trainer.num_params
    assert pairs.shape == (2, 2 * d)
    assert float(algorithm.c_devices[np.arange(DEVICES)].abs().max()) == 0.0  # training changes no variate
    x0 = trainer.params.clone()
    algorithm.apply_updates(trainer, Updates(np.array([4]), pairs[1:], np.array([0.5]), np.array([2])))
    torch.testing.assert_close(trainer.params, x0 + 0.5 * pairs[1, :d])
    torch.testing.assert_close(algorithm.c_devices[4], pairs[1, d:])
    torch.testing.assert_close(algorithm.c_devices[1], torch.zeros(d))  # device 1's upload never arrived
    torch.testing.assert_close(algorithm.c, pairs[1, d:] / DEVICES)


def scaffold_scenario(**over):
    table = {
        "seed": 4, "run": {"rounds": 8, "eval_every_rounds": 4, "checkpoint_every": 2},
        "channel": {"profile": "linear"}, "devices": {"count": 10},
        "scheduler": {"name": "uniform", "m": 3, "sampling": "without_replacement"},
        "learning": {"algorithm": "scaffold", "model": "logreg", "samples_per_device": 40, "local_steps": 3,
                     "lr": 0.05, "eval_train_samples": 200}}
    for key, value in over.items():
        table.setdefault(key, {}).update(value)
    return from_dict(table)


def test_scaffold_uploads_and_broadcasts_two_vectors():
    timing = {"run": {"timing_only": True}}
    scaffold = simulate(scaffold_scenario(**timing), None, progress=False)
    fedavg = simulate(scaffold_scenario(learning={"algorithm": "fedavg"}, **timing), None, progress=False)
    np.testing.assert_allclose(scaffold.rounds["comm_s"], 2 * fedavg.rounds["comm_s"], rtol=1e-12)
    assert (fedavg.rounds["comm_s"] > 0).all()


@pytest.mark.parametrize("protocol", [{"name": "sync"}, {"name": "fedbuff", "concurrency": 4, "buffer": 2}])
def test_scaffold_resumes_to_identical_records(interrupted_and_resumed, tmp_path, protocol):
    full, resumed = interrupted_and_resumed(scaffold_scenario(protocol=protocol), after=5)
    for attr in ("rounds", "evals"):
        pd.testing.assert_frame_equal(getattr(resumed, attr).reset_index(drop=True),
                                      getattr(full, attr).reset_index(drop=True))
    assert resumed.summary["final_accuracy"] == full.summary["final_accuracy"]
    # the control variates came back from their journal, which the completed run then removed
    assert not (tmp_path / "cut" / "device_state").exists() and not (tmp_path / "cut" / "checkpoint.pt").exists()


def test_a_checkpoint_holds_a_reference_and_the_journal_grows_by_the_rows_written(tmp_path):
    trainer = make_trainer("loop")
    trainer.device_states.use_run_folder(tmp_path)
    state = trainer.device_state("momentum")
    d = trainer.num_params
    state[np.array([1, 3])] = torch.ones(2, d)
    first = trainer.device_states.checkpoint()["momentum"]
    assert first["bytes"] == 8 + 2 * 8 + 2 * d * 4  # a count, two indices, two rows: not N x d
    state[5] = torch.full((d,), 2.0)
    second = trainer.device_states.checkpoint()["momentum"]
    assert second["bytes"] - first["bytes"] == 8 + 8 + d * 4
    state[1] = torch.full((d,), 7.0)  # after the second checkpoint: a resume must not see it
    trainer.device_states.checkpoint()
    again = make_trainer("loop")
    again.device_states.use_run_folder(tmp_path)
    again.device_states.restore({"momentum": second})
    rows = again.device_state("momentum")[np.arange(DEVICES)]
    expected = torch.zeros(DEVICES, d)
    expected[[1, 3]] = 1.0
    expected[5] = 2.0
    torch.testing.assert_close(rows, expected)


def test_a_journal_past_twice_the_array_starts_a_new_generation_and_the_old_one_goes(tmp_path):
    trainer = make_trainer("loop")
    trainer.device_states.use_run_folder(tmp_path)
    state = trainer.device_state("v", width=3)
    folder = tmp_path / "device_state"
    refs, expected = [], np.zeros((DEVICES, 3), dtype=np.float32)
    for step in range(12):  # one row a checkpoint: each segment is 8 + 8 + 12 bytes, the array 72
        device = step % DEVICES
        state[device] = torch.full((3,), float(step))
        expected[device] = step
        refs.append(trainer.device_states.checkpoint()["v"])
    generations = [r["generation"] for r in refs]
    assert generations[0] == 0 and generations[-1] >= 1  # rolled over
    first_new = generations.index(1)
    assert refs[first_new]["bytes"] == 8 + DEVICES * (8 + 12)  # every row written so far, once
    # the generation the previous checkpoint named is kept until the next one; older ones are gone
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted({f"v.g{generations[-2]}.journal", f"v.g{generations[-1]}.journal"})
    again = make_trainer("loop")
    again.device_states.use_run_folder(tmp_path)
    again.device_states.restore({"v": refs[-1]})
    np.testing.assert_array_equal(again.device_state("v", width=3)[np.arange(DEVICES)].numpy(), expected)


def test_a_missing_or_damaged_journal_is_a_one_line_resume_error(tmp_path):
    trainer = make_trainer("loop")
    trainer.device_states.use_run_folder(tmp_path)
    trainer.device_state("v", width=2)[1] = torch.ones(2)
    ref = trainer.device_states.checkpoint()["v"]
    journal = tmp_path / "device_state" / ref["journal"]
    # its one row's index becomes a million
    journal.write_bytes(journal.read_bytes()[:8] + (10 ** 6).to_bytes(8, "little") + journal.read_bytes()[16:])
    with pytest.raises(ValueError, match="names a journal this run cannot read"):
        make_trainer("loop").device_states.restore({"v": ref})  # a run without a folder
    fresh = make_trainer("loop")
    fresh.device_states.use_run_folder(tmp_path)
    with pytest.raises(ValueError, match="v.g0.journal: damaged: its first 24 bytes are not the ones whose digest"):
        fresh.device_states.restore({"v": ref})  # the digest the checkpoint holds tells
    journal.unlink()
    with pytest.raises(ValueError, match="v.g0.journal: cannot be read \\(No such file"):
        fresh.device_states.restore({"v": ref})


def test_a_large_state_is_memory_mapped_in_the_run_folder_with_the_same_records(tmp_path, monkeypatch):
    import wirelessfl.learning.device_state as device_state

    in_memory = simulate(scaffold_scenario(), tmp_path / "memory", progress=False)
    monkeypatch.setattr(device_state, "MEMMAP_BYTES", 1)  # every state counts as large
    trainer = make_trainer("loop")
    trainer.device_states.use_run_folder(tmp_path / "run")
    state = trainer.device_state("v")
    assert state.memory_mapped and (tmp_path / "run" / "device_state").is_dir()
    assert not list((tmp_path / "run" / "device_state").iterdir())  # a scratch file without a name
    state[2] = torch.ones(trainer.num_params)
    assert state.array[2].sum() == trainer.num_params and state[2].sum() == trainer.num_params
    mapped = simulate(scaffold_scenario(), tmp_path / "mapped", progress=False)
    for attr in ("rounds", "evals"):
        pd.testing.assert_frame_equal(getattr(mapped, attr), getattr(in_memory, attr))
    assert not (tmp_path / "mapped" / "device_state").exists()  # removed with the checkpoint at the end


def test_over_the_air_both_of_scaffold_s_sums_carry_their_own_noise():
    """Under AirComp the server receives the noisy sums of the devices' delta_y and delta_c: c's noise
    has variance noise_var x the mean power of what the devices send, and is independent of x's."""
    data = logistic_problem()
    parts = partition(data.y_train.numpy(), DEVICES, "iid", rng=stream(1, "partition"), samples_per_device=50)
    trainer = Trainer(data, parts, "mlp", local_steps=4, batch_size=8, lr=0.3)  # d = 42,003: many entries
    algorithm = Scaffold(aggregation="mean")
    algorithm.setup(trainer)
    devices = np.array([0, 2, 3, 5])
    pairs = algorithm.local_updates(trainer, devices, 0)
    d, x0 = trainer.num_params, trainer.params.clone()
    weights = np.full(devices.size, 1 / devices.size)
    trainer.aggregate_noise_var = 0.25
    algorithm.apply_updates(trainer, Updates(devices, pairs, weights, np.zeros(devices.size)))
    noise_x = trainer.params - x0 - torch.as_tensor(weights, dtype=torch.float32) @ pairs[:, :d]
    noise_c = algorithm.c - pairs[:, d:].sum(dim=0) / DEVICES
    sent_c = pairs[:, d:] * (devices.size / DEVICES)  # k w_k delta_c with w_k = 1 / N
    assert float(noise_c.var()) == pytest.approx(0.25 * float(sent_c.square().mean()), rel=0.05)
    assert abs(float(torch.corrcoef(torch.stack([noise_x, noise_c]))[0, 1])) < 0.03
    torch.testing.assert_close(algorithm.c_devices[devices], pairs[:, d:])  # the devices know their own exactly
