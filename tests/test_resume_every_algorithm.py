"""Every part's state round-trips through a checkpoint: each built-in algorithm and each Flower
strategy shipped with flwr, interrupted after its first checkpoint and resumed, writes the records
of an uninterrupted run byte for byte (rounds.csv, evals.csv, updates.csv, devices.csv, and the
per-device arrays of decisions.h5)."""
import json
import textwrap

import numpy as np
import pytest

from fakes import interrupted
from wirelessfl import load_decisions
from wirelessfl.config import from_dict
from wirelessfl.experiments.run import resume, simulate
from wirelessfl.plugins import registry

pytestmark = pytest.mark.usefixtures("one_torch_thread")

RECORDS = ("rounds.csv", "evals.csv", "updates.csv", "devices.csv")

BUILT_IN = sorted(registry("algorithm").names())
LEARNING = {"fedshuffle_mvr": {"momentum": 0.9}, "safari": {"aux_samples": 40}}  # what an algorithm needs set


def scenario(algorithm: str, options: dict | None = None, **learning):
    return from_dict({
        "seed": 3, "run": {"rounds": 6, "eval_every_rounds": 2, "checkpoint_every": 2},
        "devices": {"count": 10},
        "scheduler": {"name": "uniform", "m": 4, "sampling": "without_replacement"},
        "learning": {"algorithm": algorithm, "options": options or {}, "model": "logreg", "partition": "iid",
                     "samples_per_device": 40, "local_steps": 2, "lr": 0.05, "eval_train_samples": 200, **learning}})


def assert_resumes_byte_for_byte(sc, tmp_path, monkeypatch, after: int = 3):
    full, cut = tmp_path / "full", tmp_path / "cut"
    simulate(sc, full, progress=False)
    interrupted(sc, cut, monkeypatch, after)  # Ctrl-C after `after` rounds: the checkpoint of round 2
    assert json.loads((cut / "summary.json").read_text())["status"] == "interrupted"
    assert (cut / "checkpoint.pt").exists()
    assert resume(cut, progress=False).summary["status"] == "complete"
    for name in RECORDS:
        assert (cut / name).read_bytes() == (full / name).read_bytes(), name
    a, b = load_decisions(full), load_decisions(cut)
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.parametrize("algorithm", BUILT_IN)
def test_every_built_in_algorithm_resumes_to_the_uninterrupted_records(tmp_path, monkeypatch, algorithm):
    assert_resumes_byte_for_byte(scenario(algorithm, **LEARNING.get(algorithm, {})), tmp_path, monkeypatch)


flwr = pytest.importorskip("flwr")

from flwr.server import strategy as flower_strategies  # noqa: E402

from wirelessfl.learning.flower import CLIENT_SIDE  # noqa: E402

WRAPPERS = {"DifferentialPrivacyServerSideFixedClipping", "DifferentialPrivacyServerSideAdaptiveClipping"}
"""Strategies that wrap another (a constructor argument no scenario can give): run through a
subclass that passes FedAvgM with server momentum (whose state is then the wrapped strategy's)."""
FLOWER = sorted(name for name in flower_strategies.__all__
                if name != "Strategy" and name not in CLIENT_SIDE and name not in WRAPPERS)
FLOWER_OPTIONS = {
    "Bulyan": {"to_keep": 0}, "FedProx": {"proximal_mu": 0.1},
    "FedAvgM": {"server_momentum": 0.9, "server_learning_rate": 0.7},  # its momentum and its model
    "FedAdam": {"eta": 0.01}, "FedYogi": {"eta": 0.01}, "FedAdagrad": {"eta": 0.01},
    "FedTrimmedAvg": {"beta": 0.25}, "QFedAvg": {"q_param": 0.5},
}


@pytest.mark.parametrize("name", FLOWER)
def test_every_flower_strategy_resumes_to_the_uninterrupted_records(tmp_path, monkeypatch, name):
    assert_resumes_byte_for_byte(scenario(f"flwr.server.strategy:{name}", FLOWER_OPTIONS.get(name)), tmp_path,
                                 monkeypatch)


def test_the_list_of_flower_strategies_is_every_one_flwr_ships():
    """A strategy a new flwr adds is either resumed above or refused (client-side) in one line."""
    shipped = {name for name in flower_strategies.__all__ if name != "Strategy"}
    assert shipped == set(FLOWER) | WRAPPERS | set(CLIENT_SIDE)


WRAPPED = textwrap.dedent('''
    from flwr.server.strategy import (DifferentialPrivacyServerSideAdaptiveClipping,
                                      DifferentialPrivacyServerSideFixedClipping, FedAvgM)


    class FixedClippingOverFedAvgM(DifferentialPrivacyServerSideFixedClipping):
        def __init__(self, initial_parameters=None, noise_multiplier: float = 0.2, clipping_norm: float = 2.0,
                     num_sampled_clients: int = 4):
            super().__init__(FedAvgM(initial_parameters=initial_parameters, server_momentum=0.9),
                             noise_multiplier=noise_multiplier, clipping_norm=clipping_norm,
                             num_sampled_clients=num_sampled_clients)


    class AdaptiveClippingOverFedAvgM(DifferentialPrivacyServerSideAdaptiveClipping):
        def __init__(self, initial_parameters=None, noise_multiplier: float = 0.2, num_sampled_clients: int = 4):
            super().__init__(FedAvgM(initial_parameters=initial_parameters, server_momentum=0.9),
                             noise_multiplier=noise_multiplier, num_sampled_clients=num_sampled_clients)
''')


@pytest.mark.parametrize("name", ["FixedClippingOverFedAvgM", "AdaptiveClippingOverFedAvgM"])
def test_the_dp_strategies_resume_with_the_strategy_they_wrap_and_their_noise(tmp_path, monkeypatch, name):
    """Their noise comes from numpy's global random state: the adapter gives the strategy a stream of
    its own, seeded by the scenario and checkpointed, so even a noisy run resumes exactly."""
    (tmp_path / "wrapped_strategies.py").write_text(WRAPPED)
    monkeypatch.syspath_prepend(str(tmp_path))
    before = np.random.get_state()[1].copy()
    sc = scenario(f"wrapped_strategies:{name}")
    assert_resumes_byte_for_byte(sc, tmp_path, monkeypatch)
    np.testing.assert_array_equal(np.random.get_state()[1], before)  # numpy's own state is left alone
