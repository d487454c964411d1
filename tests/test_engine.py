"""The sync engine: round times, TDMA first-come-first-served order (in closed form), stop and evaluation rules."""
import numpy as np
import pytest

from wirelessfl.config import LinkConfig
from wirelessfl.devices import ConstantCompute
from wirelessfl.sim.round.parts import EvalRule, StopRule
from wirelessfl.wireless import Link

from fakes import FixedChannel, RecordingLearner, SelectAll, make_engine




def run_engine(gains, compute_s, rounds=1, downlink_s=0.0, learner=None, evaluate=None, stop=None):
    n = len(gains)
    records = []
    streams = {k: np.random.default_rng(i) for i, k in enumerate(("channel", "selection", "compute"))}
    # B = 1 Hz, N0 = 1, P = 1: gain 1 -> 1 bit/s, 3 -> 2 bit/s, 7 -> 3 bit/s
    eng = make_engine(channel=FixedChannel(gains), link=Link(LinkConfig(bandwidth_hz=1.0, noise_power=1.0)),
                 compute=ConstantCompute(np.asarray(compute_s, dtype=float)), scheduler=SelectAll(n),
                 model_bits=6.0, num_devices=n, streams=streams, downlink_s=downlink_s, learner=learner,
                 stop=stop or StopRule(rounds=rounds), evaluate=evaluate or EvalRule(every_rounds=1),
                 on_round=records.append)
    eng.run()
    return records, eng


def test_equal_computation_round_lasts_comp_plus_sum_of_airtimes():
    records, _ = run_engine([1.0, 3.0, 7.0], [2.5, 2.5, 2.5], rounds=3, downlink_s=0.5)
    airtimes = [6.0, 3.0, 2.0]
    for i, rec in enumerate(records):
        assert rec.t_end - rec.t_start == pytest.approx(0.5 + 2.5 + sum(airtimes))
        assert rec.comm_s == pytest.approx(sum(airtimes))
        assert rec.t_start == pytest.approx(i * (0.5 + 2.5 + 11.0))
    assert list(records[0].upload_order) == [0, 1, 2]  # ties: in device order


def test_uploads_are_first_come_first_served_in_order_of_computation():
    # device 0 finishes computing last, device 2 first; airtimes 6, 3, 2
    records, _ = run_engine([1.0, 3.0, 7.0], [10.0, 1.0, 0.0])
    rec = records[0]
    assert list(rec.upload_order) == [2, 1, 0]
    # d2 sends 0..2; d1 ready at 1, sends 2..5; d0 ready at 10, sends 10..16
    assert rec.t_end == pytest.approx(16.0)
    assert rec.t_end < 10.0 + 11.0  # overlap: shorter than max computation + sum of airtimes


def test_transmitter_waits_when_busy():
    # all ready at 1: strictly sequential after that
    records, _ = run_engine([1.0, 1.0], [1.0, 0.5])
    assert list(records[0].upload_order) == [1, 0]
    assert records[0].t_end == pytest.approx(0.5 + 6.0 + 6.0)


class CountingLearner(RecordingLearner):
    def train_round(self, selected, decision, round_idx):
        self.trained.append((round_idx, tuple(selected)))
        return {}


def test_stops_at_target_and_at_time_budget():
    learner = CountingLearner([0.1, 0.2, 0.8, 0.9, 0.95])
    stop = StopRule(rounds=100, target_accuracy=0.75, stop_at_target=True)
    records, eng = run_engine([1.0], [1.0], learner=learner, stop=stop)
    assert len(records) == 2 and stop.reached  # evals at rounds 0, 1, 2 -> 0.8 after round 2
    assert [r for r, _ in learner.trained] == [0, 1]

    records, _ = run_engine([1.0], [1.0], stop=StopRule(time_budget_s=20.0))  # rounds of 7 s
    assert len(records) == 3 and records[-1].t_end == pytest.approx(21.0)


def test_eval_on_a_simulated_time_grid():
    learner = CountingLearner([0.0] * 20)
    evals = []
    n = 1
    eng = make_engine(channel=FixedChannel([1.0]), link=Link(LinkConfig(bandwidth_hz=1.0, noise_power=1.0)),
                 compute=ConstantCompute(np.array([1.0])), scheduler=SelectAll(n), model_bits=6.0,
                 num_devices=n, streams={k: np.random.default_rng(0) for k in ("channel", "selection", "compute")},
                 learner=learner, stop=StopRule(rounds=6), evaluate=EvalRule(every_s=10.0),
                 on_eval=evals.append)
    eng.run()
    # rounds end at 7, 14, 21, 28, 35, 42: first boundary after 0, 10, 20, 30, 40
    assert [e["time_s"] for e in evals] == [0.0, 14.0, 21.0, 35.0, 42.0]


def test_eval_at_start_false_skips_only_the_evaluation_at_time_zero():
    from wirelessfl.config import from_dict
    from wirelessfl.experiments.run import simulate

    base = {"seed": 1, "run": {"rounds": 4, "eval_every_rounds": 2, "record_devices": False},
            "devices": {"count": 6}, "scheduler": {"m": 2},
            "learning": {"dataset": "synthetic", "model": "logreg", "samples_per_device": 20, "local_steps": 2}}
    with_start = simulate(from_dict(base), progress=False)
    without = simulate(from_dict(base, ["run.eval_at_start=false"]), progress=False)
    assert with_start.evals["round"].tolist() == [0, 2, 4]
    assert without.evals["round"].tolist() == [2, 4]
    # evaluating changes nothing else: the same rounds and the same later evaluations
    assert with_start.evals.iloc[1:].reset_index(drop=True).equals(without.evals)
    assert with_start.rounds.equals(without.rounds)
