"""Checkpoints and resume: a resumed run's records equal an uninterrupted run's; kills never leave a
run marked complete that is not; divergence stops a run with a clear error and keeps its records."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
import torch

from wirelessfl.config import from_dict
from wirelessfl.learning import learner as learner_module
from wirelessfl.experiments.run import TrainingDiverged, load_run, resume, simulate
from wirelessfl.sim.run.checkpoint import load_checkpoint


def scenario(**run):
    return from_dict({
        "seed": 5, "run": {"rounds": 9, "eval_every_rounds": 2, "checkpoint_every": 3, **run},
        "channel": {"profile": "linear"}, "devices": {"count": 12},
        "scheduler": {"name": "lyapunov", "m": 4},
        "learning": {"model": "logreg", "samples_per_device": 60, "local_steps": 2,
                     "eval_train_samples": 300, "lr": 0.05}})


def assert_same_records(a, b):
    pd.testing.assert_frame_equal(a.rounds.reset_index(drop=True), b.rounds.reset_index(drop=True))
    pd.testing.assert_frame_equal(a.evals.reset_index(drop=True), b.evals.reset_index(drop=True))
    pd.testing.assert_frame_equal(a.devices, b.devices)


def test_resume_after_a_crash_gives_the_uninterrupted_records(tmp_path, monkeypatch):
    full = simulate(scenario(), tmp_path / "full", progress=False)
    real = learner_module.FederatedLearner.train_round

    def crash_in_round_7(self, selected, decision, r):
        if r == 7:
            raise RuntimeError("power cut")
        return real(self, selected, decision, r)

    monkeypatch.setattr(learner_module.FederatedLearner, "train_round", crash_in_round_7)
    with pytest.raises(RuntimeError):
        simulate(scenario(), tmp_path / "cut", progress=False)
    assert load_checkpoint(tmp_path / "cut" / "checkpoint.pt")["engine"]["rounds_done"] == 6
    assert load_run(tmp_path / "cut").summary["status"] == "failed"
    monkeypatch.setattr(learner_module.FederatedLearner, "train_round", real)
    resumed = resume(tmp_path / "cut", progress=False)
    assert resumed.summary["status"] == "complete"
    assert_same_records(resumed, full)
    assert_same_records(load_run(tmp_path / "cut"), load_run(tmp_path / "full"))  # the files too


def test_timing_only_resume_keeps_queues_and_streams(interrupted_and_resumed):
    full, resumed = interrupted_and_resumed(scenario(timing_only=True, rounds=20, checkpoint_every=5))
    assert_same_records(resumed, full)


def test_checkpoints_load_in_weights_only_mode(tmp_path, monkeypatch):
    real = learner_module.FederatedLearner.train_round

    def stop_in_round_7(self, selected, decision, r):
        if r == 7:
            raise KeyboardInterrupt
        return real(self, selected, decision, r)

    monkeypatch.setattr(learner_module.FederatedLearner, "train_round", stop_in_round_7)
    with pytest.raises(KeyboardInterrupt):
        simulate(scenario(), tmp_path / "run", progress=False)
    # the interrupted run's last checkpoint is a plain weights-only file
    state = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)
    assert state["engine"]["rounds_done"] == 6 and state["learner"]["params"].dtype == torch.float32
    monkeypatch.undo()
    simulate(scenario(), tmp_path / "done", progress=False)
    assert not (tmp_path / "done" / "checkpoint.pt").exists()  # a complete run has nothing left to resume


def test_sigkill_never_leaves_a_run_marked_complete_and_resume_finishes_it(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(
        'seed = 2\n[run]\nrounds = 400\ntiming_only = true\ncheckpoint_every = 10\n'
        '[devices]\ncount = 30\n[link]\nmodel_bits = 1000000\n[scheduler]\nm = 5\n')
    proc = subprocess.Popen([sys.executable, "-m", "wirelessfl.cli", "run", str(path), "--out",
                             str(tmp_path / "fam"), "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_dir = tmp_path / "fam" / "s"
    deadline = time.time() + 60
    while time.time() < deadline and not (run_dir / "checkpoint.pt").exists():
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    summary = run_dir / "summary.json"
    assert not summary.exists() or json.loads(summary.read_text())["status"] != "complete"
    done = subprocess.run([sys.executable, "-m", "wirelessfl.cli", "run", "--resume", str(tmp_path / "fam"),
                           "--no-progress"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    reference = simulate(from_dict({"name": "s", "seed": 2, "run": {"rounds": 400, "timing_only": True},
                                    "devices": {"count": 30}, "link": {"model_bits": 1000000},
                                    "scheduler": {"m": 5}}), progress=False)
    resumed = load_run(run_dir)
    assert resumed.summary["status"] == "complete"
    pd.testing.assert_frame_equal(resumed.rounds[["round", "selected", "upload_order"]].astype(str),
                                  reference.rounds[["round", "selected", "upload_order"]].astype(str))
    assert resumed.rounds["t_end"].to_numpy() == pytest.approx(reference.rounds["t_end"].to_numpy(), rel=1e-12)


def test_divergence_stops_with_a_clear_error_and_keeps_records(tmp_path):
    with pytest.raises(TrainingDiverged, match="learning.lr"):
        simulate(scenario(rounds=30).replace("learning.lr=1e6", "learning.model=\"mlp\""), tmp_path / "run",
                 progress=False)
    run = load_run(tmp_path / "run")
    assert run.summary["status"] == "failed" and "diverged" in run.summary["error"]
    assert len(run.rounds) == run.summary["rounds"] >= 0


def interrupted_after_7_rounds(monkeypatch, sc, out) -> None:
    """Run ``sc`` into ``out`` with Ctrl-C as the 8th round is recorded."""
    from fakes import interrupted

    interrupted(sc, out, monkeypatch, after=7)


def test_a_checkpoint_of_another_scenario_is_refused_and_the_folder_left_as_it_was(tmp_path, monkeypatch):
    """Same N and shapes, another seed or V: the arrays fit, the scenario does not."""
    from wirelessfl.config import dumps
    from wirelessfl.sim.run.checkpoint import ResumeError

    timing = scenario(timing_only=True, rounds=20, checkpoint_every=2)
    interrupted_after_7_rounds(monkeypatch, timing, tmp_path / "a")
    interrupted_after_7_rounds(monkeypatch, timing.replace("scheduler.V=7"), tmp_path / "b")
    # b's checkpoint in a's folder; then a's own checkpoint with a's scenario.toml edited
    (tmp_path / "a" / "checkpoint.pt").write_bytes((tmp_path / "b" / "checkpoint.pt").read_bytes())
    files = {p.name: p.read_bytes() for p in (tmp_path / "a").iterdir() if p.is_file()}
    with pytest.raises(ResumeError, match="written for another scenario"):
        resume(tmp_path / "a", progress=False)
    assert {p.name: p.read_bytes() for p in (tmp_path / "a").iterdir() if p.is_file()} == files
    (tmp_path / "b" / "scenario.toml").write_text(dumps(timing.replace("seed=6", "scheduler.V=7")))
    with pytest.raises(ResumeError, match="written for another scenario"):
        resume(tmp_path / "b", progress=False)


def test_a_resumed_run_s_wall_time_counts_the_time_before_the_interruption(tmp_path, monkeypatch):
    from wirelessfl.sim.run.checkpoint import save_checkpoint

    interrupted_after_7_rounds(monkeypatch, scenario(timing_only=True, rounds=20, checkpoint_every=2),
                               tmp_path / "run")
    state = load_checkpoint(tmp_path / "run" / "checkpoint.pt")
    assert 0 < state["wall_time_s"] < 1000
    state["wall_time_s"] = 1000.0  # as if the first attempt had taken that long
    save_checkpoint(tmp_path / "run" / "checkpoint.pt", state)
    resumed = resume(tmp_path / "run", progress=False)
    assert resumed.summary["status"] == "complete"
    assert 1000.0 < resumed.summary["wall_time_s"] < 1000.0 + 60


def test_a_state_the_checkpoint_cannot_store_is_refused_at_the_first_checkpoint(tmp_path, monkeypatch):
    """Before, it was written at every checkpoint and refused only at resume: the run was lost."""
    from wirelessfl.scheduling.schedulers import LyapunovScheduler
    from wirelessfl.sim.run.checkpoint import CheckpointError, to_checkpoint

    class Memo:
        pass

    real = LyapunovScheduler.state_dict
    monkeypatch.setattr(LyapunovScheduler, "state_dict", lambda self: {**real(self), "history": [1.0, Memo()]})
    with pytest.raises(CheckpointError, match=r"scheduler's state\['history'\]\[1\] is a .*Memo: a checkpoint holds"):
        simulate(scenario(timing_only=True, rounds=10, checkpoint_every=2), tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "checkpoint.pt").exists()
    assert len(pd.read_csv(tmp_path / "run" / "rounds.csv")) == 2  # the rounds before it are kept
    with pytest.raises(CheckpointError, match=r"algorithm's state\['names'\] is a numpy array of <U1"):
        to_checkpoint({"algorithm": {"names": np.array(["a", "b"])}})
    back = to_checkpoint({"compute": {"x": np.arange(3), "t": (1, 2.5, None, "s"), 4: True}})
    assert back["compute"]["t"] == (1, 2.5, None, "s") and back["compute"][4] is True
