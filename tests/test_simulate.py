"""End to end: scenarios through simulate(), run directories, reproducibility, the CLI."""
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from wirelessfl import load_run, simulate
from wirelessfl.config import from_dict, to_dict
from wirelessfl import load_decisions

ROOT = Path(__file__).resolve().parents[1]


def timing_scenario(**over):
    data = {"seed": 3, "run": {"rounds": 30, "timing_only": True},
            "channel": {"profile": "linear"}, "devices": {"count": 20, "compute_s": 0.5},
            "link": {"model_bits": 32 * 555178}, "scheduler": {"name": "lyapunov", "m": 5}}
    for key, value in over.items():
        section, _, field = key.partition("__")
        data.setdefault(section, {})[field] = value
    return from_dict(data)


def learning_scenario(scheduler="lyapunov", **run):
    return from_dict({
        "seed": 1, "run": {"rounds": 4, "eval_every_rounds": 2, **run},
        "channel": {"profile": "linear"}, "devices": {"count": 20},
        "scheduler": {"name": scheduler, "m": 5},
        "learning": {"model": "logreg", "samples_per_device": 100, "local_steps": 2,
                     "eval_train_samples": 500, "lr": 0.05}})


def test_timing_only_records_are_consistent(tmp_path):
    res = simulate(timing_scenario(), tmp_path / "run", progress=False)
    r = res.rounds
    assert len(r) == 30 and res.summary["status"] == "complete"
    # equal computation: every round lasts computation + sum of airtimes, rounds are back to back
    assert np.allclose(r["t_end"] - r["t_start"], 0.5 + r["comm_s"])
    assert np.allclose(r["t_start"].iloc[1:].to_numpy(), r["t_end"].iloc[:-1].to_numpy())
    airtimes = r["airtime_s"].map(lambda s: sum(map(float, s.split())))
    assert np.allclose(airtimes, r["comm_s"], rtol=1e-5)
    assert ((r["num_selected"] >= 1) & (r["num_selected"] <= 5)).all()
    dec = load_decisions(tmp_path / "run")
    assert dec["omega"].shape == (30, 20)
    assert np.allclose(dec["omega"].sum(1), 1.0, atol=1e-5)
    assert ((dec["q"] > 0) & (dec["q"] <= 1)).all() and (dec["queue"] >= 0).all()
    assert math.isclose(res.summary["sim_time_s"], r["t_end"].iloc[-1])
    devices = pd.read_csv(tmp_path / "run" / "devices.csv")
    assert devices["selections"].sum() == r["num_selected"].sum()


def test_same_seed_same_records_other_seed_differs(tmp_path):
    a = simulate(timing_scenario(), progress=False).rounds
    b = simulate(timing_scenario(), progress=False).rounds
    c = simulate(timing_scenario().replace("seed=4"), progress=False).rounds
    pd.testing.assert_frame_equal(a, b)
    assert not a["selected"].equals(c["selected"])


def test_training_run_is_reproducible_and_written(tmp_path):
    s = learning_scenario()
    a = simulate(s, tmp_path / "a", progress=False)
    b = simulate(s, tmp_path / "b", progress=False)
    pd.testing.assert_frame_equal(a.evals, b.evals)
    assert list(a.evals["round"]) == [0, 2, 4]
    assert (a.evals["accuracy"].iloc[-1] > 0.3)  # logistic regression learns something in 4 rounds
    loaded = load_run(tmp_path / "a")
    assert loaded.summary["status"] == "complete"
    pd.testing.assert_frame_equal(loaded.evals[["round", "accuracy"]], a.evals[["round", "accuracy"]])
    c = simulate(s.replace("seed=2"), progress=False)
    assert not np.allclose(a.evals["accuracy"], c.evals["accuracy"])


def test_failed_run_keeps_records_and_says_so(tmp_path, monkeypatch):
    from wirelessfl.learning import learner as learner_module

    calls = {"n": 0}
    real = learner_module.FederatedLearner.train_round

    def flaky(self, selected, decision, r):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("boom")
        return real(self, selected, decision, r)

    monkeypatch.setattr(learner_module.FederatedLearner, "train_round", flaky)
    with pytest.raises(RuntimeError, match="boom"):
        simulate(learning_scenario(), tmp_path / "run", progress=False)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "failed" and "boom" in summary["error"]
    assert len(pd.read_csv(tmp_path / "run" / "rounds.csv")) == 2
    # the whole traceback, down to where it was raised, beside the one line
    assert summary["error_log"] == "error.log"
    log = (tmp_path / "run" / "error.log").read_text()
    assert log.startswith("Traceback") and "in flaky" in log and log.strip().endswith("RuntimeError: boom")


def test_cli_run_writes_runs_and_figures(tmp_path):
    scen = tmp_path / "s.toml"
    scen.write_text(
        'name = "cli"\n[run]\nrounds = 2\neval_every_rounds = 1\n[devices]\ncount = 10\n'
        '[learning]\nmodel = "logreg"\nsamples_per_device = 50\nlocal_steps = 1\neval_train_samples = 100\n'
        '[variants.ours]\nscheduler.name = "lyapunov"\n[variants.uniform]\nscheduler.name = "uniform"\n')
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "wirelessfl.cli", "run", str(scen), "--out", str(out),
                           "--no-progress", "--set", "scheduler.m=3"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "ours: 2 rounds" in proc.stdout and "uniform: 2 rounds" in proc.stdout
    assert (out / "accuracy_vs_time.png").stat().st_size > 1000
    for name in ("ours", "uniform"):
        assert json.loads((out / name / "summary.json").read_text())["m"] == 3
    proc = subprocess.run([sys.executable, "-m", "wirelessfl.cli", "plot", str(out), "--x", "round",
                           "--out", str(tmp_path / "figs")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "figs" / "accuracy_vs_round.png").exists()


def test_missing_dataset_is_a_one_line_error(tmp_path):
    scen = tmp_path / "s.toml"
    scen.write_text(f'[run]\nrounds = 1\n[learning]\ndataset = "cifar10"\ndata_dir = "{tmp_path}"\n')
    proc = subprocess.run([sys.executable, "-m", "wirelessfl.cli", "run", str(scen), "--no-progress"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(tmp_path) in lines[0] and "cifar" in lines[0].lower()


@pytest.mark.slow
def test_lyapunov_reaches_target_before_uniform():
    """Heterogeneous channels, m = 10, lambda = 100: the paper's headline result, on Fashion-MNIST."""
    base = {"seed": 0, "run": {"time_budget_s": 30.0, "eval_every_s": 1.0, "target_accuracy": 0.8},
            "channel": {"profile": "linear", "sigma_min": 0.1, "sigma_max": 10.0},
            "link": {"p_max": "35 dB"}, "devices": {"count": 100},
            "scheduler": {"m": 10, "V": 100.0, "lam": 100.0},
            "learning": {"model": "mlp", "alpha": math.inf, "lr": 0.05, "eval_train_samples": 1000}}
    times = {}
    for name in ("lyapunov", "uniform"):
        sc = from_dict(base, [f'scheduler.name="{name}"'])  # uniform keeps m and drops V and lambda
        times[name] = simulate(sc, progress=False).summary["time_to_target_s"]
    assert not math.isnan(times["lyapunov"])
    assert math.isnan(times["uniform"]) or times["lyapunov"] < times["uniform"]


def test_synthetic_benchmark_runs_end_to_end():
    s = from_dict({"seed": 0, "run": {"rounds": 6, "eval_every_rounds": 3},
                   "devices": {"count": 10}, "scheduler": {"name": "uniform", "m": 5},
                   "learning": {"dataset": "synthetic", "model": "logreg", "samples_per_device": 80,
                                "synthetic_alpha": 0.5, "synthetic_beta": 0.5, "lr": 0.05, "local_steps": 5}})
    res = simulate(s, progress=False)
    assert res.summary["model_bits"] == 32 * (60 * 10 + 10)  # logistic regression on 60 features
    acc = res.evals["accuracy"].to_numpy()
    assert acc[-1] > acc[0] and acc[-1] > 0.2


def test_progress_bar_renders_when_the_last_round_ends_past_the_time_budget():
    """With only a time budget the bar counts simulated seconds. The last round may end well past
    the budget; the bar stops at the total and still renders (past the total tqdm drops it from
    the format fields, which made the quickstart's uniform run fail)."""
    from types import SimpleNamespace

    from wirelessfl.sim.run.progress import ProgressBar

    scenario = SimpleNamespace(name="budget", run=SimpleNamespace(rounds=None, time_budget_s=10.0, timing_only=False))
    bar = ProgressBar(scenario, enabled=True)
    bar.round(SimpleNamespace(round=0, t_start=0.0, t_end=6.0))
    bar.round(SimpleNamespace(round=1, t_start=6.0, t_end=13.0))  # 3 s past the budget
    bar.bar.refresh()  # renders the format string
    assert bar.bar.n == pytest.approx(10.0)
    bar.close()


def test_progress_bar_shows_the_round_just_ended_and_an_evaluation_at_once(capsys):
    """The postfix was set after the bar drew, so the bar showed the round before, and an
    evaluation's accuracy only after the next round."""
    from types import SimpleNamespace

    from wirelessfl.sim.run.progress import ProgressBar

    scenario = SimpleNamespace(name="shown", run=SimpleNamespace(rounds=50, time_budget_s=None, timing_only=False))
    bar = ProgressBar(scenario, enabled=True)
    bar.bar.mininterval = 0.0  # draw at every update
    for r in range(3):
        bar.round(SimpleNamespace(round=r, t_start=float(r), t_end=r + 1.0))
    last = capsys.readouterr().err.split("\r")[-1]
    assert "round=3" in last and "t=3.0s" in last and "acc=" not in last  # no evaluation yet: none shown, not nan
    bar.accuracy(0.625)
    last = capsys.readouterr().err.split("\r")[-1]
    assert "round=3" in last and "acc=0.625" in last
    bar.close()


def test_summary_is_strict_json_and_reads_back_with_its_missing_numbers(tmp_path):
    """Missing numbers are null (with what they were in "non_finite"), so strict parsers read the file."""
    from wirelessfl.experiments.run import load_run

    res = simulate(from_dict({"run": {"rounds": 3, "timing_only": True, "target_accuracy": 0.9},
                              "devices": {"count": 4}, "link": {"model_bits": 1000}}), tmp_path / "r", progress=False)
    text = (tmp_path / "r" / "summary.json").read_text()

    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")

    strict = json.loads(text, parse_constant=refuse)
    assert strict["time_to_target_s"] is None and strict["non_finite"]["time_to_target_s"] == "nan"
    assert math.isnan(res.summary["time_to_target_s"]) and math.isnan(load_run(tmp_path / "r").summary["time_to_target_s"])
    assert "non_finite" not in load_run(tmp_path / "r").summary


@pytest.mark.parametrize("stop", [{"rounds": 3, "eval_every_rounds": 10}, {"time_budget_s": 5.0, "eval_every_s": 100.0}],
                         ids=["rounds", "time_budget"])
def test_the_final_model_is_evaluated_whichever_rule_stops_the_run(tmp_path, stop):
    """The summary's accuracy is the final model's, not that of the last scheduled evaluation."""
    sc = learning_scenario()
    run = {k: v for k, v in to_dict(sc)["run"].items() if k not in ("rounds", "eval_every_rounds")}
    sc = from_dict({**to_dict(sc), "run": {**run, **stop}})
    res = simulate(sc, tmp_path / "run", progress=False)
    rounds = len(res.rounds)
    assert res.evals["round"].tolist() == [0, rounds]  # at the start and at the end, once
    assert res.evals["time_s"].iloc[-1] == pytest.approx(res.rounds["t_end"].iloc[-1])
    assert res.summary["final_accuracy"] == res.evals["accuracy"].iloc[-1]
    assert res.summary["final_accuracy"] > res.evals["accuracy"].iloc[0] + 0.1  # trained, not the initial model


def test_one_writer_per_run_folder(tmp_path):
    """A run, resume or overwrite of a folder another process is writing to is refused in one line,
    and the writer's files are untouched; once it has ended the folder is free again."""
    from wirelessfl import resume
    from wirelessfl.files import FolderBusy

    sc = timing_scenario(run__rounds=5)
    out = tmp_path / "run"
    simulate(sc, out, progress=False)
    before = (out / "rounds.csv").read_text()
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; fh = open(sys.argv[1], 'w'); "
                               "fcntl.flock(fh, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
                               str(out / ".lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        for attempt in (lambda: simulate(sc, out, progress=False, overwrite=True),
                        lambda: simulate(sc.replace("seed=9"), out, progress=False, overwrite=True),
                        lambda: resume(out, progress=False)):
            with pytest.raises(FolderBusy, match=f"{out}: another run is writing to this folder"):
                attempt()
        cli = subprocess.run([sys.executable, "-m", "wirelessfl.cli", "run", "--resume", str(out), "--no-progress"],
                             capture_output=True, text=True)
        assert cli.returncode == 2 and cli.stderr.strip().count("\n") == 0
        assert "another run is writing to this folder" in cli.stderr
        assert (out / "rounds.csv").read_text() == before
    finally:
        holder.kill()
        holder.wait()
    again = simulate(sc, out, progress=False, overwrite=True)  # the lock died with its holder
    assert again.summary["status"] == "complete" and (out / "rounds.csv").read_text() == before
