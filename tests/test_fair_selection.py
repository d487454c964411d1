"""Fair client selection (docs/papers/fair_selection.md): the schedulers, the engine's explicit
selection and extra uplink traffic on the TDMA clock, aggregation, fairness metrics, config validation,
one end-to-end run."""
import numpy as np
import pytest
import torch

from wirelessfl.config import ConfigError, LinkConfig, from_dict
from wirelessfl.devices import ConstantCompute
from wirelessfl.learning import FedAvg
from wirelessfl.learning.fairness import device_test_sets, fairness_metrics
from wirelessfl.scheduling.base import Decision, Reports, RoundState, Scheduler, Traffic
from wirelessfl.scheduling.client_store import ClientStore
from wirelessfl.scheduling.fair import (LOSS_BITS, PowerOfChoiceScheduler, RandomScheduler,
                                        SubmodularScheduler)
from wirelessfl.sim.round.parts import EvalRule, StopRule
from wirelessfl.wireless import Link

from fakes import FixedChannel, RecordingLearner, make_engine

N = 30


def filled_store(n=N, dim=5, seed=0):
    rng = np.random.default_rng(seed)
    store = ClientStore(n, dim)
    store.update(np.arange(n), rng.uniform(0.1, 3.0, n), rng.normal(size=(n, dim)) * rng.uniform(0.5, 2, (n, 1)))
    return store


def state(r, rng, n=N, available=None, model_bits=1000.0):
    return RoundState(round=r, gains=np.ones(n), model_bits=model_bits, bandwidth_hz=1.0, noise_power=1.0,
                      available=available, rng=rng)


def selections(sched, seed=5, rounds=6):
    rng = np.random.default_rng(seed)
    return [sched.decide(state(r, rng)).selected.tolist() for r in range(rounds)]


def one_round(sched, st, report):
    """A round as the engine runs it: probe, the reports ``report(devices, gradients)`` gives, decide.
    Returns (decision, the probe's request)."""
    request = sched.probe(st)
    if request is not None:
        grads, losses = report(request.devices, request.gradients)
        sched.receive(Reports(st.round, request.devices, losses, grads))
    return sched.decide(st), request


@pytest.mark.parametrize("greedy", ["stochastic", "naive"])
def test_subtrunc_at_lambda_0_and_unionfl_at_mu_0_select_as_divfl(greedy):
    kw = dict(greedy=greedy, sample_size=4)
    divfl = selections(SubmodularScheduler(N, 5, 1.0, 10.0, filled_store(), name="divfl", **kw))
    sub = selections(SubmodularScheduler(N, 5, 1.0, 10.0, filled_store(), name="subtrunc", lam=0.0, **kw))
    uni = selections(SubmodularScheduler(N, 5, 1.0, 10.0, filled_store(), name="unionfl", mu=0.0, window=3, **kw))
    assert divfl == sub == uni
    # and the regularisers do change the selection when they are on (so the equality is not vacuous)
    big = selections(SubmodularScheduler(N, 5, 1.0, 10.0, filled_store(), name="unionfl", mu=1e6, window=3, **kw))
    assert big != divfl


def test_subtrunc_with_a_dominant_untruncated_loss_term_picks_the_largest_losses():
    store = filled_store()
    sched = SubmodularScheduler(N, 6, 1.0, 10.0, store, name="subtrunc", lam=1e6, budget=1e9, greedy="naive")
    sel = sched.decide(state(0, np.random.default_rng(0))).selected
    assert sorted(sel.tolist()) == sorted(np.argsort(-store.losses)[:6].tolist())


def test_unionfl_with_a_large_penalty_avoids_the_window():
    sched = SubmodularScheduler(N, 5, 1.0, 10.0, filled_store(), name="unionfl", mu=1e6, window=2, greedy="naive")
    sel = selections(sched, rounds=8)
    for r in range(2, 8):  # 3 x 5 = 15 <= 30 devices: never a repeat within three consecutive rounds
        assert not set(sel[r]) & (set(sel[r - 1]) | set(sel[r - 2]))
    assert sched.history.shape == (2, 5)


def test_bootstrap_and_piggyback_traffic_of_the_submodular_schedulers():
    calls = []

    def report(devices, with_gradients):
        calls.append((devices.tolist(), with_gradients))
        return np.ones((devices.size, 4), dtype=np.float32) * devices[:, None], np.ones(devices.size)

    sched = SubmodularScheduler(N, 5, 1.0, 10.0, name="divfl")
    rng = np.random.default_rng(0)
    first, _ = one_round(sched, state(0, rng, model_bits=640.0), report)
    assert calls == [(list(range(N)), True)]  # every device reports its gradient once
    np.testing.assert_array_equal(first.traffic.pre_upload_bits, np.full(N, 640.0 + LOSS_BITS))
    assert sched.store.vectors[7].tolist() == [7.0] * 4  # what was reported is stored
    second, request = one_round(sched, state(1, rng, model_bits=640.0), report)
    assert len(calls) == 1 and request is None and second.traffic.pre_upload_bits is None
    expected = np.zeros(N)
    expected[second.selected] = 640.0 + LOSS_BITS
    np.testing.assert_array_equal(second.traffic.piggyback_bits, expected)
    # the selected devices' gradients ride on their uploads
    assert second.traffic.report_with_upload.devices.tolist() == second.selected.tolist()
    assert second.traffic.report_with_upload.gradients
    oracle = SubmodularScheduler(N, 5, 1.0, 10.0, name="divfl", freshness="all_every_round")
    one_round(oracle, state(2, rng), report)
    decision, _ = one_round(oracle, state(3, rng), report)
    assert len(calls) == 3 and decision.traffic.report_with_upload is None  # every round, before the decision


def test_power_of_choice_takes_the_largest_losses_among_its_candidates():
    true_loss = np.random.default_rng(3).uniform(0, 5, N)
    report = lambda dev, g: (None, true_loss[dev])  # noqa: E731
    sched = PowerOfChoiceScheduler(N, 4, 1.0, 10.0, candidates=12)
    rng = np.random.default_rng(9)
    d, request = one_round(sched, state(0, rng), report)
    cand = np.flatnonzero(d.traffic.pre_upload_bits)
    assert cand.tolist() == request.devices.tolist() and not request.gradients
    assert cand.size == 12 and np.all(d.traffic.pre_upload_bits[cand] == LOSS_BITS)
    assert sorted(d.selected.tolist()) == sorted(cand[np.argsort(-true_loss[cand])[:4]].tolist())
    full, _ = one_round(PowerOfChoiceScheduler(N, 4, 1.0, 10.0), state(1, rng), report)
    assert sorted(full.selected.tolist()) == sorted(np.argsort(-true_loss)[:4].tolist())


def test_random_selects_kappa_distinct_available_devices_at_budget_matching_power():
    avail = np.zeros(N, dtype=bool)
    avail[::2] = True
    sched = RandomScheduler(N, 6, 1.0, 100.0)
    rng = np.random.default_rng(1)
    seen = set()
    for r in range(30):
        d = sched.decide(state(r, rng, available=avail))
        assert d.selected.size == 6 and np.unique(d.selected).size == 6 and avail[d.selected].all()
        seen |= set(d.selected.tolist())
        # P = min(Pmax, Pbar / q) with q = kappa / N_available = 6 / 15
        assert d.power[d.selected] == pytest.approx(np.full(6, 15 / 6))
    assert seen == set(np.flatnonzero(avail).tolist())


# --- engine ---------------------------------------------------------------------------------------

class ExplicitScheduler(Scheduler):
    def __init__(self, selected, pre=None, piggy=None, n=3):
        self.selected, self.pre, self.piggy, self.n = selected, pre, piggy, n

    def decide(self, st):
        n = self.n
        return Decision(omega=np.zeros(n), q=np.ones(n), power=np.ones(n), m=1,
                        selected=np.asarray(self.selected), traffic=Traffic(pre_upload_bits=self.pre, piggyback_bits=self.piggy))


def run(scheduler, compute_s=(1.0, 1.0, 1.0), rounds=1, access=None, learner=None):
    records = []
    # B = 1 Hz, N0 = 1, P = 1: gain 1 -> 1 bit/s, 3 -> 2 bit/s, 7 -> 3 bit/s
    link = Link(LinkConfig(bandwidth_hz=1.0, noise_power=1.0))
    eng = make_engine(channel=FixedChannel([1.0, 3.0, 7.0]), link=link, compute=ConstantCompute(np.asarray(compute_s)),
                 scheduler=scheduler, model_bits=6.0, num_devices=3, downlink_s=0.5, learner=learner,
                 streams={k: np.random.default_rng(i) for i, k in enumerate(("channel", "selection", "compute"))},
                 stop=StopRule(rounds=rounds), evaluate=EvalRule(every_rounds=1), on_round=records.append,
                 access=access(link) if access else None)
    eng.run()
    return records


def test_engine_uses_the_schedulers_explicit_selection():
    learner = RecordingLearner()
    recs = run(ExplicitScheduler([2, 0]), rounds=3, learner=learner)
    assert all(r.selected.tolist() == [0, 2] for r in recs)
    assert learner.trained == [[0, 2]] * 3
    # airtimes 6 / 1 and 6 / 3: after 0.5 s downlink and 1 s computation, TDMA one after the other
    assert recs[0].t_end - recs[0].t_start == pytest.approx(0.5 + 1.0 + 6.0 + 2.0)


def test_pre_uploads_and_piggybacks_take_airtime_on_the_tdma_clock():
    # pre-round: device 0 sends 2 bits at 1 bit/s (2 s), device 1 4 bits at 2 bit/s (2 s): 4 s in turn.
    # devices 1, 2 selected; uploads 6 + 2 bits at 2 bit/s (4 s) and 6 + 3 bits at 3 bit/s (3 s)
    sched = ExplicitScheduler([1, 2], pre=np.array([2.0, 4.0, 0.0]), piggy=np.array([5.0, 2.0, 3.0]))
    rec = run(sched)[0]
    assert rec.t_end - rec.t_start == pytest.approx(0.5 + 4.0 + 1.0 + 4.0 + 3.0)
    assert rec.airtime_s.tolist() == pytest.approx([4.0, 3.0])
    assert rec.extra_airtime_s == pytest.approx(4.0 + 2 / 2 + 3 / 3)
    assert rec.comm_s == pytest.approx(4.0 + 7.0)
    assert rec.extra_energy_j == pytest.approx(4.0)  # P = 1 for 4 s


def test_pre_uploads_under_fdma_share_the_band_at_once():
    from wirelessfl.wireless import FDMA

    # two senders on B / 2 each with noise N0 / 2: rate = 0.5 log2(1 + 2 g); g = 1 -> 0.79 bit/s
    sched = ExplicitScheduler([0], pre=np.array([1.0, 1.0, 0.0]))
    rec = run(sched, access=FDMA)[0]
    pre = max(1.0 / (0.5 * np.log2(1 + 2 * 1.0)), 1.0 / (0.5 * np.log2(1 + 2 * 3.0)))
    assert rec.extra_airtime_s == pytest.approx(pre)
    assert rec.t_end - rec.t_start == pytest.approx(0.5 + pre + 1.0 + 6.0)


# --- learning side --------------------------------------------------------------------------------

def test_selected_mean_weights():
    assert FedAvg(aggregation="mean").aggregation_weights(np.array([3, 1, 7]), np.zeros(10), 10).tolist() == pytest.approx([1 / 3] * 3)
    w = FedAvg(aggregation="data_size", data_sizes=np.arange(10) + 1.0).aggregation_weights(np.array([0, 4, 4]), np.zeros(10), 10)
    assert w.tolist() == pytest.approx([1 / 6, 5 / 6, 0.0])


def test_fairness_metrics_against_direct_formulas():
    a = np.array([0.9, 0.5, 0.75, 0.6, 1.0, 0.3])
    m = fairness_metrics(a)
    assert m["dissimilarity"] == pytest.approx(np.sqrt(np.mean((a - a.mean()) ** 2)))
    assert m["pairwise_gap"] == pytest.approx(np.mean(np.abs(a[:, None] - a[None, :])))
    assert m["device_acc_min"] == 0.3 and m["device_acc_range"] == pytest.approx(0.7)
    assert m["device_acc_p10"] == pytest.approx(np.percentile(a, 10))


def test_device_test_sets_are_label_matched():
    rng = np.random.default_rng(0)
    test_labels = rng.integers(0, 10, 5000)
    train = [np.repeat([1, 4, 7], 200), np.repeat([0, 2], [300, 100])]
    sets = device_test_sets(train, test_labels, 100, np.random.default_rng(1), 10)
    counts0 = np.bincount(test_labels[sets[0]], minlength=10)
    assert sorted(counts0[[1, 4, 7]].tolist()) == [33, 33, 34] and counts0.sum() == 100
    assert np.bincount(test_labels[sets[1]], minlength=10)[[0, 2]].tolist() == [75, 25]
    assert np.unique(sets[0]).size == 100  # without replacement


def test_full_local_gradient_matches_autograd_and_chunking():
    from wirelessfl.learning import Dataset, Trainer

    g = torch.Generator().manual_seed(0)
    data = Dataset(name="tiny", x_train=torch.randn(90, 1, 12, 12, generator=g),
                   y_train=torch.randint(0, 10, (90,), generator=g), x_test=torch.randn(20, 1, 12, 12, generator=g),
                   y_test=torch.randint(0, 10, (20,), generator=g), num_classes=10, input_shape=(1, 12, 12))
    parts = [np.arange(0, 45), np.arange(45, 90)]
    tr = Trainer(data, parts, "logreg", root_seed=0)
    grads, losses = tr.local_objectives([1, 0], chunk=7)
    model = tr.model
    for j, n in enumerate([1, 0]):
        params = {k: v.clone().requires_grad_(True) for k, v in tr.unflatten(tr.params.clone()).items()}
        out = torch.func.functional_call(model, params, (data.x_train[parts[n]],))
        loss = torch.nn.functional.cross_entropy(out, data.y_train[parts[n]])
        loss.backward()
        expected = torch.cat([params[k].grad.reshape(-1) for k in params]).numpy()
        np.testing.assert_allclose(grads[j], expected, rtol=1e-4, atol=1e-6)
        assert losses[j] == pytest.approx(float(loss.detach()), rel=1e-5)


# --- config ---------------------------------------------------------------------------------------

def scenario(**sched):
    return {"run": {"rounds": 1}, "devices": {"count": 20}, "scheduler": sched}


@pytest.mark.parametrize("sched, fragment", [
    ({"name": "divfl", "fair_lambda": 0.5}, "scheduler.fair_lambda: not an option of scheduler 'divfl' (an option "
                                            "of scheduler 'subtrunc')"),
    ({"name": "subtrunc", "fair_mu": 1.0}, "scheduler.fair_mu: not an option of scheduler 'subtrunc' (an option of "
                                           "scheduler 'unionfl')"),
    ({"name": "divfl", "kappa": 21}, "scheduler.kappa = 21: must be <= devices.count = 20"),
    ({"name": "power_of_choice", "kappa": 10, "poc_candidates": 5}, "scheduler.poc_candidates = 5: must lie in"),
    ({"name": "divfl", "fair_sample_size": 3, "fair_epsilon": 0.1}, "not both"),
    ({"name": "fairest"}, "scheduler.name = 'fairest': unknown scheduler; choose from 'lyapunov', 'uniform'"),
    ({"name": "subtrunc", "fair_phi": "square"}, "scheduler.fair_phi = 'square': must be one of 'log1p', 'identity'"),
    ({"name": "subtrunc", "fair_lambda": -1.0}, "scheduler.fair_lambda = -1.0: must be >= 0"),
    ({"name": "unionfl", "fair_window": -2}, "scheduler.fair_window = -2: must be >= 0"),
])
def test_bad_fair_settings_give_one_line_config_errors(sched, fragment):
    with pytest.raises(ConfigError) as exc:
        from_dict(scenario(**sched))
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


def test_fair_scheduler_refuses_weights_by_inclusion_probability_and_needs_a_valid_class_split():
    data = scenario(name="divfl")
    for algorithm in ("fedshuffle", "perfedavg_fo"):  # they weigh updates by 1 / q
        data["learning"] = {"algorithm": algorithm}
        with pytest.raises(ConfigError, match=f"learning.algorithm = '{algorithm}': it weighs updates by 1 / q"):
            from_dict(data)
    data["learning"] = {"aggregation": "unbiased"}
    with pytest.raises(ConfigError, match="learning.aggregation = 'unbiased'"):
        from_dict(data)
    data["learning"] = {"algorithm": "safari", "aux_samples": 10}  # averages, as FedAvg does here
    assert from_dict(data).learning.options.aggregation is None
    data["learning"] = {"partition": "classes_per_device", "classes_per_device": 3}
    assert from_dict(data).learning.classes_per_device == 3  # 3 x 20 is a multiple of 10
    with pytest.raises(ConfigError, match="learning.classes_per_device = 3"):
        from_dict({**data, "devices": {"count": 21}})  # 3 x 21 is not
    assert from_dict(scenario(name="subtrunc", fair_lambda=0.5)).scheduler.options.fair_lambda == 0.5


# --- end to end -----------------------------------------------------------------------------------

@pytest.mark.slow
def test_divfl_run_end_to_end_pays_for_its_gradients():
    from wirelessfl.experiments.run import simulate

    torch.set_num_threads(1)
    sc = from_dict({
        "seed": 1, "run": {"rounds": 4, "eval_every_rounds": 2},
        "devices": {"count": 20}, "channel": {"profile": "linear", "sigma_min": 0.5, "sigma_max": 3.0},
        "scheduler": {"name": "divfl", "kappa": 4},
        "learning": {"model": "logreg", "partition": "classes_per_device", "classes_per_device": 3,
                     "local_steps": 3, "lr": 0.1, "eval_train_samples": 500, "device_test_samples": 50}})
    res = simulate(sc, progress=False)
    rounds = res.rounds
    assert (rounds["num_selected"] == 4).all()
    bits = res.summary["model_bits"]
    assert rounds["extra_airtime_s"].iloc[0] > 0
    for _, row in rounds.iloc[1:].iterrows():  # later rounds: the piggy-back share of each upload
        airtime = np.array([float(a) for a in row["airtime_s"].split()])
        share = (bits + LOSS_BITS) / (2 * bits + LOSS_BITS)
        assert row["extra_airtime_s"] == pytest.approx(airtime.sum() * share, rel=1e-5)
    # round 0 also carries the bootstrap: 20 uploads of a gradient and a loss before the round
    assert rounds["extra_airtime_s"].iloc[0] > rounds["extra_airtime_s"].iloc[1:].max() * 3
    ev = res.evals
    assert list(ev["round"]) == [0, 2, 4]
    assert np.isfinite(ev["dissimilarity"]).all() and (ev["dissimilarity"] > 0).all()
    assert ev["accuracy"].iloc[-1] > ev["accuracy"].iloc[0]


def test_lenet_has_the_specs_parameter_counts():
    from wirelessfl.learning import build_model, num_parameters

    assert num_parameters(build_model("lenet", (1, 28, 28), 10)) == 44426
    assert num_parameters(build_model("lenet", (3, 32, 32), 10)) == 62006


def test_unionfl_resume_restores_the_store_and_the_window(interrupted_and_resumed):
    from test_checkpoint import assert_same_records

    torch.set_num_threads(1)
    sc = from_dict({
        "seed": 3, "run": {"rounds": 6, "eval_every_rounds": 3, "checkpoint_every": 2},
        "devices": {"count": 10}, "channel": {"profile": "linear"},
        "scheduler": {"name": "unionfl", "kappa": 3, "fair_mu": 5.0, "fair_window": 2},
        "learning": {"dataset": "synthetic", "model": "logreg", "samples_per_device": 40,
                     "local_steps": 2, "eval_train_samples": 200}})
    full, resumed = interrupted_and_resumed(sc, after=5)
    assert full.rounds["extra_airtime_s"].iloc[0] > 0 and full.rounds["extra_airtime_s"].iloc[1] > 0
    assert_same_records(resumed, full)


# --- the schedulers on a hand-computed instance (tests/test_submodular.py has the tables) -------------
#
# Gradients A = (0, 5), B = (0, -5), C = (0, 0), D = (12, 0), kappa = 2, naive greedy: DivFL's
# optimum is {C, D} (G = 42). SubTrunc with lambda = 1, b = 8 and phi(loss) = (8, .5, .5, .5) takes
# {A, D} (W = 37 + 8 = 45 against 42 + 1 = 43). UnionFL with mu = 10 and W = 1: round 0 has no history
# and takes DivFL's {C, D}; in round 1, U = {C, D} and h = G - 10 |S cap U| = {A,B} 34, {A,C} 25,
# {A,D} 27, {B,C} 25, {B,D} 27, {C,D} 22 -> {A, B}; in round 2, U = {A, B}: {C, D} 42 is unpenalised.

HAND_VECTORS = np.array([[0.0, 5.0], [0.0, -5.0], [0.0, 0.0], [12.0, 0.0]])


def hand_scheduler(name, losses=(8.0, 0.5, 0.5, 0.5), **kw):
    store = ClientStore(4, 2)
    store.update(np.arange(4), np.asarray(losses), HAND_VECTORS, round_idx=0)
    return SubmodularScheduler(4, 2, 1.0, 10.0, store, name=name, greedy="naive", **kw)


def hand_rounds(sched, rounds=3):
    return [sched.decide(state(r, np.random.default_rng(0), n=4)).selected.tolist() for r in range(rounds)]


def test_schedulers_on_the_hand_instance_choose_as_computed():
    assert hand_rounds(hand_scheduler("divfl")) == [[2, 3]] * 3
    assert hand_rounds(hand_scheduler("subtrunc", lam=1.0, budget=8.0, phi="identity")) == [[0, 3]] * 3
    # phi = ln(1 + x) on losses e^phi - 1 gives the same phi, so the same choice
    expm1 = np.expm1([8.0, 0.5, 0.5, 0.5])
    assert hand_rounds(hand_scheduler("subtrunc", losses=expm1, lam=1.0, budget=8.0)) == [[0, 3]] * 3
    assert hand_rounds(hand_scheduler("unionfl", mu=10.0, window=1)) == [[2, 3], [0, 1], [2, 3]]


def test_subtrunc_on_the_hand_instance_is_divfl_when_the_budget_binds_or_lambda_is_0():
    # b = 0.5 <= every phi: H = lambda b for every non-empty set, whatever lambda
    assert hand_rounds(hand_scheduler("subtrunc", lam=100.0, budget=0.5, phi="identity")) == [[2, 3]] * 3
    assert hand_rounds(hand_scheduler("subtrunc", lam=0.0, budget=8.0, phi="identity")) == [[2, 3]] * 3
    assert hand_rounds(hand_scheduler("unionfl", mu=0.0, window=1)) == [[2, 3]] * 3


def test_scheduler_trace_records_the_greedy_steps_without_changing_them():
    sched = hand_scheduler("subtrunc", lam=1.0, budget=8.0, phi="identity")
    sched.trace = []
    assert hand_rounds(sched, 1) == [[0, 3]]
    (entry,) = sched.trace
    first, second = entry["steps"]
    np.testing.assert_allclose(first["total"] - first["facility"], [8.0, 0.5, 0.5, 0.5])  # Delta_H
    np.testing.assert_allclose(second["total"] - second["facility"], 0.0)  # F_S = b after A
    assert [first["pick"], second["pick"]] == [0, 3] and entry["fresh_round"].tolist() == [0] * 4


def test_the_store_s_memory_is_checked_with_the_measured_model_at_run_start_and_reading_imports_no_torch(
        monkeypatch):
    """Reading a DivFL scenario checks the distances (and link.model_bits) without building a model;
    building the scheduler checks N vectors of the model's measured size."""
    import subprocess
    import sys

    import wirelessfl.fields as fields

    code = ("import sys; from wirelessfl.config import from_dict\n"
            "from_dict({'run': {'rounds': 1}, 'devices': {'count': 20}, 'scheduler': {'name': 'divfl'},"
            " 'learning': {'model': 'mlp'}})\n"
            "print('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
    sc = from_dict({"run": {"rounds": 1}, "devices": {"count": 20}, "scheduler": {"name": "divfl"},
                    "learning": {"model": "mlp"}})  # 20 x 199,210 float32: 16 MB
    monkeypatch.setattr(fields, "physical_memory", lambda: 4 * 10 ** 6)
    with pytest.raises(ConfigError, match=r"devices.count = 20: scheduler.name = 'divfl' with 20 devices"):
        sc.part("scheduler").from_scenario(sc, sc.options("scheduler"))
    with pytest.raises(ConfigError, match="devices.count = 20"):  # declared: caught as the scenario is read
        from_dict({"run": {"rounds": 1}, "devices": {"count": 20}, "scheduler": {"name": "divfl"},
                   "link": {"model_bits": 32 * 199210}})


def test_a_model_that_declares_no_parameter_count_has_its_store_checked_when_the_gradients_arrive(
        tmp_path, monkeypatch):
    """The scheduler builds no model (scheduling imports nothing of learning): a model part without
    parameter_count leaves the vectors' share of the store to the first reports' length."""
    import wirelessfl.fields as fields

    (tmp_path / "plainmodel.py").write_text(
        "import torch\n\n\ndef plain(input_shape, num_classes):\n"
        "    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, num_classes))\n")
    sc = from_dict({"run": {"rounds": 1}, "devices": {"count": 20}, "scheduler": {"name": "divfl"},
                    "learning": {"model": "plainmodel:plain"}}, base_dir=tmp_path)
    sched = sc.part("scheduler").from_scenario(sc, sc.options("scheduler"))
    assert sched.unchecked_store == "divfl"
    monkeypatch.setattr(fields, "physical_memory", lambda: 4 * 10 ** 6)  # 20 x 7850 float32 fit, 20 x 199,210 not
    sched.receive(Reports(round=0, devices=np.arange(2), losses=np.ones(2), gradients=np.zeros((2, 7850), np.float32)))
    assert sched.unchecked_store is None and sched.store.dim == 7850
    again = sc.part("scheduler").from_scenario(sc, sc.options("scheduler"))
    with pytest.raises(ConfigError, match=r"devices.count = 20: scheduler.name = 'divfl' with 20 devices"):
        again.receive(Reports(round=0, devices=np.arange(2), losses=np.ones(2),
                              gradients=np.zeros((2, 199210), np.float32)))
    mlp = from_dict({"run": {"rounds": 1}, "devices": {"count": 20}, "scheduler": {"name": "divfl"},
                     "learning": {"model": "logreg"}})
    assert mlp.part("scheduler").from_scenario(mlp, mlp.options("scheduler")).unchecked_store is None  # declared
