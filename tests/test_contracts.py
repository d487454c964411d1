"""The learning algorithm's contract trimmed to its core: ``Algorithm.round`` defined once from
``local_updates`` and ``apply_updates``, the members only some algorithms use as capabilities, the
guide's three-method algorithm run as written, and plug-ins written against the older contract."""
from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from wirelessfl.capabilities import provides
from wirelessfl.config import ConfigError, load_scenario
from wirelessfl.experiments.run import simulate
from wirelessfl.learning.algorithms import (Algorithm, BroadcastsMoreVectors, CostlierSteps, FedAvg,
                                            PersonalisedByDefault, Safari, UploadsMoreVectors, Updates,
                                            broadcast_vectors, can_apply_stale_updates, compute_factor,
                                            personalised_by_default, upload_vectors)

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "extending.md"


class FakeTrainer:
    """Deltas of device n: a row of n's; remembers what was trained and aggregated."""

    def __init__(self):
        self.trained, self.aggregated = [], []

    def local_updates(self, devices, round_idx):
        self.trained.append((np.asarray(devices).tolist(), round_idx))
        return np.repeat(np.asarray(devices, dtype=float)[:, None], 3, axis=1)

    def aggregate(self, deltas, weights):
        self.aggregated.append((np.asarray(deltas), np.asarray(weights)))


class Three(Algorithm):
    """Only the three methods a new algorithm writes."""

    @classmethod
    def from_scenario(cls, scenario, options):
        return cls()

    def local_updates(self, trainer, devices, round_idx):
        return trainer.local_updates(devices, round_idx)

    def apply_updates(self, trainer, updates):
        self.seen = updates
        trainer.aggregate(updates.deltas, updates.weights)
        return {"k": len(updates.devices)}


def test_the_contract_s_round_trains_each_distinct_device_once_and_applies_their_mean():
    trainer, algorithm = FakeTrainer(), Three()
    assert algorithm.round(trainer, np.array([4, 1, 4]), np.ones(6), 6, 7) == {"k": 2}
    assert trainer.trained == [([1, 4], 7)]
    u = algorithm.seen
    assert u.fresh and u.devices.tolist() == [1, 4] and u.weights.tolist() == [0.5, 0.5]
    assert u.staleness.tolist() == [0, 0] and u.deltas.tolist() == [[1.0] * 3, [4.0] * 3]
    # nobody arrived: nothing trained, nothing applied, the model left alone
    assert algorithm.round(trainer, np.array([], dtype=np.int64), np.ones(6), 6, 8) == {"num_trained": 0,
                                                                                         "weight_sum": 0.0}
    assert len(trainer.trained) == len(trainer.aggregated) == 1


def test_fedavg_s_round_applies_its_unbiased_weights_as_they_are_and_stale_updates_times_global_lr():
    trainer, fedavg = FakeTrainer(), FedAvg(server_lr=0.5)
    q = np.array([0.5, 0.25, 1.0, 0.8])
    metrics = fedavg.round(trainer, np.array([3, 1, 1]), q, 4, 0)
    weights = trainer.aggregated[0][1]
    assert weights.tolist() == [0.5 / (4 * 0.25), 0.5 / (4 * 0.8)]  # server_lr / (N q_n), hand-computed
    assert metrics == {"num_trained": 2, "weight_sum": 0.5 / (4 * 0.25) + 0.5 / (4 * 0.8)}
    stale = Updates(np.array([0, 2]), np.ones((2, 3)), np.array([0.2, 0.4]), np.array([1, 3]))
    fedavg.apply_updates(trainer, stale)
    assert trainer.aggregated[1][1].tolist() == [0.5 * 0.2, 0.5 * 0.4]  # the protocol's weights x global_lr


def test_members_one_algorithm_used_are_capabilities_with_the_old_defaults():
    from wirelessfl.learning.fedshuffle import FedShuffleGen
    from wirelessfl.learning.perfedavg import PerFedAvg
    from wirelessfl.learning.scaffold import Scaffold

    for name in ("compute_factor", "upload_vectors", "broadcast_vectors", "personalised_eval"):
        assert not hasattr(Algorithm, name) and not hasattr(FedAvg(), name)
    fedavg = FedAvg()
    assert (compute_factor(fedavg), upload_vectors(fedavg), broadcast_vectors(fedavg)) == (1.0, 1, 1)
    assert not personalised_by_default(FedAvg) and not provides(fedavg, CostlierSteps)
    hf = PerFedAvg("hf", alpha=0.01)
    assert compute_factor(hf) == 4 and compute_factor(PerFedAvg("fo", alpha=0.01)) == 2
    assert personalised_by_default(PerFedAvg) and provides(PerFedAvg, PersonalisedByDefault)
    assert (upload_vectors(Scaffold()), broadcast_vectors(Scaffold())) == (2, 2)
    mvr = FedShuffleGen(np.array([10, 20]), momentum=0.9, mvr=True)
    assert (upload_vectors(mvr), broadcast_vectors(mvr)) == (2, 3)  # set on the instance

    class UploadsTwo(Three):  # a plug-in that names one of the two, as before
        upload_vectors = 2

    assert provides(UploadsTwo, UploadsMoreVectors) and not provides(UploadsTwo, BroadcastsMoreVectors)
    assert (upload_vectors(UploadsTwo()), broadcast_vectors(UploadsTwo())) == (2, 1)


def test_safari_applies_its_client_rounds_but_no_stale_updates():
    trainer, safari = FakeTrainer(), Safari(global_lr=1.0, aggregation="mean")
    assert safari.round(trainer, np.array([2, 0]), np.ones(3), 3, 0) == {"num_trained": 2, "weight_sum": 1.0}
    assert trainer.aggregated[0][1].tolist() == [0.5, 0.5]
    assert not can_apply_stale_updates(Safari)
    with pytest.raises(NotImplementedError, match="stale"):
        safari.apply_updates(trainer, Updates(np.array([0]), np.ones((1, 3)), np.ones(1), np.ones(1)))


def test_a_fedavg_subclass_whose_apply_updates_predates_rounds_is_told_once_when_made():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        class Mine(FedAvg):
            def apply_updates(self, trainer, updates):
                return super().apply_updates(trainer, updates)

        class Knows(FedAvg):
            round = FedAvg.round

            def apply_updates(self, trainer, updates):
                return super().apply_updates(trainer, updates)

        class OnlyLocal(FedAvg):
            def local_updates(self, trainer, devices, round_idx):
                return super().local_updates(trainer, devices, round_idx)

    told = [w for w in caught if issubclass(w.category, FutureWarning)]
    assert len(told) == 1 and "Mine.apply_updates now also applies each client round's updates" in str(told[0].message)


OLD_STYLE = '''
import numpy as np
from wirelessfl.learning import Algorithm


class OldStyle(Algorithm):
    """Written against the contract where round was required: its own round, two upload vectors."""
    upload_vectors = 2

    @classmethod
    def from_scenario(cls, scenario, options):
        return cls()

    def round(self, trainer, selected, q, num_devices, round_idx):
        devices = np.unique(selected)
        if devices.size:
            trainer.aggregate(trainer.local_updates(devices, round_idx), np.full(devices.size, 1.0 / devices.size))
        return {"old": 1}


class NoRound(Algorithm):
    @classmethod
    def from_scenario(cls, scenario, options):
        return cls()

    def local_updates(self, trainer, devices, round_idx):
        return trainer.local_updates(devices, round_idx)
'''


def _scenario(folder: Path, name: str, algorithm: str, protocol: str, extra: str = "") -> Path:
    proto = '"sync"' if protocol == "sync" else '"fedbuff"\nconcurrency = 4\nbuffer = 2'
    path = folder / f"{name}.toml"
    path.write_text(f'seed = 3\n[run]\nrounds = 6\neval_every_rounds = 2\n'
                    f'[devices]\ncount = 10\ncompute = "shifted_exponential"\ndelay_mean_s = 0.5\n'
                    f'[channel]\nprofile = "linear"\n[link]\nmodel_bits = 100000\nbandwidth_hz = 1e6\n'
                    f'[protocol]\nname = {proto}\n[scheduler]\nname = "uniform"\nm = 4\n'
                    f'[learning]\nalgorithm = "{algorithm}"\nmodel = "logreg"\nsamples_per_device = 60\n'
                    f'eval_train_samples = 200\nlocal_steps = 3\nbatch_size = 8\nlr = 0.05\n{extra}')
    return path


def test_a_plug_in_written_against_the_old_contract_still_runs_and_one_without_round_is_refused(tmp_path,
                                                                                               one_torch_thread):
    (tmp_path / "oldstyle.py").write_text(OLD_STYLE)
    res = simulate(load_scenario(_scenario(tmp_path, "old", "oldstyle:OldStyle", "sync")), tmp_path / "out",
                   progress=False)
    assert res.rounds["old"].tolist() == [1] * 6
    up = pd.read_csv(tmp_path / "out" / "updates.csv")
    assert (up.bits == 2 * 100000).all()  # its two upload vectors, read through the capability
    with pytest.raises(ConfigError, match=r"NoRound does not fit the algorithm protocol: it lacks round "
                                          r"\(or local_updates and apply_updates\)"):
        load_scenario(_scenario(tmp_path, "none", "oldstyle:NoRound", "sync"))


@pytest.mark.parametrize("protocol", ["sync", "fedbuff"])
def test_the_guide_s_three_method_algorithm_runs_as_written_and_is_fedavg_s_mean(tmp_path, protocol,
                                                                                one_torch_thread):
    blocks = re.findall(r"```(\w+)\n(.*?)```", GUIDE.read_text(), re.S)
    code = next(code for lang, code in blocks if lang == "python" and "class PlainMean" in code)
    methods = [n.name for n in ast.walk(ast.parse(code)) if isinstance(n, ast.FunctionDef)]
    assert methods == ["from_scenario", "local_updates", "apply_updates"]  # the promise of the guide
    (tmp_path / "plainmean.py").write_text(code)
    mine = simulate(load_scenario(_scenario(tmp_path, "mine", "plainmean:PlainMean", protocol)), tmp_path / "mine",
                    progress=False)
    fedavg = simulate(load_scenario(_scenario(tmp_path, "fedavg", "fedavg", protocol, 'aggregation = "mean"\n')),
                      tmp_path / "fedavg", progress=False)
    assert len(mine.evals) == 4 and mine.evals["accuracy"].iloc[-1] != mine.evals["accuracy"].iloc[0]  # it learnt
    for name in ("evals.csv", "updates.csv", "rounds.csv"):
        assert (tmp_path / "mine" / name).read_text() == (tmp_path / "fedavg" / name).read_text(), name


def _guide_code(marker: str) -> str:
    blocks = re.findall(r"```(\w+)\n(.*?)```", GUIDE.read_text(), re.S)
    return next(code for lang, code in blocks if lang == "python" and marker in code)


def _methods(code: str, cls: str) -> list[str]:
    node = next(n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.ClassDef) and n.name == cls)
    return [n.name for n in node.body if isinstance(n, ast.FunctionDef)]


def test_the_guide_s_four_method_protocol_runs_as_written_and_is_fedbuff_with_a_buffer_of_one(tmp_path,
                                                                                            one_torch_thread):
    code = _guide_code("class EveryArrival")
    assert _methods(code, "EveryArrival") == ["from_scenario", "start", "on_arrival", "on_lost"]
    (tmp_path / "everyarrival.py").write_text(code)
    runs = {}
    for name, protocol in (("mine", '"everyarrival:EveryArrival"\nconcurrency = 4'),
                           ("fedbuff", '"fedbuff"\nconcurrency = 4\nbuffer = 1\nstaleness = "constant"')):
        path = _scenario(tmp_path, name, "fedavg", "sync")
        path.write_text(path.read_text().replace('[protocol]\nname = "sync"', f"[protocol]\nname = {protocol}")
                        .replace("rounds = 6", "rounds = 12")
                        .replace("delay_mean_s = 0.5", "delay_mean_s = 0.5\np_on_to_off = 0.3\np_off_to_on = 0.5"))
        runs[name] = simulate(load_scenario(path), tmp_path / name, progress=False)
    up = pd.read_csv(tmp_path / "mine" / "updates.csv")
    assert (up.outcome == "applied").sum() == 12 and up.staleness.max() > 0  # stale updates, applied one by one
    assert (up.outcome == "offline").any()  # devices left: on_lost started others
    for name in ("evals.csv", "updates.csv", "rounds.csv"):
        assert (tmp_path / "mine" / name).read_text() == (tmp_path / "fedbuff" / name).read_text(), name


def test_the_guide_s_access_scheme_in_three_methods_runs_as_written_under_both_engines(tmp_path):
    """FixedRate: every upload takes bits / rate, one at a time (checked on updates.csv), a deadline cuts
    the queue, and its closed form is its event uplink (semi_sync waiting for all writes what sync writes)."""
    code = _guide_code("class FixedRate")
    assert _methods(code, "FixedRate") == ["from_scenario", "airtime_s", "schedule"]
    (tmp_path / "fixedrate.py").write_text(code)
    for deadline in ("", "round_deadline_s = 0.9\n"):
        out, late = {}, {"sync": "", "semi_sync": 'late = "drop"\n'}  # as sync, uploads cut by the deadline are lost
        for name in ("sync", "semi_sync"):
            path = tmp_path / f"{name}.toml"
            path.write_text(f'seed = 4\n[run]\nrounds = 8\ntiming_only = true\n{deadline}'
                            f'[devices]\ncount = 10\ncompute = "shifted_exponential"\ndelay_mean_s = 0.3\n'
                            f'[channel]\nprofile = "linear"\n[link]\naccess = "fixedrate:FixedRate"\nbps = 2e6\n'
                            f'model_bits = 100000\n[protocol]\nname = "{name}"\n{late[name]}[scheduler]\nname = "uniform"\nm = 5\n')
            simulate(load_scenario(path), tmp_path / f"{name}{len(deadline)}", progress=False)
            out[name] = tmp_path / f"{name}{len(deadline)}"
        for record in ("rounds.csv", "updates.csv"):  # the same, to the last bits of sums taken in another order
            pd.testing.assert_frame_equal(pd.read_csv(out["sync"] / record), pd.read_csv(out["semi_sync"] / record),
                                          check_exact=False, rtol=1e-12, atol=1e-12)
        up = pd.read_csv(out["sync"] / "updates.csv")
        sent = up[up.tx_start_s.notna()]
        np.testing.assert_allclose(sent.airtime_s, 100000 / 2e6, rtol=1e-12)  # bits / rate, whatever the gain
        for _, r in sent.groupby("version_started"):  # one at a time: each starts after the previous ends
            r = r.sort_values("tx_start_s")
            assert (r.tx_start_s.to_numpy()[1:] >= (r.tx_start_s + r.airtime_s).to_numpy()[:-1] - 1e-12).all()
            assert (r.tx_start_s >= r.compute_end_s).all()
        if deadline:
            assert (up.outcome == "late_dropped").any()  # the deadline cut some uploads


def test_an_option_named_as_a_field_of_its_table_is_refused_in_one_line(tmp_path, capsys):
    """An option ``rate_bps`` of a scheme written under [link] would be link.rate_bps, the link's own
    field, and the scheme would silently get its default: the name clash is refused up front."""
    from wirelessfl.cli import main

    code = _guide_code("class FixedRate").replace("bps: float", "rate_bps: float").replace("options.bps",
                                                                                           "options.rate_bps")
    (tmp_path / "clash.py").write_text(code)
    path = tmp_path / "clash.toml"
    path.write_text('[run]\nrounds = 2\ntiming_only = true\n[link]\naccess = "clash:FixedRate"\nrate_bps = 2e6\n')
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'rate_bps'" in err[0] and "link.rate_bps" in err[0] and "rename the option" in err[0]
    assert not (tmp_path / "out").exists()
