"""Round protocols on the event engine (semi_sync, fedbuff, fedasync) against independent references:
sync's closed-form rounds, a minimal event simulation written here, hand-computed aggregations
and band shares; the records' invariants read from updates.csv alone; checkpoints mid-flight."""
from __future__ import annotations

import heapq
import json
import math
import textwrap

import numpy as np
import pandas as pd
import pytest
import torch

from wirelessfl.cli import main
from wirelessfl.config import ConfigError, from_dict
from wirelessfl.experiments.run import simulate
from wirelessfl.sim.protocols import FedAsync, FedAsyncOptions, SemiSync, SemiSyncOptions, staleness_weight

SMALL_LEARNING = {"model": "logreg", "samples_per_device": 60, "eval_train_samples": 200, "local_steps": 3,
                  "batch_size": 8, "lr": 0.05}


def scenario(protocol: dict, *, timing=True, rounds=12, devices=None, link=None, run=None, scheduler=None, **tables):
    """A small scenario: random computation times, heterogeneous channels, TDMA."""
    data = {"seed": 3,
            "run": {"rounds": rounds, "timing_only": timing, "eval_every_rounds": 3, **(run or {})},
            "devices": {"count": 12, "compute": "shifted_exponential", "delay_mean_s": 0.5, **(devices or {})},
            "channel": {"profile": "linear"},
            "link": {"model_bits": 100000, "bandwidth_hz": 1e6, "downlink_s": 0.05, **(link or {})},
            "protocol": protocol, "scheduler": scheduler or {"name": "uniform", "m": 4},
            "learning": dict(SMALL_LEARNING), **tables}
    return from_dict(data)


def files_equal(a, b, names=("rounds.csv", "updates.csv", "devices.csv", "evals.csv")):
    for name in names:
        assert (a / name).read_text() == (b / name).read_text(), name


# --- semi_sync against sync ----------------------------------------------------------------------


@pytest.mark.parametrize("timing", [True, False])
def test_semi_sync_waiting_for_every_upload_equals_sync(tmp_path, timing, one_torch_thread):
    sync = simulate(scenario({"name": "sync"}, timing=timing, scheduler={"name": "lyapunov", "m": 4}), tmp_path / "sync",
                    progress=False)
    semi = simulate(scenario({"name": "semi_sync"}, timing=timing, scheduler={"name": "lyapunov", "m": 4}),
                    tmp_path / "semi", progress=False)
    files_equal(tmp_path / "sync", tmp_path / "semi")
    assert sync.summary["rounds"] == semi.summary["rounds"] == 12
    assert semi.summary["mean_staleness"] == 0.0 and (timing or len(semi.evals) == 5)


@pytest.mark.parametrize("scheduler", [{"name": "power_of_choice", "kappa": 3, "poc_candidates": 6},
                                       {"name": "divfl", "kappa": 3}])
def test_semi_sync_equals_sync_for_schedulers_that_probe_before_deciding(tmp_path, scheduler, one_torch_thread):
    """Reports before the computation (losses, bootstrap gradients) go up the same uplink first."""
    kw = dict(timing=False, rounds=6, scheduler=scheduler, learning={**SMALL_LEARNING, "model": "mlp"})
    simulate(scenario({"name": "sync"}, **kw), tmp_path / "sync", progress=False)
    semi = simulate(scenario({"name": "semi_sync"}, **kw), tmp_path / "semi", progress=False)
    files_equal(tmp_path / "sync", tmp_path / "semi")
    assert semi.rounds["extra_airtime_s"].iloc[0] > 0


def test_semi_sync_dropping_late_uploads_at_the_deadline_equals_sync_with_that_deadline(tmp_path):
    kw = dict(run={"round_deadline_s": 1.0}, rounds=20)
    simulate(scenario({"name": "sync"}, **kw), tmp_path / "sync", progress=False)
    semi = simulate(scenario({"name": "semi_sync", "late": "drop"}, **kw), tmp_path / "semi", progress=False)
    files_equal(tmp_path / "sync", tmp_path / "semi")
    assert semi.summary["dropped_uploads"] > 0  # the deadline bit


def test_semi_sync_with_server_rounds_equals_sync(tmp_path):
    kw = dict(rounds=15, learning={**SMALL_LEARNING, "algorithm": "safari", "safari_q": 0.6,
                                   "server_compute_s": 0.2})
    simulate(scenario({"name": "sync"}, **kw), tmp_path / "sync", progress=False)
    semi = simulate(scenario({"name": "semi_sync", "late": "drop"}, **kw), tmp_path / "semi", progress=False)
    files_equal(tmp_path / "sync", tmp_path / "semi")
    assert 0 < semi.summary["server_rounds"] < 15


def test_semi_sync_carries_late_uploads_into_later_aggregations(tmp_path):
    res = simulate(scenario({"name": "semi_sync", "first_k": 2}, rounds=30), tmp_path / "semi", progress=False)
    up = res.updates
    applied = up[up.outcome == "applied"]
    assert (applied.staleness > 0).any()  # late uploads applied later
    # a round aggregates when its first 2 uploads are in: each version applies 2 fresh updates
    fresh = applied[applied.staleness == 0].groupby("version_applied").size()
    assert (fresh == 2).all()
    rounds = res.rounds.set_index("round")
    assert (rounds.loc[applied.version_applied.unique(), "num_updates"].to_numpy()
            == applied.groupby("version_applied").size().to_numpy()).all()


# --- fedbuff: invariants read from updates.csv alone ---------------------------------------------


@pytest.mark.parametrize("timing", [True, False])
def test_fedbuff_records_keep_the_protocol_s_promises(tmp_path, timing, one_torch_thread):
    conc, k, max_stale = 6, 4, 2
    path = tmp_path / "fedbuff.toml"
    path.write_text(textwrap.dedent(f"""
        name = "fb"
        seed = 4
        [run]
        rounds = {30 if timing else 12}
        timing_only = {'true' if timing else 'false'}
        eval_every_rounds = 4
        [devices]
        count = 15
        compute = "shifted_exponential"
        delay_shift_s = 0.05
        delay_mean_s = 0.4
        [channel]
        profile = "linear"
        [link]
        model_bits = 200000
        bandwidth_hz = 1e6
        [protocol]
        name = "fedbuff"
        concurrency = {conc}
        buffer = {k}
        max_staleness = {max_stale}
        [scheduler]
        name = "uniform"
        [learning]
        model = "logreg"
        samples_per_device = 60
        eval_train_samples = 200
        local_steps = 2
        batch_size = 8
        """))
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    up = pd.read_csv(tmp_path / "out" / "fb" / "updates.csv")
    # no two TDMA transmissions overlap
    tx = up.dropna(subset=["tx_start_s"]).sort_values("tx_start_s")
    ends = tx.tx_end_s.fillna(tx.lost_s).to_numpy()
    assert (tx.tx_start_s.to_numpy()[1:] >= ends[:-1]).all()
    # never more than `concurrency` devices in flight (from dispatch until upload done or device lost)
    end = up.tx_end_s.fillna(up.lost_s)
    events = sorted([(t, 1) for t in up.dispatch_s] + [(t, -1) for t in end])  # ends first at a tie
    assert max(np.cumsum([d for _, d in events])) == conc
    # every aggregation applies exactly K updates, each staleness = version_applied - version_started
    applied = up[up.outcome == "applied"]
    assert (applied.groupby("version_applied").size() == k).all()
    assert sorted(applied.version_applied.unique()) == list(range(len(applied) // k))
    assert (applied.staleness == applied.version_applied - applied.version_started).all()
    # nothing older than max_staleness is applied; the staler ones were dropped
    assert applied.staleness.max() <= max_stale
    assert set(up.outcome) <= {"applied", "stale", "in_flight"}
    # a device is never in flight twice at once
    for _, rows in up.groupby("device"):
        rows = rows.sort_values("dispatch_s")
        assert (rows.dispatch_s.to_numpy()[1:] >= end[rows.index].to_numpy()[:-1]).all()
    summary = json.loads((tmp_path / "out" / "fb" / "summary.json").read_text())
    assert summary["aggregations"] == (30 if timing else 12) and summary["uploads"] == len(up)
    assert summary["mean_staleness"] == pytest.approx(applied.staleness.mean())


def minimal_fedbuff(concurrency: int, k: int, compute_mean: float, airtime: float, uploads: int, seed: int):
    """FedBuff with exponential computation and a fixed airtime on one first-come-first-served
    transmitter, written from scratch on a heap: (upload rate, staleness of the applied updates)."""
    rng = np.random.default_rng(seed)
    clock, version, free_at, done = 0.0, 0, 0.0, 0
    heap = [(rng.exponential(compute_mean), i, 0) for i in range(concurrency)]  # (ready, id, version)
    heapq.heapify(heap)
    buffer, staleness, last, ident = [], [], 0.0, concurrency
    # the transmitter serves in order of readiness: a device's upload ends at max(ready, free) + airtime
    while done < uploads:
        ready, _, started = heapq.heappop(heap)
        start = max(ready, free_at)
        free_at = clock = start + airtime
        done += 1
        buffer.append(started)
        if len(buffer) == k:
            staleness += [version - s for s in buffer]
            version, buffer = version + 1, []
        last = clock
        heapq.heappush(heap, (clock + rng.exponential(compute_mean), ident, version))
        ident += 1
    return done / last, np.asarray(staleness)


def test_fedbuff_matches_a_minimal_event_simulation(tmp_path):
    conc, k, mean = 8, 3, 0.6
    # every gain at the floor and one power for all: the same airtime for every upload
    sc = scenario({"name": "fedbuff", "concurrency": conc, "buffer": k, "staleness": "constant"},
                  rounds=2500, devices={"count": 40, "delay_mean_s": mean}, link={"downlink_s": 0.0},
                  channel={"sigma": 1e-6, "gain_floor": 1e-3})
    res = simulate(sc, progress=False)
    up = res.updates
    airtime = up.airtime_s.dropna().unique()
    assert airtime.size == 1  # the reference's fixed airtime
    rate, staleness = minimal_fedbuff(conc, k, mean, float(airtime[0]), uploads=len(up), seed=1)
    done = up[up.outcome != "in_flight"]
    assert len(done) / done.tx_end_s.max() == pytest.approx(rate, rel=0.03)
    got = up[up.outcome == "applied"].staleness.to_numpy()
    for s in range(5):  # the staleness distributions agree
        assert np.mean(got == s) == pytest.approx(np.mean(staleness == s), abs=0.02), s
    assert got.mean() == pytest.approx(staleness.mean(), rel=0.05)


# --- fedasync by hand on a quadratic -------------------------------------------------------------


class QuadraticTrainer:
    """f_n(x) = |x - c_n|^2 / 2; local gradient descent; the trainer's aggregation rule."""

    def __init__(self, centres, lr=0.3, steps=3):
        from wirelessfl.learning.trainer import Trainer

        self.centres = torch.as_tensor(centres, dtype=torch.float32)
        self.params = torch.zeros(self.centres.shape[1])
        self.lr, self.steps = lr, steps
        self.device, self.num_params = torch.device("cpu"), self.centres.shape[1]
        self._params = self.params
        self._aggregate = Trainer.aggregate
        self.aggregate_noise_var, self.aggregations = 0.0, 0  # what Trainer.aggregate reads and counts

    def descend(self, x, n):
        for _ in range(self.steps):
            x = x - self.lr * (x - self.centres[n])
        return x

    def aggregate(self, deltas, weights):
        self._params = self.params
        self._aggregate(self, deltas, weights)  # the real rule: a new tensor x + w @ deltas
        self.params = self._params


def quadratic_learner(centres):
    from wirelessfl.learning.algorithms import FedAvg
    from wirelessfl.learning.learner import FederatedLearner

    class QuadraticFedAvg(FedAvg):
        def local_updates(self, trainer, devices, round_idx):
            x = trainer.params
            return torch.stack([trainer.descend(x, int(n)) - x for n in devices])

    learner = FederatedLearner.__new__(FederatedLearner)
    learner.trainer, learner.algorithm = QuadraticTrainer(centres), QuadraticFedAvg()
    learner.evaluate = lambda: {"accuracy": 0.0}
    return learner


@pytest.mark.parametrize("alpha,staleness", [(1.0, "constant"), (0.5, "polynomial")])
def test_fedasync_mixes_each_arrival_in_as_by_hand(alpha, staleness):
    from fakes import FixedChannel
    from wirelessfl.config import LinkConfig
    from wirelessfl.devices import ShiftedExponentialCompute
    from wirelessfl.scheduling.schedulers import UniformScheduler
    from wirelessfl.sim.round.parts import STREAMS, EvalRule, Parts, StopRule
    from wirelessfl.sim.events.engine import EventEngine
    from wirelessfl.wireless import TDMA, Link

    n, d = 6, 3
    centres = np.random.default_rng(0).normal(size=(n, d)) * 3
    learner = quadratic_learner(centres)
    options = FedAsyncOptions(concurrency=3, alpha=alpha, staleness=staleness)
    parts = Parts(channel=FixedChannel(np.linspace(1.0, 5.0, n)), compute=ShiftedExponentialCompute(0.1, 1.0),
                  scheduler=UniformScheduler(n, 1, 1.0, 10.0), algorithm=learner.algorithm,
                  access=TDMA(Link(LinkConfig(bandwidth_hz=1e6))), num_devices=n, upload_bits=1e5)
    applied = []
    engine = EventEngine(parts, FedAsync(options), streams={s: np.random.default_rng(i) for i, s in enumerate(STREAMS)},
                         stop=StopRule(rounds=25), evaluate=EvalRule(every_rounds=100, at_start=False),
                         learner=learner, on_update=lambda u: applied.append((u.device, u.version, u.version_applied)))
    engine.run()
    # by hand: version v+1 = (1 - a) x_v + a y, with y the device's model from the version it started at
    versions = [torch.zeros(d)]
    for device, started, at in sorted((a for a in applied if a[2] >= 0), key=lambda a: a[2]):
        tau = at - started
        a = alpha * float(staleness_weight(staleness, [tau], 0.5, 4.0)[0])
        y = learner.trainer.descend(versions[started], device)
        versions.append((1 - a) * versions[at] + a * y)
    assert len(versions) == 26
    assert any(at - started > 0 for _, started, at in applied if at >= 0)  # some mixes were stale
    torch.testing.assert_close(learner.trainer.params, versions[-1], rtol=1e-5, atol=1e-6)


def test_staleness_functions_are_the_papers():
    tau = np.array([0, 1, 3, 4, 5, 9])
    assert staleness_weight("constant", tau, 0.5, 4).tolist() == [1.0] * 6
    np.testing.assert_allclose(staleness_weight("polynomial", tau, 0.5, 4), 1 / np.sqrt(1 + tau))
    np.testing.assert_allclose(staleness_weight("hinge", tau, 10, 4), [1, 1, 1, 1, 1 / 11, 1 / 51])


def test_each_built_in_staleness_class_is_its_closed_form():
    from wirelessfl.sim.protocols.staleness import STALENESS, Constant, Hinge, Polynomial

    assert Constant()(np.array([0.0, 2.5, 7.0])).tolist() == [1.0, 1.0, 1.0]
    np.testing.assert_allclose(Polynomial(0.5)(np.array([0.0, 3.0, 8.0])), [1.0, 1 / 2, 1 / 3])  # 1 / sqrt(1 + tau)
    np.testing.assert_allclose(Polynomial(1.0)(np.array([0.0, 1.0, 4.0])), [1.0, 1 / 2, 1 / 5])
    np.testing.assert_allclose(Polynomial(2.0)(np.array([1.0, 2.0])), [1 / 4, 1 / 9])
    # hinge, a = 1/2, b = 2: 1 up to the knee, then 1 / (a (tau - b) + 1)
    np.testing.assert_allclose(Hinge(0.5, 2.0)(np.array([0.0, 1.0, 2.0, 4.0, 6.0])), [1, 1, 1, 1 / 2, 1 / 3])
    np.testing.assert_allclose(Hinge(3.0, 0.0)(np.array([0.0, 1.0, 3.0])), [1, 1 / 4, 1 / 10])
    # the scenario's staleness_a and staleness_b reach them through from_options, by name
    assert STALENESS.load("polynomial").from_options(2.0, 9.0)(np.array([1.0]))[0] == 0.25
    assert STALENESS.load("hinge").from_options(0.5, 2.0)(np.array([4.0]))[0] == 0.5
    assert STALENESS.load("constant").from_options(0.5, 2.0)(np.array([9.0]))[0] == 1.0
    assert [STALENESS.load(n) for n in ("constant", "polynomial", "hinge")] == [Constant, Polynomial, Hinge]
    assert Polynomial(0.5)(np.zeros((2, 3))).shape == (2, 3)  # the staleness array's shape


MY_STALENESS = '''
import numpy as np
from wirelessfl.sim.protocols.staleness import Staleness

CALLS = []


class MyPolynomial(Staleness):
    """(1 + tau)^-a, written out again: a run with it must equal one with "polynomial"."""

    def __init__(self, a):
        self.a = a

    @classmethod
    def from_options(cls, a, b):
        return cls(a)

    def __call__(self, staleness):
        CALLS.append(np.asarray(staleness).tolist())
        return (1.0 + np.asarray(staleness, dtype=float)) ** -self.a


class Halving:
    """2^-tau, without subclassing the protocol: from_options is the protocol's (Halving())."""

    def __call__(self, staleness):
        return 0.5 ** np.asarray(staleness, dtype=float)


class NoCall(Staleness):
    pass
'''


def test_a_staleness_class_by_import_path_runs_fedasync(tmp_path, one_torch_thread):
    import sys

    (tmp_path / "mystale.py").write_text(MY_STALENESS)
    base = {"name": "fedasync", "concurrency": 4, "alpha": 0.8, "staleness_a": 0.7}
    runs = {}
    for name in ("polynomial", "mystale:MyPolynomial", "mystale:Halving"):
        sc = scenario({**base, "staleness": name}, timing=False, rounds=10, plugin_path=[str(tmp_path)])
        runs[name] = simulate(sc, tmp_path / name.replace(":", "_"), progress=False)
    calls = sys.modules["mystale"].CALLS
    # one call per staleness value (the protocol keeps the weights of those it saw), some stale
    assert len(calls) == len({tuple(tau) for tau in calls}) >= 2 and any(tau[0] > 0 for tau in calls)
    files_equal(tmp_path / "polynomial", tmp_path / "mystale_MyPolynomial")  # the same weights: the same run
    assert not runs["mystale:Halving"].evals.equals(runs["polynomial"].evals)
    protocol = sc.part("protocol").from_scenario(sc, sc.options("protocol"))
    assert type(protocol.staleness).__name__ == "Halving"
    assert protocol.staleness(np.array([0.0, 1.0, 3.0])).tolist() == [1.0, 0.5, 0.125]


@pytest.mark.parametrize("name,message", [
    ("cubic", "protocol.staleness = 'cubic': unknown staleness; choose from 'constant', 'polynomial', 'hinge', "
              "or give an import path 'module:Class' (see docs/extending.md)"),
    ("mystale:Nope", "protocol.staleness = 'mystale:Nope': mystale has no 'Nope' (its classes: Halving, "
                     "MyPolynomial, NoCall, Staleness)"),
    ("mystale:NoCall", "protocol.staleness = 'mystale:NoCall': NoCall does not fit the staleness protocol: it lacks "
                       "__call__; see docs/extending.md"),
])
def test_a_staleness_function_that_cannot_be_found_is_one_line_naming_the_field(tmp_path, capsys, name, message):
    (tmp_path / "mystale.py").write_text(MY_STALENESS)
    for where in ({"staleness": name}, {"options": {"staleness": name}}):
        with pytest.raises(ConfigError) as err:
            from_dict({"run": {"rounds": 3}, "devices": {"count": 20}, "protocol": {"name": "fedbuff", **where}},
                      base_dir=tmp_path)
        assert str(err.value) == message
    toml = tmp_path / "s.toml"
    toml.write_text(f'[run]\nrounds = 3\ntiming_only = true\n[protocol]\nname = "fedasync"\nstaleness = "{name}"\n')
    assert main(["run", str(toml), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    assert message in capsys.readouterr().err


def test_the_guide_s_staleness_function_runs_as_written(tmp_path):
    """docs/extending.md's Exponential, copied into a file beside a scenario that names it."""
    import re
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[1] / "docs" / "extending.md").read_text()
    code = next(c for lang, c in re.findall(r"```(\w+)\n(.*?)```", guide, re.S) if "class Exponential" in c)
    (tmp_path / "expstale.py").write_text(code)
    (tmp_path / "s.toml").write_text(
        '[run]\nrounds = 20\ntiming_only = true\n[devices]\ncount = 12\ncompute = "shifted_exponential"\n'
        '[link]\nmodel_bits = 100000\n[protocol]\nname = "fedasync"\nconcurrency = 4\n'
        'staleness = "expstale:Exponential"\nstaleness_a = 0.3\n')
    assert main(["run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    assert (pd.read_csv(tmp_path / "out" / "s" / "updates.csv").staleness > 0).any()
    from wirelessfl import load_scenario

    sc = load_scenario(tmp_path / "s.toml")
    s = sc.part("protocol").from_scenario(sc, sc.options("protocol")).staleness
    np.testing.assert_allclose(s(np.array([0.0, 1.0, 5.0])), np.exp(-0.3 * np.array([0.0, 1.0, 5.0])))


# --- FDMA: the band shared among the devices on the air ------------------------------------------


def test_fdma_splits_the_band_among_the_devices_on_the_air_as_they_come_and_go():
    from fakes import ClientRoundsOnly, FixedChannel, SelectAll
    from wirelessfl.config import LinkConfig
    from wirelessfl.devices import ConstantCompute
    from wirelessfl.sim.round.parts import STREAMS, EvalRule, Parts, StopRule
    from wirelessfl.sim.events.engine import EventEngine
    from wirelessfl.wireless import FDMA, Link

    g, p, n0, bw, bits, t1 = np.array([2.0, 0.5]), 1.0, 1.0, 1e6, 3e6, 1.0
    parts = Parts(channel=FixedChannel(g), compute=ConstantCompute(np.array([0.0, t1])), scheduler=SelectAll(2, p),
                  algorithm=ClientRoundsOnly(), access=FDMA(Link(LinkConfig(bandwidth_hz=bw, noise_power=n0))),
                  num_devices=2, upload_bits=bits)
    seen = []
    engine = EventEngine(parts, SemiSync(SemiSyncOptions(), None),
                         streams={s: np.random.default_rng(i) for i, s in enumerate(STREAMS)},
                         stop=StopRule(rounds=1), evaluate=EvalRule(every_rounds=10, at_start=False),
                         on_update=seen.append)
    engine.run()
    by = {u.device: u for u in seen}
    alone = bw * np.log2(1 + g * p / n0)          # the whole band
    shared = bw / 2 * np.log2(1 + g * p * 2 / n0)  # half the band each, half the noise
    # device 0 alone until t1, then both share; whoever finishes first leaves the other alone
    left0 = bits - alone[0] * t1
    end0 = t1 + left0 / shared[0]
    sent1 = shared[1] * (end0 - t1)
    end1 = end0 + (bits - sent1) / alone[1]
    assert by[0].tx_end_s == pytest.approx(end0, rel=1e-12)
    assert by[1].tx_end_s == pytest.approx(end1, rel=1e-12)
    assert by[0].energy_j == pytest.approx(p * end0, rel=1e-12)


# --- continuous-time availability ------------------------------------------------------------------


def test_devices_that_go_offline_mid_flight_are_lost_and_their_slots_refilled(tmp_path):
    period = 0.25
    res = simulate(scenario({"name": "fedbuff", "concurrency": 5, "buffer": 3}, rounds=60,
                            devices={"p_on_to_off": 0.15, "p_off_to_on": 0.5, "availability_period_s": period}),
                   tmp_path / "run", progress=False)
    up = res.updates
    lost = up[up.outcome == "offline"]
    assert len(lost) > 5
    # lost at an availability step, while computing or uploading
    steps = lost.lost_s / period
    np.testing.assert_allclose(steps, np.round(steps), atol=1e-9)
    assert (lost.lost_s >= lost.dispatch_s).all() and lost.tx_end_s.isna().all()
    # each lost slot is handed to another device at once when one is idle and available
    assert up.dispatch_s.isin(lost.lost_s).sum() > 0.8 * len(lost)


# --- checkpoints mid-flight ---------------------------------------------------------------------


PROTOCOLS = {"semi_sync": {"name": "semi_sync", "first_k": 2},
             "semi_sync_probing": {"name": "semi_sync", "first_k": 2},
             "fedbuff": {"name": "fedbuff", "concurrency": 5, "buffer": 3, "max_staleness": 3},
             "fedasync": {"name": "fedasync", "concurrency": 4}}


def resumed_equals_full(tmp_path, interrupted_and_resumed, sc, after):
    """Ctrl-C after ``after`` aggregations, then --resume: every record file equals the uninterrupted run's."""
    full, resumed = interrupted_and_resumed(sc, after=after)
    assert resumed.summary["status"] == "complete"
    files_equal(tmp_path / "full", tmp_path / "cut")
    return full


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
@pytest.mark.parametrize("access", ["tdma", "fdma", "tdma_slotted", "ofdma"])
def test_resume_mid_flight_gives_the_uninterrupted_records(tmp_path, interrupted_and_resumed, name, access):
    probing = {"scheduler": {"name": "power_of_choice", "kappa": 3, "poc_candidates": 8}} \
        if name.endswith("probing") else {}
    sc = scenario(PROTOCOLS[name], rounds=15, run={"checkpoint_every": 2}, link={"access": access},
                  devices={"p_on_to_off": 0.1, "p_off_to_on": 0.5, "availability_period_s": 0.3}, **probing)
    full = resumed_equals_full(tmp_path, interrupted_and_resumed, sc, after=7)
    assert full.updates.outcome.isin(["offline"]).any()


@pytest.mark.parametrize("access", [{}, {"access": "tdma_slotted", "slot_s": 0.003, "guard_s": 0.001},
                                    {"access": "dedicated", "subbands": 4}, {"access": "fdma"},
                                    {"access": "ofdma", "resource_blocks": 6}],
                         ids=["tdma", "tdma_slotted", "dedicated", "fdma", "ofdma"])
@pytest.mark.parametrize("name", ["semi_sync", "fedbuff"])
def test_resume_mid_flight_of_packets_being_retried_gives_the_uninterrupted_records(tmp_path, interrupted_and_resumed,
                                                                                   name, access):
    sc = scenario(PROTOCOLS[name], rounds=15, run={"checkpoint_every": 2},
                  link={"errors": "waterfall", "waterfall_m": 2.0 * access.get("subbands", 1), "max_attempts": 3,
                        "packet_bits": 30000, **access})
    full = resumed_equals_full(tmp_path, interrupted_and_resumed, sc, after=7)
    assert (full.updates.attempts > 4).any() and (full.updates.outcome == "lost").any()


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_resume_mid_flight_of_a_training_run_gives_the_uninterrupted_records(tmp_path, interrupted_and_resumed,
                                                                             name, one_torch_thread):
    sc = scenario(PROTOCOLS[name], timing=False, rounds=10, run={"checkpoint_every": 3})
    resumed_equals_full(tmp_path, interrupted_and_resumed, sc, after=5)


@pytest.mark.slow
def test_kill_9_and_resume_of_a_fedbuff_run_gives_identical_records(tmp_path):
    from fakes import killed_and_resumed

    full, cut = killed_and_resumed(tmp_path, textwrap.dedent("""
        name = "kill"
        seed = 2
        [run]
        rounds = 3000
        timing_only = true
        checkpoint_every = 50
        [devices]
        count = 60
        compute = "shifted_exponential"
        delay_mean_s = 0.5
        [link]
        model_bits = 1000000
        [protocol]
        name = "fedbuff"
        concurrency = 20
        buffer = 5
        [scheduler]
        name = "uniform"
        """), "kill")
    files_equal(full, cut)


# --- scheduling in continuous time --------------------------------------------------------------


def test_a_dispatch_rule_from_the_user_s_own_file_runs_under_fedbuff(tmp_path):
    (tmp_path / "best.py").write_text(textwrap.dedent("""
        import numpy as np
        from wirelessfl.scheduling import Dispatch, Scheduler
        from wirelessfl.scheduling.schedulers import UniformScheduler


        class BestIdle(UniformScheduler):
            '''Rounds as uniform; under event protocols the idle devices of best mean gain, at full power.'''

            def dispatch(self, state):
                gain = np.where(state.busy, -np.inf, state.mean_gains)
                best = np.argsort(-gain, kind="stable")[: state.slots]
                return Dispatch(best, self.p_max[best], {"best_gain": float(gain[best[0]])})
        """))
    (tmp_path / "s.toml").write_text(textwrap.dedent("""
        [run]
        rounds = 40
        timing_only = true
        [devices]
        count = 20
        compute = "shifted_exponential"
        [channel]
        profile = "linear"
        [link]
        model_bits = 100000
        [protocol]
        name = "fedbuff"
        concurrency = 4
        buffer = 2
        [scheduler]
        name = "best:BestIdle"
        """))
    assert main(["run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    up = pd.read_csv(tmp_path / "out" / "s" / "updates.csv")
    # sigma grows with the index: only the 5 best devices ever run (4 in flight, 1 freed at a time)
    assert set(up.device) <= set(range(15, 20)) and len(up) > 40
    rounds = pd.read_csv(tmp_path / "out" / "s" / "rounds.csv")
    assert "best_gain" in rounds


def brute_force_dispatch(state, queue, p_bar, p_max, V, lam, mu):
    """The cheapest idle device by a fine power grid (no Lambert W)."""
    best = (math.inf, None, None)
    for n in range(state.busy.size):
        if state.busy[n] or (state.available is not None and not state.available[n]):
            continue
        grid = np.concatenate([np.linspace(1e-9, p_max[n], 200001)])
        airtime = state.model_bits / (state.bandwidth_hz * np.log2(1 + state.mean_gains[n] * grid / state.noise_power))
        cost = V * lam * airtime + queue[n] * grid
        i = int(np.argmin(cost))
        total = cost[i] - V * mu * (state.version - state.last_applied[n])
        if best[1] is None or total < best[0] - 1e-9 * abs(best[0]):
            best = (total, n, grid[i])
    return best


def test_lyapunov_dispatch_picks_what_brute_force_picks():
    from wirelessfl.scheduling.base import DispatchState
    from wirelessfl.scheduling.schedulers import LyapunovScheduler

    rng = np.random.default_rng(7)
    for trial in range(25):
        n = int(rng.integers(2, 7))
        V, lam, mu = float(rng.choice([1.0, 100.0])), float(rng.choice([1.0, 100.0])), float(rng.choice([0, 0.5, 5]))
        p_bar, p_max = rng.uniform(0.5, 2, n), rng.uniform(5, 50, n)
        sched = LyapunovScheduler(n, 1, V, lam, p_bar, p_max, age_weight=mu)
        sched.queue = rng.choice([0.0, 1.0, 30.0], n) * rng.uniform(0.5, 2, n)
        queue = sched.queue.copy()
        busy = rng.random(n) < 0.3
        busy[int(rng.integers(n))] = False
        state = DispatchState(time_s=0.0, version=5, slots=1, busy=busy, num_busy=int(busy.sum()), available=None,
                              last_applied=rng.integers(0, 6, n), mean_gains=rng.uniform(0.01, 5, n),
                              model_bits=1e5, bandwidth_hz=1e6, noise_power=1.0, per_aggregation=2,
                              interval_s=1.0, rng=rng)
        sched.dispatch_queues.version = 5
        got = sched.dispatch(state)
        cost, device, power = brute_force_dispatch(state, queue, p_bar, p_max, V, lam, mu)
        assert got.devices.tolist() == [device], trial
        assert got.power[0] == pytest.approx(power, rel=2e-3, abs=2e-3 * p_max[device])


def test_lyapunov_dispatch_queues_follow_the_power_used_per_aggregation():
    from wirelessfl.scheduling.base import DispatchState
    from wirelessfl.scheduling.schedulers import LyapunovScheduler

    n = 4
    sched = LyapunovScheduler(n, 1, 10.0, 1.0, np.full(n, 1.0), np.full(n, 8.0), age_weight=0.0)
    rng = np.random.default_rng(0)

    def state(version, busy=()):
        mask = np.zeros(n, dtype=bool)
        mask[list(busy)] = True
        return DispatchState(time_s=0.0, version=version, slots=1, busy=mask, num_busy=int(mask.sum()), available=None,
                             last_applied=np.zeros(n, dtype=np.int64), mean_gains=np.array([1.0, 2.0, 3.0, 4.0]),
                             model_bits=1e5, bandwidth_hz=1e6, noise_power=1.0, per_aggregation=1,
                             interval_s=1.0, rng=rng)

    first = sched.dispatch(state(0))
    assert first.devices.tolist() == [3] and first.power[0] == 8.0  # empty queues: best channel, full power
    second = sched.dispatch(state(0, busy=[3]))
    assert second.devices.tolist() == [2]
    sched.dispatch(state(2))  # two aggregations later: Z = max(Z + e - Pbar, 0), then max(Z - Pbar, 0)
    spent = np.array([0, 0, second.power[0], 8.0])
    np.testing.assert_allclose(sched.queue, np.maximum(np.maximum(spent - 1.0, 0) - 1.0, 0))


# --- what the protocols refuse --------------------------------------------------------------------


@pytest.mark.parametrize("tables,match", [
    ({"protocol": {"name": "fedbuff"}, "scheduler": {"name": "divfl"}}, "scheduler.name = 'divfl': has no dispatch"),
    ({"protocol": {"name": "fedbuff"}, "learning": {"algorithm": "safari"}}, "learning.algorithm = 'safari'"),
    ({"protocol": {"name": "semi_sync"}, "learning": {"algorithm": "safari"}}, "learning.algorithm = 'safari'"),
    ({"protocol": {"name": "fedasync"}, "learning": {"algorithm": "fednova"}}, "learning.algorithm = 'fednova'"),
    ({"protocol": {"name": "fedbuff"}, "learning": {"algorithm": "fedshuffle", "momentum": 0.9}}, "momentum"),
    ({"protocol": {"name": "fedbuff", "concurrency": 50}}, "protocol.concurrency = 50"),
    ({"protocol": {"name": "fedbuff", "staleness": "cubic"}}, "protocol.staleness"),
    ({"protocol": {"name": "sync", "buffer": 3}}, "protocol.buffer"),
    ({"protocol": {"name": "fedasync"}, "run": {"rounds": 3, "round_deadline_s": 2.0}}, "run.round_deadline_s"),
])
def test_protocols_refuse_what_they_cannot_run(tables, match):
    data = {"run": {"rounds": 3}, "devices": {"count": 20}}
    data.update(tables)
    with pytest.raises(ConfigError, match=match):
        from_dict(data)


def test_semi_sync_drop_runs_algorithms_that_cannot_apply_stale_updates(tmp_path):
    sc = scenario({"name": "semi_sync", "first_k": 2, "late": "drop"}, rounds=8,
                  learning={**SMALL_LEARNING, "algorithm": "safari", "safari_q": 0.7})
    res = simulate(sc, progress=False)
    assert res.summary["mean_staleness"] == 0.0
    assert set(res.updates.outcome) <= {"applied", "late_dropped", "in_flight"}
    assert (res.updates.outcome == "late_dropped").any()


def test_event_figures_from_the_command_line(tmp_path):
    simulate(scenario({"name": "fedbuff", "concurrency": 4, "buffer": 2}, rounds=20), tmp_path / "runs" / "fb",
             progress=False)
    simulate(scenario({"name": "sync"}, rounds=5), tmp_path / "runs" / "sync", progress=False)
    out = tmp_path / "figs"
    assert main(["plot", str(tmp_path / "runs"), "--events", "--window", "0,5", "--out", str(out)]) == 0
    assert (out / "staleness.png").stat().st_size > 0 and (out / "gantt.png").stat().st_size > 0
    assert main(["plot", str(tmp_path / "runs"), "--window", "5,1"]) == 2  # one line, exit 2


def test_plot_draws_a_scenario_s_variants_in_the_scenario_s_order(tmp_path):
    """plot --events (and every plot of a scenario's folder) takes the variants in the order the run
    drew them (index.json), not by name: the same panels and colours as the run's own figures."""
    from wirelessfl.experiments.plots import find_runs
    from wirelessfl.experiments.run import run_variants

    base = scenario({"name": "sync"}, rounds=3).replace("run.timing_only=true")
    family = base.replace('variants.zeta.protocol.name="fedbuff"', "variants.zeta.protocol.concurrency=3",
                          "variants.zeta.protocol.buffer=2", 'variants.alpha.protocol.name="sync"')
    run_variants(family, out_dir=tmp_path / "runs", progress=False)
    listed = json.loads((tmp_path / "runs" / "index.json").read_text())["runs"]
    assert listed == ["zeta", "alpha"] and list(find_runs([tmp_path / "runs"])) == listed
    (tmp_path / "runs" / "index.json").unlink()  # without it: by name
    assert list(find_runs([tmp_path / "runs"])) == ["alpha", "zeta"]


def test_algorithms_hear_what_the_uplink_did_before_each_aggregation(tmp_path, one_torch_thread):
    """An algorithm that HearsTheUplink gets the devices, gains, powers and arrivals of the updates
    it aggregates in its ``uplink``: the same as updates.csv says, under sync and fedbuff."""
    from wirelessfl.learning.algorithms import FedAvg

    heard = []

    class Listening(FedAvg):
        def uplink(self, facts):
            heard.append(facts)

    import wirelessfl.learning.algorithms as algorithms_module

    algorithms_module.Listening = Listening
    try:
        for name, protocol in (("sync", {"name": "sync"}), ("fedbuff", {"name": "fedbuff", "concurrency": 4,
                                                                        "buffer": 2})):
            heard.clear()
            sc = scenario(protocol, timing=False, rounds=5, run={"round_deadline_s": 1.5} if name == "sync" else None,
                          learning={**SMALL_LEARNING, "algorithm": "wirelessfl.learning.algorithms:Listening"})
            res = simulate(sc, tmp_path / name, progress=False)
            up = res.updates
            assert len(heard) == 5
            for version, facts in enumerate(heard):
                rows = up[(up.version_started == version)] if name == "sync" else up[up.version_applied == version]
                if name == "sync":
                    assert facts.devices.tolist() == rows.device.tolist()
                    assert facts.arrived.tolist() == (rows.outcome == "applied").tolist()
                else:
                    assert sorted(facts.devices.tolist()) == sorted(rows.device.tolist()) and facts.arrived.all()
                np.testing.assert_allclose(np.sort(facts.gains), np.sort(rows.gain), rtol=1e-9)
                np.testing.assert_allclose(np.sort(facts.power), np.sort(rows.power), rtol=1e-9)
                assert facts.noise_var == 0.0
    finally:
        del algorithms_module.Listening


def test_the_summary_line_speaks_of_the_queues_transient_only_for_round_decisions():
    from wirelessfl.experiments.summary_line import _power

    summary = {"mean_time_avg_power": 1.02, "p_bar": 1.0, "power_settled_round": math.nan, "rounds": 120}
    assert _power({**summary, "protocol": "fedbuff"}) == "time-average power 1.02 (budget P̄ = 1, a long-run average)"
    assert "transient outlasts these 120 rounds" in _power({**summary, "protocol": "sync"})
    assert "transient" in _power({**summary, "protocol": "semi_sync"})


def test_a_dispatch_rule_sees_the_updates_that_wait_in_the_buffer(tmp_path):
    """DispatchState.waiting counts each device's updates that arrived and are not applied yet: at a
    dispatch at time t, those with tx_end <= t whose aggregation comes after t (a dispatch follows the
    aggregation of the same arrival)."""
    from wirelessfl.scheduling.schedulers import UniformScheduler

    seen = []
    real, real_one = UniformScheduler.dispatch, UniformScheduler.dispatch_one

    def watching(self, state):
        seen.append((state.time_s, state.waiting.copy()))
        return real(self, state)

    def watching_one(self, state):  # the shortcut for one freed slot (DispatchesOne)
        one = real_one(self, state)
        if one is not None:  # else dispatch is asked, and records the state
            seen.append((state.time_s, state.waiting.copy()))
        return one

    UniformScheduler.dispatch, UniformScheduler.dispatch_one = watching, watching_one
    try:
        res = simulate(scenario({"name": "fedbuff", "concurrency": 6, "buffer": 4}, rounds=30), tmp_path / "fb",
                       progress=False)
    finally:
        UniformScheduler.dispatch, UniformScheduler.dispatch_one = real, real_one
    up, ends = res.updates, res.rounds.set_index("round")["t_end"]
    applied_at = up.version_applied.map(ends).fillna(np.inf).to_numpy()
    checked = 0
    for t, waiting in seen[6:]:  # after the first concurrency dispatches at t = 0
        held = up[(up.tx_end_s.to_numpy() <= t) & (applied_at > t) & (up.outcome.isin(["applied", "in_flight"]))]
        expected = np.bincount(held.device.to_numpy(dtype=np.int64), minlength=waiting.size)
        assert (waiting == expected).all(), t
        checked += int(waiting.sum() > 0)
    assert checked > 10  # the buffer held updates at many dispatches
