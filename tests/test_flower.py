"""Flower strategies run unchanged as algorithms (learning.algorithm = "flwr.server.strategy:Name"):
against the built-in FedAvg and against hand computations of FedAdam, FedMedian and FedProx."""
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from wirelessfl.config import from_dict
from wirelessfl.experiments.run import simulate
from wirelessfl.fields import ConfigError
from wirelessfl.plugins import part_class

flwr = pytest.importorskip("flwr")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def scenario(algorithm, options=None, rounds=6, **learning):
    return from_dict({
        "seed": 2, "run": {"rounds": rounds, "eval_every_rounds": 2, "checkpoint_every": 2}, "devices": {"count": 10},
        "scheduler": {"name": "uniform", "m": 4, "sampling": "without_replacement"},
        "learning": {"algorithm": algorithm, "options": options or {}, "model": "logreg", "partition": "iid",
                     "samples_per_device": 40, "local_steps": 3, "lr": 0.05, "eval_train_samples": 200, **learning}})


def assert_records_close(a, b, rtol=1e-5):
    for attr in ("rounds", "evals"):
        left, right = getattr(a, attr), getattr(b, attr)
        assert set(right.columns) - set(left.columns) <= {"weight_sum"}  # the built-in's own metric
        pd.testing.assert_frame_equal(left, right[left.columns], check_exact=False, rtol=rtol, atol=1e-6)


def test_flowers_fedavg_gives_the_built_in_fedavgs_records():
    flower = simulate(scenario("flwr.server.strategy:FedAvg"), None, progress=False)
    assert_records_close(flower, simulate(scenario("fedavg"), None, progress=False))
    assert flower.evals["accuracy"].iloc[-1] > 0.5


def test_flowers_fedavg_weighs_by_the_sample_counts_it_is_given():
    unequal = dict(partition="dirichlet_per_device", size_sigma=1.0)
    flower = simulate(scenario("flwr.server.strategy:FedAvg", **unequal), None, progress=False)
    built_in = simulate(scenario("fedavg", {"aggregation": "data_size"}, **unequal), None, progress=False)
    assert_records_close(flower, built_in)


def prepared(name, options):
    """A Flower strategy's algorithm, set up on its trainer (nothing trained yet)."""
    from wirelessfl.learning.learner import FederatedLearner

    sc = scenario(f"flwr.server.strategy:{name}", options)
    algorithm = sc.part("algorithm").from_scenario(sc, sc.options("algorithm"))
    return algorithm, FederatedLearner(sc, algorithm).trainer


DEVICES = np.array([1, 4, 7])


def test_fedmedian_takes_the_elementwise_median_of_the_devices_models():
    algorithm, trainer = prepared("FedMedian", {})
    models = (trainer.params + trainer.local_updates(DEVICES, 0)).numpy()
    algorithm.round(trainer, DEVICES, np.full(10, 0.3), 10, 0)
    np.testing.assert_allclose(trainer.params.numpy(), np.median(models, axis=0), atol=1e-6)


def test_fedadam_makes_adams_first_step_on_the_mean_update():
    eta, beta_1, beta_2, tau = 0.03, 0.9, 0.99, 1e-3
    algorithm, trainer = prepared("FedAdam", {"eta": eta, "beta_1": beta_1, "beta_2": beta_2, "tau": tau})
    x = trainer.params.numpy().copy()
    delta = trainer.local_updates(DEVICES, 0).numpy().mean(axis=0)  # equal sample counts: the plain mean
    algorithm.round(trainer, DEVICES, np.full(10, 0.3), 10, 0)
    m, v = (1 - beta_1) * delta, (1 - beta_2) * delta ** 2
    # Flower's bias correction (Kingma and Ba's alpha_t) with its exponent server_round + 1 = 2
    eta_t = eta * np.sqrt(1 - beta_2 ** 2) / (1 - beta_1 ** 2)
    np.testing.assert_allclose(trainer.params.numpy(), x + eta_t * m / (np.sqrt(v) + tau), atol=1e-6)


def test_fedprox_s_fit_config_sets_the_devices_proximal_term():
    mu = 0.7
    algorithm, trainer = prepared("FedProx", {"proximal_mu": mu})
    x = trainer.params.clone()
    prox = trainer.local_updates(DEVICES, 0, direction=lambda g, y, x0, anchor: g + mu * (y - x0))
    assert float((prox - trainer.local_updates(DEVICES, 0)).abs().max()) > 1e-4  # the term matters
    algorithm.round(trainer, DEVICES, np.full(10, 0.3), 10, 0)
    torch.testing.assert_close(trainer.params, x + prox.mean(dim=0), atol=1e-6, rtol=0)


@pytest.mark.parametrize("name, options", [("FedAdam", {"eta": 0.01}), ("FedMedian", {})])
def test_adaptive_and_robust_strategies_train(name, options):
    result = simulate(scenario(f"flwr.server.strategy:{name}", options, rounds=8), None, progress=False)
    acc = result.evals["accuracy"].to_numpy()
    assert acc[-1] > acc[0] + 0.3


def test_fedadam_resumes_to_identical_records(interrupted_and_resumed):
    full, resumed = interrupted_and_resumed(scenario("flwr.server.strategy:FedAdam", {"eta": 0.01}), after=3)
    for attr in ("rounds", "evals"):
        pd.testing.assert_frame_equal(getattr(resumed, attr).reset_index(drop=True),
                                      getattr(full, attr).reset_index(drop=True))


@pytest.mark.parametrize("options, field", [({"etaa": 0.1}, "learning.options.etaa"),
                                            ({"eta": "fast"}, "learning.options.eta")])
def test_a_strategy_s_arguments_are_checked_when_the_scenario_is_read(options, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        scenario("flwr.server.strategy:FedAdam", options)


def test_a_strategy_that_needs_flowers_clients_is_refused_in_one_line(tmp_path):
    path = tmp_path / "dp.toml"
    path.write_text('[learning]\nalgorithm = "flwr.server.strategy:DifferentialPrivacyClientSideFixedClipping"\n')
    done = subprocess.run([sys.executable, "-m", "wirelessfl.cli", "run", str(path), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "client-side" in done.stderr
    assert not (tmp_path / "out").exists()


def test_over_the_air_aggregation_is_refused_for_a_strategy_that_needs_each_update():
    with pytest.raises(ConfigError, match="link.access"):
        from_dict({"run": {"rounds": 2}, "link": {"access": "aircomp"}, "learning": {"algorithm": "flwr.server.strategy:FedMedian"}})


def test_the_core_install_never_imports_flower():
    code = ("import sys; from wirelessfl.config import from_dict; from wirelessfl.experiments.run import simulate; "
            "simulate(from_dict({'run': {'timing_only': True, 'rounds': 3}}), None, progress=False); "
            "from wirelessfl.plugins import part_class; part_class('algorithm', 'scaffold'); "
            "print('flwr' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_without_flower_installed_the_error_says_which_extra_brings_it():
    code = ("import sys; sys.modules['flwr'] = None\n"  # as if flwr were not installed
            "from wirelessfl.config import from_dict\n"
            "try:\n"
            "    from_dict({'run': {'rounds': 1}, 'learning': {'algorithm': 'flwr.server.strategy:FedAdam'}})\n"
            "except ValueError as exc:\n"
            "    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert "learning.algorithm" in out and 'pip install -e ".[flower]"' in out, out


def test_a_class_that_is_not_a_strategy_is_not_adapted():
    assert part_class("algorithm", "fedavg").__name__ == "FedAvg"
