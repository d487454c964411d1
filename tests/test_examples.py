"""The examples under examples/, run as a user runs them (the CLI, from their own folder), at a
small scale: each does what its file says."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from wirelessfl import load_decisions
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def cli(*args, cwd=None) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "wirelessfl.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc


def selected(rounds: pd.DataFrame) -> list[list[int]]:
    return [[int(v) for v in str(s).split()] for s in rounds["selected"]]


def test_topk_selects_the_k_best_channels_every_round(tmp_path):
    mine = shutil.copytree(EXAMPLES / "topk", tmp_path / "mine")  # the user's own folder
    cli("run", mine / "topk.toml", "--timing-only", "--set", "run.time_budget_s=5", "--out", tmp_path / "out",
        "--no-progress", cwd=tmp_path)
    run = tmp_path / "out" / "topk"
    gains = load_decisions(run)["gains"]
    rounds = pd.read_csv(run / "rounds.csv")
    assert len(rounds) > 10
    for r, chosen in enumerate(selected(rounds)):
        assert chosen == sorted(np.argsort(-gains[r], kind="stable")[:10].tolist())


@pytest.mark.slow
def test_topk_trains_against_lyapunov(tmp_path):
    out = tmp_path / "out"
    cli("run", EXAMPLES / "topk" / "topk.toml", "--set", "run.time_budget_s=3", "--set",
        "learning.samples_per_device=100", "--out", out, "--no-progress", cwd=tmp_path)
    for name in ("topk", "lyapunov"):
        evals = pd.read_csv(out / name / "evals.csv")
        assert evals["accuracy"].iloc[-1] > evals["accuracy"].iloc[0] + 0.2
    assert (pd.read_csv(out / "topk" / "rounds.csv")["num_selected"] == 10).all()
    assert (out / "accuracy_vs_time.png").stat().st_size > 0


def test_the_shipped_traces_are_what_the_generator_writes_and_replay(tmp_path):
    folder = EXAMPLES / "traces"
    cli("trace", folder / "cell.toml", "--rounds", 200, "--out", tmp_path / "again")
    for name in ("gains.csv", "compute_s.csv", "available.csv"):
        assert (tmp_path / "again" / name).read_bytes() == (folder / name).read_bytes(), name
    out = tmp_path / "replay"
    cli("run", folder / "replay.toml", "--timing-only", "--set", "run.rounds=250", "--out", out, "--no-progress",
        cwd=tmp_path)
    gains = load_decisions(out / "lyapunov")["gains"]
    recorded = np.loadtxt(folder / "gains.csv", delimiter=",", skiprows=1).astype(np.float32)  # as decisions.h5 stores them
    assert np.array_equal(gains[:200], recorded) and np.array_equal(gains[200:], recorded[:50])  # it cycles


def test_the_guide_to_extending_runs_as_written(tmp_path):
    """A new user with only docs/extending.md: its scheduler file, its scenario, its command and its
    Python block, copied as written into an empty folder."""
    import re

    blocks = re.findall(r"```(\w+)\n(.*?)```", (ROOT / "docs" / "extending.md").read_text(), re.S)
    python = [code for lang, code in blocks if lang == "python"]
    (tmp_path / "topk.py").write_text(python[0])
    (tmp_path / "scenario.toml").write_text(next(code for lang, code in blocks if lang == "toml"))
    command = next(code for lang, code in blocks if lang == "bash").strip()
    assert command.startswith("wirelessfl run ")
    proc = subprocess.run([sys.executable, "-m", "wirelessfl.cli", *command.split()[1:], "--no-progress"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "runs" / "topk" / "scenario"
    gains = load_decisions(run)["gains"]
    rounds = pd.read_csv(run / "rounds.csv")
    assert len(rounds) == 50
    for r, chosen in enumerate(selected(rounds)):
        assert chosen == sorted(np.argsort(-gains[r], kind="stable")[:10].tolist())
    proc = subprocess.run([sys.executable, "-c", python[1]], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0 and "selected" in proc.stdout, proc.stderr
    assert len(python[0].splitlines()) < 30  # the promise of the guide


def fedprox_class():
    from wirelessfl.plugins import part_class

    return part_class("algorithm", "fedprox:FedProx", [str(EXAMPLES / "fedprox")])


def test_fedprox_local_steps_match_an_autograd_reference(one_torch_thread):
    """Two devices, three local steps of a small MLP: the deltas equal the proximal SGD written out with
    autograd (gradient of the minibatch loss plus mu (y - x_t))."""
    import torch
    import torch.nn.functional as F

    from wirelessfl.learning import Dataset, Trainer

    g = torch.Generator().manual_seed(0)
    data = Dataset(name="tiny", x_train=torch.randn(120, 6, generator=g), y_train=torch.randint(0, 10, (120,), generator=g),
                   x_test=torch.randn(20, 6, generator=g), y_test=torch.randint(0, 10, (20,), generator=g),
                   num_classes=10, input_shape=(6,))
    for batching in ("vmap", "loop"):
        trainer = Trainer(data, [np.arange(60), np.arange(60, 120)], "mlp_80_60", local_steps=3, batch_size=8,
                          lr=0.1, root_seed=2, batching=batching)
        algorithm = fedprox_class()(server_lr=1.0)
        algorithm.mu = 0.7
        deltas = algorithm.local_updates(trainer, np.array([0, 1]), 5)
        x0 = trainer.params.clone()
        for j, device in enumerate((0, 1)):
            y = x0.clone()
            for batch in trainer.minibatch_indices(device, 5):
                w = y.clone().requires_grad_(True)
                out = torch.func.functional_call(trainer.model, trainer.unflatten(w), (data.x_train[batch],))
                (grad,) = torch.autograd.grad(F.cross_entropy(out, data.y_train[batch]), w)
                y = y - 0.1 * (grad + 0.7 * (y - x0))
            torch.testing.assert_close(deltas[j], y - x0, rtol=1e-5, atol=1e-6)


FEDPROX_AT_MU_0 = ("--set", 'variants.fedprox={"learning.algorithm"="fedprox:FedProx","learning.mu"=0.0}')
"""The example's fedprox variant at mu = 0 (its own value: --set learning.mu would set every variant's)."""


def test_fedprox_from_its_folder_with_mu_0_is_fedavg_and_records_mu(tmp_path):
    # one run of the example's three variants
    out = tmp_path / "out"
    cli("run", EXAMPLES / "fedprox" / "fedprox.toml", "--set", "run.rounds=4", "--set", "run.eval_every_rounds=2",
        "--set", "devices.count=10", "--set", "learning.samples_per_device=60", "--set", "learning.local_steps=3",
        *FEDPROX_AT_MU_0, "--out", out, "--no-progress", cwd=tmp_path)
    avg, prox, prox10 = (pd.read_csv(out / name / "evals.csv") for name in ("fedavg", "fedprox", "fedprox_mu10"))
    pd.testing.assert_frame_equal(prox, avg)  # mu = 0: the same model in every evaluation
    assert not prox10.equals(avg)  # mu = 10 changes the model
    assert pd.read_csv(out / "fedprox" / "rounds.csv")["mu"].tolist() == [0.0] * 4
    assert pd.read_csv(out / "fedprox_mu10" / "rounds.csv")["mu"].tolist() == [10.0] * 4
    assert "mu" not in pd.read_csv(out / "fedavg" / "rounds.csv")


@pytest.mark.slow
def test_the_fedprox_example_shows_what_its_comment_says(tmp_path):
    """At its own scale (a minute): FedProx at mu = 1 keeps the training loss below FedAvg's at most
    evaluations and ends level in accuracy; mu = 10 learns slowest."""
    cli("run", EXAMPLES / "fedprox" / "fedprox.toml", "--out", tmp_path / "out", "--no-progress", cwd=tmp_path)
    avg, prox, slow = (pd.read_csv(tmp_path / "out" / name / "evals.csv") for name in ("fedavg", "fedprox", "fedprox_mu10"))
    later = slice(1, None)  # after the initial model
    assert (prox["train_loss"][later] <= avg["train_loss"][later]).mean() >= 0.75
    assert prox["train_loss"][later].mean() < 0.9 * avg["train_loss"][later].mean()
    assert abs(prox["accuracy"].iloc[-1] - avg["accuracy"].iloc[-1]) < 0.03
    assert slow["accuracy"].iloc[-1] < min(prox["accuracy"].iloc[-1], avg["accuracy"].iloc[-1]) - 0.02


def test_the_guide_s_dispatch_rule_and_round_protocol_run_as_written(tmp_path):
    """docs/extending.md's BestIdle dispatch rule and EveryK protocol, copied into files beside a
    scenario that names both: every aggregation applies k updates of the best idle devices."""
    import re

    blocks = re.findall(r"```(\w+)\n(.*?)```", (ROOT / "docs" / "extending.md").read_text(), re.S)
    python = [code for lang, code in blocks if lang == "python"]
    (tmp_path / "best.py").write_text(next(code for code in python if "class BestIdle" in code))
    (tmp_path / "everyk.py").write_text(next(code for code in python if "class EveryK" in code))
    (tmp_path / "s.toml").write_text(
        '[run]\nrounds = 30\ntiming_only = true\n[devices]\ncount = 20\ncompute = "shifted_exponential"\n'
        '[channel]\nprofile = "linear"\n[link]\nmodel_bits = 100000\n'
        '[protocol]\nname = "everyk:EveryK"\nconcurrency = 5\nk = 3\n[scheduler]\nname = "best:BestIdle"\n')
    cli("run", tmp_path / "s.toml", "--out", tmp_path / "out", "--no-progress", cwd=tmp_path)
    up = pd.read_csv(tmp_path / "out" / "s" / "updates.csv")
    applied = up[up.outcome == "applied"]
    assert (applied.groupby("version_applied").size() == 3).all() and applied.staleness.max() <= 2
    assert set(up.device) <= set(range(14, 20))  # the best channels (sigma grows with the index)


@pytest.mark.slow  # end to end: a training run of three variants through the command line
def test_fedprox_runs_under_fedbuff_and_its_mu_matters(tmp_path):
    cli("run", EXAMPLES / "fedprox" / "fedprox.toml", "--set", "run.rounds=6", "--set", "run.eval_every_rounds=3",
        "--set", "devices.count=10", "--set", "learning.samples_per_device=60", "--set", "learning.local_steps=3",
        "--set", "protocol.name=fedbuff", "--set", "protocol.concurrency=4", "--set", "protocol.buffer=2",
        *FEDPROX_AT_MU_0, "--no-progress", "--out", tmp_path / "out", cwd=tmp_path)
    avg, prox, prox10 = (pd.read_csv(tmp_path / "out" / name / "evals.csv")
                         for name in ("fedavg", "fedprox", "fedprox_mu10"))
    pd.testing.assert_frame_equal(prox, avg)  # mu = 0 is FedAvg, stale updates and all
    assert not prox10.equals(avg)  # mu = 10 changes the model
    up = pd.read_csv(tmp_path / "out" / "fedprox" / "updates.csv")
    assert (up[up.outcome == "applied"].groupby("version_applied").size() == 2).all()


def test_own_data_example_trains_its_own_model_on_its_own_csv(tmp_path):
    """examples/own_data from a user's folder: make_data.py writes the CSV, the scenario names the
    dataset, model and partition of my_parts.py by import path; the upload is 32 x the parameters of
    the module the model part builds, and the model learns more than the majority class."""
    mine = shutil.copytree(EXAMPLES / "own_data", tmp_path / "mine")
    proc = subprocess.run([sys.executable, "make_data.py"], capture_output=True, text=True, cwd=mine)
    assert proc.returncode == 0, proc.stderr
    cli("run", mine / "scenario.toml", "--set", "run.rounds=30", "--out", tmp_path / "out", "--no-progress",
        cwd=tmp_path)
    run = tmp_path / "out" / "own_data"
    import json

    from wirelessfl.plugins import part_class

    model = part_class("model", "my_parts:TabularMLP", [str(mine)])
    params = sum(p.numel() for p in model((8,), 4, hidden=64).parameters())
    summary = json.loads((run / "summary.json").read_text())
    assert summary["model_bits"] == 32 * params == 32 * (8 * 64 + 64 + 64 * 64 + 64 + 64 * 4 + 4)
    labels = np.loadtxt(mine / "pump_faults.csv", delimiter=",", skiprows=1)[:, -1]
    majority = np.bincount(labels.astype(int)).max() / labels.size
    assert summary["final_accuracy"] > majority + 0.1


def test_the_guide_s_model_dataset_and_partition_run_as_written(tmp_path):
    """docs/extending.md's wide_mlp, NpzDataset and OneClassPerDevice, copied into files beside a
    scenario that names all three: the upload is the module's size, device n holds class n % 5 only."""
    import re

    blocks = re.findall(r"```(\w+)\n(.*?)```", (ROOT / "docs" / "extending.md").read_text(), re.S)
    python = [code for lang, code in blocks if lang == "python"]
    for module, marker in (("mymodels", "def wide_mlp"), ("npzdata", "class NpzDataset"),
                           ("bylabel", "class OneClassPerDevice")):
        code = next(code for code in python if marker in code)
        assert len(code.splitlines()) < 30, module  # the promise of the guide
        (tmp_path / f"{module}.py").write_text(code)
    rng = np.random.default_rng(0)
    y = rng.integers(0, 5, 600)
    x = rng.normal(size=(600, 20)) + y[:, None]
    np.savez(tmp_path / "mine.npz", x_train=x[:500], y_train=y[:500], x_test=x[500:], y_test=y[500:])
    (tmp_path / "s.toml").write_text(
        '[run]\nrounds = 4\neval_every_rounds = 2\n[devices]\ncount = 8\n'
        '[learning]\nmodel = "mymodels:wide_mlp"\ndataset = "npzdata:NpzDataset"\npartition = "bylabel:OneClassPerDevice"\n'
        'local_steps = 2\nbatch_size = 8\n[learning.model_options]\nhidden = 256\n'
        '[learning.dataset_options]\npath = "mine.npz"\n')
    cli("run", tmp_path / "s.toml", "--out", tmp_path / "out", "--no-progress", cwd=tmp_path)
    import json

    summary = json.loads((tmp_path / "out" / "s" / "summary.json").read_text())
    assert summary["model_bits"] == 32 * (20 * 256 + 256 + 256 * 5 + 5)
    from wirelessfl import load_scenario
    from wirelessfl.learning.learner import federated_data

    data, parts, _ = federated_data(load_scenario(tmp_path / "s.toml"))
    labels = data.y_train.numpy()
    assert all(set(labels[p].tolist()) == {n % 5} for n, p in enumerate(parts))
    assert sum(p.size for p in parts) == 500 and np.unique(np.concatenate(parts)).size == 500
