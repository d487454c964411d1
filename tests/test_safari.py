"""SAFARI (docs/papers/safari.md): server rounds on an auxiliary set, wrapping any scheduler."""
import numpy as np
import pandas as pd
import pytest

from wirelessfl.config import ConfigError, from_dict
from wirelessfl.experiments.run import resume, simulate
from wirelessfl.learning.learner import FederatedLearner
from wirelessfl.sim.records import recorder as records_module
from wirelessfl.sim.run.checkpoint import load_checkpoint
from wirelessfl.sim.run.runner import Run


def scenario(learning=None, devices=None, **run):
    return from_dict({
        "seed": 3, "run": {"rounds": 10, "eval_every_rounds": 2, **run},
        "channel": {"profile": "linear"}, "devices": {"count": 10, "compute_s": 0.5, **(devices or {})},
        "scheduler": {"name": "uniform", "m": 4},
        "learning": {"model": "logreg", "samples_per_device": 50, "local_steps": 2, "batch_size": 16,
                     "eval_train_samples": 200, "lr": 0.05, "aux_samples": 40, **(learning or {})}})


def learner_of(s):
    """The learner a training run of ``s`` builds (data, trainer, algorithm)."""
    return Run(s, None, progress=False).learner


def same(a, b):
    pd.testing.assert_frame_equal(a.rounds, b.rounds)
    pd.testing.assert_frame_equal(a.evals, b.evals)
    pd.testing.assert_frame_equal(a.devices, b.devices)


@pytest.mark.parametrize("sched", ["lyapunov"])  # its queues must also match
def test_q_one_is_fedavg_exactly(sched):
    fedavg = simulate(scenario().replace(f'scheduler.name="{sched}"'), progress=False)
    safari = simulate(scenario({"algorithm": "safari", "safari_q": 1.0}).replace(
        f'scheduler.name="{sched}"'), progress=False)
    same(fedavg, safari)
    assert safari.summary["server_rounds"] == 0


def test_server_rounds_use_no_air_and_cost_server_time():
    res = simulate(scenario({"algorithm": "safari", "safari_q": 0.5, "server_compute_s": 0.25},
                            rounds=16), progress=False)
    r = res.rounds
    server = r[r.server_round == 1]
    assert 0 < len(server) < len(r)
    assert (server.num_selected == 0).all() and (server.comm_s == 0).all() and (server.energy_j == 0).all()
    assert np.allclose(server.t_end - server.t_start, 0.25) and (server.server_s == 0.25).all()
    client = r[r.server_round == 0]
    assert (client.num_selected > 0).all() and (client.comm_s > 0).all()
    assert res.summary["server_rounds"] == len(server)
    assert 0 < res.summary["label_coverage"] <= 1 and 0 < res.summary["ever_participated"] <= 1
    assert res.summary["total_server_s"] == pytest.approx(0.25 * len(server))


def test_server_round_trains_on_the_aux_set_only():
    s = scenario({"algorithm": "safari", "safari_q": 0.0, "server_steps": 3})
    learner = learner_of(s)
    aux = learner.trainer.server_indices
    assert aux.size == 40
    held = np.concatenate(learner.trainer._indices)
    assert not np.intersect1d(aux, held).size  # T is kept from the devices
    before = learner.trainer.params.clone()
    learner.server_round(0)
    assert not np.allclose(before.numpy(), learner.trainer.params.numpy())
    assert learner.label_coverage(np.ones(10, dtype=bool)) == 1.0
    assert learner.label_coverage(np.zeros(10, dtype=bool)) == 0.0
    # q = 0 is centralised SGD on T: no device ever selected
    res = simulate(s, progress=False)
    assert (res.rounds.num_selected == 0).all() and res.summary["total_comm_s"] == 0


def test_one_epoch_is_ceil_nt_over_b_steps():
    learner = learner_of(scenario({"algorithm": "safari"}))
    assert learner.trainer.server_sgd(learner.trainer.server_indices, 0) == 3  # ceil(40 / 16)
    assert learner.trainer.server_sgd(learner.trainer.server_indices, 0, steps=1) == 1


def test_timing_only_safari_runs():
    res = simulate(scenario({"algorithm": "safari", "safari_q": 0.5}, timing_only=True, rounds=30),
                   progress=False)
    assert 0 < res.summary["server_rounds"] < 30


def test_resume_after_a_crash_is_exact(tmp_path, monkeypatch):
    s = scenario({"algorithm": "safari", "safari_q": 0.6, "server_compute_s": 0.1},
                 rounds=12, checkpoint_every=4).replace('scheduler.name="lyapunov"')
    full = simulate(s, tmp_path / "full", progress=False)
    assert 0 < full.summary["server_rounds"] < 12
    real = FederatedLearner.train_round
    real_server = FederatedLearner.server_round

    def crash(self, r, *a):
        if r >= 9:
            raise RuntimeError("power cut")

    monkeypatch.setattr(FederatedLearner, "train_round",
                        lambda self, sel, d, r: (crash(self, r), real(self, sel, d, r))[1])
    monkeypatch.setattr(FederatedLearner, "server_round",
                        lambda self, r: (crash(self, r), real_server(self, r))[1])
    with pytest.raises(RuntimeError):
        simulate(s, tmp_path / "cut", progress=False)
    assert load_checkpoint(tmp_path / "cut" / "checkpoint.pt")["engine"]["rounds_done"] == 8
    monkeypatch.undo()
    resumed = resume(tmp_path / "cut", progress=False)
    pd.testing.assert_frame_equal(resumed.rounds.reset_index(drop=True), full.rounds.reset_index(drop=True))
    pd.testing.assert_frame_equal(resumed.evals.reset_index(drop=True), full.evals.reset_index(drop=True))


def test_config_rules():
    with pytest.raises(ConfigError, match="aux_samples"):
        scenario({"algorithm": "safari", "aux_samples": 0})
    with pytest.raises(ConfigError, match="safari_q"):
        scenario({"algorithm": "safari", "safari_q": 1.5})
    scenario({"algorithm": "safari", "aux_samples": 0, "safari_q": 1.0})  # FedAvg: no T needed


def test_excluded_devices_are_never_selected():
    s = scenario({"algorithm": "safari", "safari_q": 0.8}, {"excluded": [0, 9], "excluded_count": 2},
                 timing_only=True, rounds=60).replace('scheduler.name="lyapunov"')
    res = simulate(s, progress=False)
    excluded = res.summary["excluded"]
    assert len(excluded) == 4 and {0, 9} <= set(excluded)
    chosen = {int(d) for row in res.rounds.selected.fillna("").astype(str) for d in row.split()}
    assert chosen and not chosen & set(excluded)
    assert (res.rounds.num_available == 6).all()
    assert res.devices.selections[excluded].sum() == 0
    assert res.summary["ever_participated"] <= 0.6
    again = simulate(s, progress=False)  # the random excluded set is fixed by the seed
    assert again.summary["excluded"] == excluded


def test_low_mean_snr_devices_never_transmit():
    # linear sigma profile 0.1 .. 10: mean SNR 2 sigma^2 p_bar / N0 from -17 dB to +23 dB
    s = scenario(devices={"min_mean_snr_db": 0.0}, timing_only=True, rounds=40)
    res = simulate(s, progress=False)
    sigma = np.linspace(0.1, 10.0, 10)
    low = np.flatnonzero(10 * np.log10(2 * sigma ** 2) < 0.0)
    assert res.summary["excluded"] == low.tolist() and low.size
    assert res.devices.selections[low].sum() == 0


def test_exclusion_survives_resume(tmp_path, monkeypatch):
    s = scenario(devices={"excluded_count": 3, "p_on_to_off": 0.2, "p_off_to_on": 0.5},
                 timing_only=True, rounds=20, checkpoint_every=5)
    full = simulate(s, tmp_path / "full", progress=False)
    real = records_module.Recorder.on_round
    calls = {"n": 0}

    def crash(self, rec):
        calls["n"] += 1
        if calls["n"] == 13:
            raise RuntimeError("power cut")
        return real(self, rec)

    monkeypatch.setattr(records_module.Recorder, "on_round", crash)
    with pytest.raises(RuntimeError):
        simulate(s, tmp_path / "cut", progress=False)
    monkeypatch.undo()
    resumed = resume(tmp_path / "cut", progress=False)
    pd.testing.assert_frame_equal(resumed.rounds.reset_index(drop=True), full.rounds.reset_index(drop=True))
    assert resumed.summary["excluded"] == full.summary["excluded"]


def test_exclusion_config_rules():
    with pytest.raises(ConfigError, match="devices.excluded"):
        scenario(devices={"excluded": [10]})
    with pytest.raises(ConfigError, match="excluded_count"):
        scenario(devices={"excluded": [1], "excluded_count": 10})


def test_server_round_time_counts_steps():
    def server_round_s(s):
        return Run(s.replace("run.timing_only=true"), None, progress=False).algorithm.server_round_s

    s = scenario({"algorithm": "safari", "server_compute_s": 0.1, "server_step_s": 0.01})
    assert server_round_s(s) == pytest.approx(0.1 + 0.01 * 3)  # one epoch: ceil(40 / 16) steps
    assert server_round_s(s.replace("learning.server_steps=1")) == pytest.approx(0.11)
    res = simulate(s.replace("run.timing_only=true", "learning.safari_q=0.5", "run.rounds=20"), progress=False)
    server = res.rounds[res.rounds.server_round == 1]
    assert len(server) and np.allclose(server.t_end - server.t_start, 0.13)


def test_server_round_queues_unchanged_or_drained():
    base = scenario({"algorithm": "safari", "safari_q": 0.5}, timing_only=True, rounds=30).replace(
        'scheduler.name="lyapunov"', "link.p_bar=0.2")
    for slot in (False, True):
        res = simulate(base.replace(f"learning.server_round_is_slot={str(slot).lower()}"), progress=False)
        r = res.rounds
        # the queue a round was decided with, after a server round vs before it
        pairs = [(r.queue_mean[i], r.queue_mean[i + 1]) for i in range(len(r) - 1)
                 if r.server_round[i] == 1 and r.queue_mean[i] > 0.2]
        assert pairs
        if slot:
            assert all(after == pytest.approx(before - 0.2) for before, after in pairs)
        else:
            assert all(after == pytest.approx(before) for before, after in pairs)


# --- the paper's client sampling and aggregation, the p-classes partition, starvation ---------


def tables_scenario(**learning):
    """The Tables 1-3 setting, small: M = 10 with p classes each, s = 4 excluded, m = 5 sampled
    without replacement, plain averaging."""
    return from_dict({
        "seed": 1, "run": {"rounds": 8, "eval_every_rounds": 4},
        "devices": {"count": 10, "excluded_count": 4},
        "scheduler": {"name": "uniform", "m": 5, "sampling": "without_replacement"},
        "learning": {"model": "logreg", "partition": "classes_per_device", "classes_per_device": 1,
                     "aggregation": "mean", "local_steps": 3, "batch_size": 16, "lr": 0.1,
                     "eval_train_samples": 200, **learning}})


def test_q_one_is_fedavg_exactly_in_the_tables_setting():
    fedavg = simulate(tables_scenario(), progress=False)
    safari = simulate(tables_scenario(algorithm="safari", safari_q=1.0, aux_samples=100), progress=False)
    # the same partition needs the same pool: FedAvg here has no T, so compare against FedAvg with T
    fedavg_t = simulate(tables_scenario(aux_samples=100), progress=False)
    same(fedavg_t, safari)
    assert safari.summary["server_rounds"] == 0
    assert not fedavg.evals.accuracy.equals(safari.evals.accuracy)  # T really left the devices' pool


def test_without_replacement_picks_m_distinct_available_devices():
    res = simulate(tables_scenario(algorithm="safari", safari_q=0.7, aux_samples=50).replace(
        "run.rounds=40", "run.timing_only=true"), progress=False)
    client = res.rounds[res.rounds.server_round == 0]
    assert len(client) and (client.num_selected == 5).all()  # min(m, M - s) = 5 distinct, every round
    q = np.array([float(v) for row in client.q_selected.astype(str) for v in row.split()])
    assert q.size == 5 * len(client) and np.allclose(q, 5 / 6)  # q_n = m / |A|
    chosen = {int(d) for row in client.selected.astype(str) for d in row.split()}
    assert chosen.isdisjoint(res.summary["excluded"]) and len(chosen) == 6
    again = simulate(tables_scenario().replace("run.rounds=40", "run.timing_only=true",
                                               "devices.excluded_count=8"), progress=False)
    assert (again.rounds.num_selected == 2).all()  # m > |A|: every available device


def test_mean_aggregation_is_the_plain_average():
    from wirelessfl.learning import FedAvg

    q = np.full(10, 0.1)
    assert np.allclose(FedAvg(aggregation="mean").aggregation_weights(np.array([1, 4, 7]), q, 10), 1 / 3)
    assert np.allclose(FedAvg().aggregation_weights(np.array([1, 4, 7]), q, 10), 1.0)  # 1 / (N q)
    w = FedAvg(server_lr=0.5, aggregation="mean").aggregation_weights(np.array([2, 2, 5]), q, 10)
    assert w.tolist() == [0.25, 0.0, 0.25]  # a device drawn twice counts once
    with pytest.raises(ValueError, match="aggregation"):
        FedAvg(aggregation="median")


def test_classes_per_device_scenario_partition():
    learner = learner_of(tables_scenario(classes_per_device=2, aux_samples=100))
    y = learner.trainer.dataset.y_train.numpy()
    held = learner.trainer._indices
    assert all(np.unique(y[ix]).size == 2 for ix in held)
    assert np.bincount(np.concatenate([np.unique(y[ix]) for ix in held]), minlength=10).tolist() == [2] * 10
    sizes = [ix.size for ix in held]
    assert max(sizes) - min(sizes) < 0.02 * np.mean(sizes)  # balanced: about (60000 - 100) / 10 each
    assert not np.intersect1d(np.concatenate(held), learner.trainer.server_indices).size
    again = learner_of(tables_scenario(classes_per_device=2, aux_samples=100))
    assert all(np.array_equal(a, b) for a, b in zip(held, again.trainer._indices))  # seeded


def test_new_keys_config_rules():
    with pytest.raises(ConfigError, match=r"learning.partition = 'shards': unknown partition; choose from .*'classes_per_device'"):
        tables_scenario(partition="shards")
    with pytest.raises(ConfigError, match="learning.classes_per_device = 1: p x devices.count = 7"):
        tables_scenario().replace("devices.count=7", "devices.excluded_count=0")
    with pytest.raises(ConfigError, match="learning.classes_per_device = 11: must be <= 10"):
        tables_scenario(classes_per_device=11)
    with pytest.raises(ConfigError, match="scheduler.sampling: not an option of scheduler 'lyapunov' "
                                          r"\(an option of scheduler 'uniform'\)"):
        from_dict({"run": {"rounds": 1}, "scheduler": {"name": "lyapunov", "sampling": "without_replacement"}})
    # naming another scheduler drops the options it does not take
    assert tables_scenario().replace('scheduler.name="lyapunov"').scheduler.options.m == 5
    with pytest.raises(ConfigError, match="learning.aggregation = 'median': must be one of"):
        tables_scenario(aggregation="median")


STARVATION = "scenarios/studies/safari_lyapunov_starvation.toml"


def test_lyapunov_lam_100_starves_the_weakest_devices():
    """Timing only, the wireless figure's scenario: at lam = 100 the Lyapunov scheduler selects the
    two weakest devices (sigma 0.1 and 0.62) in a small share of its rounds, far below uniform."""
    from wirelessfl.config import load_scenario

    base = load_scenario(STARVATION, ["run.timing_only=true", "run.rounds=300"])
    runs = {name: simulate(s, progress=False) for name, s in base.variant_scenarios()
            if name in ("fedavg_uniform", "fedavg_lyapunov")}
    uni, lya = (runs[k].devices.selections.to_numpy() for k in ("fedavg_uniform", "fedavg_lyapunov"))
    per_round = {k: r.devices.selections.to_numpy() / r.summary["rounds"] for k, r in runs.items()}
    assert base.scheduler.options.lam == 100 and base.scheduler.name == "lyapunov"
    # the weakest devices take part in under 5% of Lyapunov rounds, against about 40% under uniform
    assert per_round["fedavg_lyapunov"][:2].max() < 0.05 < 0.25 < per_round["fedavg_uniform"][:2].min()
    # and they get a far smaller share of all selections than the strongest (uniform: about even)
    assert lya[:2].sum() < 0.25 * lya[-2:].sum()
    assert uni[:2].sum() > 0.6 * uni[-2:].sum()


@pytest.mark.slow
def test_safari_recovers_what_exclusion_costs_fedavg():
    """End to end on Fashion-MNIST (about 20 s): p = 1 class per client and s = 4 of 10 excluded leave
    6 classes to FedAvg, which cannot pass 60%; SAFARI's server rounds on 1000 auxiliary samples
    bring the other classes back. Short version of the Tables 1-2 setting (30 rounds, 10 steps)."""
    from wirelessfl.config import load_scenario

    base = load_scenario("scenarios/studies/safari_tables.toml", [
        "run.rounds=30", "run.eval_every_rounds=10", "learning.local_steps=10",
        "learning.classes_per_device=1", "devices.excluded_count=4"])
    fedavg = simulate(base.replace('learning.algorithm="fedavg"', "learning.aux_samples=0"), progress=False)
    safari = simulate(base, progress=False)  # the file's own setting: n_T = 1000
    assert fedavg.summary["label_coverage"] == safari.summary["label_coverage"] == 0.6
    late = lambda r: r.evals.accuracy.tail(2).mean()
    assert late(fedavg) < 0.6
    assert late(safari) > late(fedavg) + 0.08
