"""A new user's first hour: nothing finished is overwritten unasked, a scenario's folder resumes as
a whole, failed variants do not stop the others, timing-only runs speak of timing, overrides that
would change nothing are refused, sweeps that fail say so."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path


import pandas as pd
import pytest

import fakes
from wirelessfl.config import ConfigError, load_scenario
from wirelessfl.experiments.run import OutputExists, run_variants

SCENARIO = textwrap.dedent('''
    name = "pair"
    seed = 3
    [run]
    rounds = 6
    eval_every_rounds = 3
    checkpoint_every = 2
    [channel]
    profile = "linear"
    [devices]
    count = 10
    [scheduler]
    m = 4
    [learning]
    model = "logreg"
    samples_per_device = 40
    local_steps = 2
    eval_train_samples = 200
    [variants.lyapunov]
    scheduler.name = "lyapunov"
    [variants.uniform]
    scheduler.name = "uniform"
''')


def cli(*args, cwd) -> subprocess.CompletedProcess:
    quiet = ["--no-progress"] if args[0] in ("run", "sweep") else []
    return fakes.cli(*args, *quiet, cwd=cwd)


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "pair.toml").write_text(SCENARIO)
    return tmp_path


@pytest.mark.slow  # end to end: five runs through the command line, three of them training
def test_a_folder_of_runs_is_reused_refused_or_overwritten_and_timing_only_runs_go_elsewhere(folder):
    first = cli("run", "pair.toml", cwd=folder)
    assert first.returncode == 0, first.stderr
    rounds = folder / "runs" / "pair" / "lyapunov" / "rounds.csv"
    stamp = rounds.stat().st_mtime_ns
    again = cli("run", "pair.toml", cwd=folder)  # the same scenario, complete: read back, not run again
    assert again.returncode == 0 and "complete already" in again.stdout and rounds.stat().st_mtime_ns == stamp
    other = cli("run", "pair.toml", "--set", "seed=4", "--out", "runs/pair", cwd=folder)
    assert other.returncode == 2 and rounds.stat().st_mtime_ns == stamp
    assert len(other.stderr.strip().splitlines()) == 1
    assert "another scenario" in other.stderr and "--out" in other.stderr and "--overwrite" in other.stderr
    timing = cli("run", "pair.toml", "--timing-only", cwd=folder)  # its own folder: the training runs stay
    assert timing.returncode == 0 and (folder / "runs" / "pair-timing" / "timing.png").exists()
    assert "airtime" in timing.stdout and "accuracy" not in timing.stdout and rounds.stat().st_mtime_ns == stamp
    forced = cli("run", "pair.toml", "--set", "seed=4", "--out", "runs/pair", "--overwrite", cwd=folder)
    assert forced.returncode == 0 and rounds.stat().st_mtime_ns != stamp
    assert 'seed = 4' in (folder / "runs" / "pair" / "lyapunov" / "scenario.toml").read_text()
    assert not (folder / "runs" / "pair" / "lyapunov" / "checkpoint.pt").exists()  # complete: nothing to resume


def test_resume_finishes_the_whole_folder(folder, monkeypatch):
    from wirelessfl.learning import learner as learner_module

    scenario = load_scenario(folder / "pair.toml")
    real = learner_module.FederatedLearner.train_round
    calls = {"n": 0}

    def crash(self, selected, decision, r):  # dies in the first variant's round 5 (checkpoint at 4)
        calls["n"] += 1
        if calls["n"] == 6:
            raise KeyboardInterrupt
        return real(self, selected, decision, r)

    monkeypatch.setattr(learner_module.FederatedLearner, "train_round", crash)
    with pytest.raises(KeyboardInterrupt):
        run_variants(scenario, folder / "out", progress=False)
    monkeypatch.undo()
    index = json.loads((folder / "out" / "index.json").read_text())
    assert index["status"] == {"lyapunov": "incomplete", "uniform": "pending"}  # interrupted, never started
    done = cli("run", "--resume", "out", cwd=folder)
    assert done.returncode == 0, done.stderr
    assert "lyapunov: continuing from its checkpoint" in done.stdout and "uniform: not started" in done.stdout
    assert json.loads((folder / "out" / "index.json").read_text())["status"] == {"lyapunov": "complete",
                                                                              "uniform": "complete"}
    assert (folder / "out" / "accuracy_vs_time.png").exists()
    run_variants(scenario, folder / "ref", progress=False)  # the same scenario, never interrupted
    for name in ("lyapunov", "uniform"):
        pd.testing.assert_frame_equal(pd.read_csv(folder / "out" / name / "rounds.csv"),
                                      pd.read_csv(folder / "ref" / name / "rounds.csv"))
    (folder / "out" / "uniform" / "summary.json").unlink()  # as if killed before its first checkpoint
    (folder / "out" / "uniform" / "checkpoint.pt").unlink(missing_ok=True)
    again = cli("run", "--resume", "out", cwd=folder)
    assert again.returncode == 0 and "uniform: no checkpoint, starting over" in again.stdout


def test_a_failed_variant_does_not_stop_the_others(folder):
    (folder / "pair.toml").write_text(SCENARIO + 'learning.lr = 1e6\nlearning.model = "mlp"\n')  # in uniform
    proc = cli("run", "pair.toml", cwd=folder)
    assert proc.returncode == 1
    assert "lyapunov: 6 rounds" in proc.stdout
    failed = [line for line in proc.stderr.splitlines() if line.startswith("wirelessfl:")]
    assert failed == [line for line in failed if "uniform did not complete: TrainingDiverged" in line] and failed
    assert json.loads((folder / "runs" / "pair" / "index.json").read_text())["status"] == {
        "lyapunov": "complete", "uniform": "failed"}


def test_an_override_that_every_variant_sets_again_is_refused(folder):
    with pytest.raises(ConfigError, match=r"^scheduler.name: every variant sets it \(lyapunov, uniform\)"):
        load_scenario(folder / "pair.toml", ["scheduler.name=uniform"])
    proc = cli("run", "pair.toml", "--set", "scheduler.name=uniform", cwd=folder)
    assert proc.returncode == 2 and "variants.lyapunov.scheduler.name" in proc.stderr
    assert load_scenario(folder / "pair.toml", ["variants.uniform.scheduler.m=2"]).variant_scenarios()[1][1] \
        .scheduler.options.m == 2


def test_plot_of_timing_only_runs_draws_the_schedule(folder):
    assert cli("run", "pair.toml", "--timing-only", cwd=folder).returncode == 0
    proc = cli("plot", "runs/pair-timing", "--out", "figs", cwd=folder)
    assert proc.returncode == 0 and (folder / "figs" / "timing.png").stat().st_size > 10000
    assert not (folder / "figs" / "accuracy_vs_time.png").exists()


def test_a_sweep_whose_runs_all_fail_says_so(folder):
    from wirelessfl.experiments.sweep import SweepFailed, sweep

    broken = load_scenario(folder / "pair.toml", ["learning.lr=1e6", 'learning.model="mlp"'])
    with pytest.raises(SweepFailed, match=r"all 4 runs failed, the first with TrainingDiverged"):
        sweep(broken, seeds=2, out_dir=folder / "sw", progress=False)
    proc = cli("sweep", "pair.toml", "--set", "learning.lr=1e6", "--set", 'learning.model="mlp"', "--out", "sw2",
               cwd=folder)
    assert proc.returncode == 1 and "all 2 runs failed" in proc.stderr


def test_strict_json_and_no_empty_folders(folder):
    assert cli("sweep", "pair.toml", "--timing-only", "--out", "sw", cwd=folder).returncode == 0
    assert not (folder / "sw" / "failed").exists()  # made only once a run fails

    def refuse(name):
        raise ValueError(name)

    for path in (folder / "sw").rglob("*.json"):
        json.loads(path.read_text(), parse_constant=refuse)


@pytest.mark.slow
def test_an_unreachable_dask_scheduler_is_one_line(folder):
    proc = cli("sweep", "pair.toml", "--timing-only", "--address", "tcp://127.0.0.1:9", "--out", "sw", cwd=folder)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith("wirelessfl: error: --address")
    assert "Traceback" not in proc.stderr


def test_output_exists_from_python(folder):
    scenario = load_scenario(folder / "pair.toml", ["run.timing_only=true"])
    run_variants(scenario, folder / "o", progress=False)
    with pytest.raises(OutputExists, match="holds the runs of another scenario"):
        run_variants(scenario.replace("seed=9"), folder / "o", progress=False)


def test_the_package_imports_from_the_folder_that_holds_a_clone_named_wirelessfl(tmp_path):
    """With the clone at ~/wirelessfl and a script run from ~, ``import wirelessfl`` must find the
    package, not the clone's folder as an empty namespace package (pyproject.toml's package-dir makes
    the editable install a path entry for this; a plain install works too)."""
    import wirelessfl

    root = Path(wirelessfl.__file__).resolve().parents[1]
    (tmp_path / "wirelessfl").symlink_to(root, target_is_directory=True)
    proc = subprocess.run([sys.executable, "-c", "import wirelessfl; print(wirelessfl.load_scenario.__name__)"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "load_scenario", proc.stderr


def test_timing_png_draws_the_power_budget_the_devices_are_held_to(tmp_path, monkeypatch):
    from wirelessfl.config import from_dict
    from wirelessfl.experiments import plots
    from wirelessfl.experiments.run import simulate

    sc = from_dict({"run": {"rounds": 30, "timing_only": True}, "devices": {"count": 8},
                    "link": {"model_bits": 100000, "p_bar": 0.5}, "scheduler": {"name": "lyapunov", "m": 3}})
    res = simulate(sc, tmp_path / "run", progress=False)
    assert res.summary["p_bar"] == 0.5
    seen = {}
    monkeypatch.setattr(plots, "_save", lambda fig, out_dir, name: seen.setdefault("fig", fig))
    plots.plot_timing({"run": res}, tmp_path)
    power_axis = seen["fig"].axes[3]
    budget = [ln for ln in power_axis.get_lines() if "budget" in ln.get_label()]
    assert len(budget) == 1 and set(budget[0].get_ydata()) == {0.5}


def test_plot_titles_its_figures_with_what_it_plotted(tmp_path, monkeypatch):
    from wirelessfl import cli as cli_module
    from wirelessfl.experiments import plots

    (tmp_path / "s.toml").write_text("[run]\nrounds = 3\neval_every_rounds = 1\n[devices]\ncount = 6\n"
                                     "[learning]\nmodel = \"logreg\"\nsamples_per_device = 20\nlocal_steps = 1\n"
                                     "eval_train_samples = 100\n")
    assert cli_module.main(["run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "cell"), "--no-progress"]) == 0
    titles = []
    real = plots.plt.Axes.set_title
    monkeypatch.setattr(plots.plt.Axes, "set_title", lambda self, label, *a, **k: (titles.append(label),
                                                                                    real(self, label, *a, **k))[1])
    assert cli_module.main(["plot", str(tmp_path / "cell"), "--x", "round", "--out", str(tmp_path / "figs")]) == 0
    assert "cell" in titles and (tmp_path / "figs" / "accuracy_vs_round.png").exists()
