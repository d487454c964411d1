"""Hardening, fourth round (issue 46, items 4-6): inputs that would make a run crawl or hang are one-line
errors naming the fields and the limit; a run in which no device can ever be dispatched stops; a
plug-in's output is checked where it enters the simulator; and what a plug-in author and a new user
met (overrides that did not reach the variants, carried uploads counted as dropped, ...)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fakes
from wirelessfl import load_scenario, simulate
from wirelessfl.config import ConfigError, from_dict

ROOT = Path(__file__).resolve().parents[1]


def cli(*args, cwd, env=None) -> subprocess.CompletedProcess:
    if env is None:  # in this process (tests/fakes.py)
        return fakes.cli(*args, cwd=cwd)
    return subprocess.run([sys.executable, "-m", "wirelessfl.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env=env)


def one_line_error(proc: subprocess.CompletedProcess, words: str, code: int = 2) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert words in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------------------------
# run --set reaches every variant; --variant


def test_an_override_reaches_every_variant_that_sets_the_field_itself():
    scenario = load_scenario(ROOT / "scenarios" / "async.toml", ["protocol.concurrency=12", "protocol.first_k=3"])
    members = dict(scenario.variant_scenarios())
    assert members["fedbuff"].protocol.options.concurrency == 12
    assert members["fedasync"].protocol.options.concurrency == 12
    assert members["semi_sync"].protocol.options.first_k == 3
    assert members["fedbuff"].protocol.options.buffer == 10  # what the override does not name stays
    # a variant that writes the other form of the same option, protocol.options.concurrency
    family = {"run": {"rounds": 2, "timing_only": True}, "protocol": {"name": "fedbuff", "buffer": 2},
              "variants": {"a": {"protocol": {"options": {"concurrency": 20}}}, "b": {"protocol": {"buffer": 3}}}}
    members = dict(from_dict(family, ["protocol.concurrency=7"]).variant_scenarios())
    assert members["a"].protocol.options.concurrency == members["b"].protocol.options.concurrency == 7


@pytest.mark.parametrize("override, words", [
    ("protocol.alpha=2", "variants.fedasync: protocol.alpha = 2.0: must be <= 1"),
    ("protocol.buffer=-3", "variants.fedbuff: protocol.buffer = -3: must be >= 1"),
    ("protocol.concurrency=0", "variants.fedbuff: protocol.concurrency = 0: must be >= 1"),
])
def test_an_invalid_override_of_a_variant_s_field_is_refused(override, words):
    with pytest.raises(ConfigError) as err:
        load_scenario(ROOT / "scenarios" / "async.toml", [override])
    assert str(err.value).startswith(words) and "\n" not in str(err.value)


def test_the_recorded_family_says_which_options_are_held_for_the_variants(tmp_path):
    import tomllib

    from wirelessfl.config import dumps

    scenario = load_scenario(ROOT / "scenarios" / "async.toml", ["protocol.concurrency=15"])
    text = dumps(scenario)
    data = tomllib.loads(text)
    assert data["variants"]["fedbuff"]["protocol.concurrency"] == 15  # what each variant ran with
    assert data["variants"]["fedasync"]["protocol.concurrency"] == 15
    protocol = text[text.index("[protocol]"):]
    assert protocol.index("# options of the parts that variants") < protocol.index("concurrency = 15")
    assert from_dict(data) == scenario


def test_run_variant_runs_only_the_named_variants_and_resume_finishes_the_others(tmp_path):
    (tmp_path / "s.toml").write_text(textwrap.dedent("""
        [run]
        rounds = 3
        timing_only = true
        [devices]
        count = 4
        [link]
        model_bits = 1000
        [variants.a]
        scheduler.m = 2
        [variants.b]
        scheduler.m = 3
    """))
    proc = cli("run", "s.toml", "--variant", "b", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    folder = tmp_path / "runs" / "s-timing"
    assert (folder / "b" / "summary.json").exists() and not (folder / "a").exists()
    assert json.loads((folder / "index.json").read_text())["status"] == {"a": "pending", "b": "complete"}
    one_line_error(cli("run", "s.toml", "--variant", "c", cwd=tmp_path), "--variant c: scenario 's' has the variants a, b")
    proc = cli("run", "--resume", folder, "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0 and "a: not started, running it" in proc.stdout
    assert json.loads((folder / "index.json").read_text())["status"] == {"a": "complete", "b": "complete"}


def test_a_second_run_into_a_folder_in_use_hears_of_the_lock_not_of_resume(tmp_path):
    (tmp_path / "s.toml").write_text("[run]\nrounds = 3\ntiming_only = true\ncheckpoint_every = 1\n"
                                     "[devices]\ncount = 4\n[link]\nmodel_bits = 1000\n")
    run_dir = tmp_path / "runs" / "s-timing" / "s"
    assert cli("run", "s.toml", "--no-progress", cwd=tmp_path).returncode == 0
    summary = run_dir / "summary.json"
    summary.write_text(summary.read_text().replace('"complete"', '"interrupted"'))  # as while it runs
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; fh = open(sys.argv[1], 'w'); "
                               "fcntl.flock(fh, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
                               str(run_dir / ".lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        proc = cli("run", "s.toml", "--no-progress", cwd=tmp_path)
        one_line_error(proc, "another run is writing to this folder")
        assert "--resume" not in proc.stderr
        proc = cli("run", "--resume", tmp_path / "runs" / "s-timing", "--no-progress", cwd=tmp_path)
        one_line_error(proc, "another run is writing to this folder")
    finally:
        holder.kill()
        holder.wait()
    proc = cli("run", "s.toml", "--no-progress", cwd=tmp_path)
    one_line_error(proc, "--resume")  # free again: an interrupted run, to resume


# ---------------------------------------------------------------------------------------------
# uploads by outcome; semi_sync's carried uploads are not dropped

_TIMING = {"run": {"time_budget_s": 20.0, "timing_only": True}, "devices": {"count": 12, "compute": "shifted_exponential",
           "delay_shift_s": 0.2, "delay_mean_s": 1.0}, "link": {"model_bits": 200000, "bandwidth_hz": 1e6},
           "scheduler": {"name": "uniform", "m": 6}}


def _with(**tables) -> dict:
    data = json.loads(json.dumps(_TIMING))
    for table, values in tables.items():
        data.setdefault(table, {}).update(values)
    return data


@pytest.mark.parametrize("case", [
    _with(protocol={"name": "semi_sync", "first_k": 2}),
    _with(protocol={"name": "semi_sync", "first_k": 2, "late": "drop"}),
    _with(link={"errors": "outage", "rate_bps": 4e6, "packet_bits": 50000, "max_attempts": 2}),
    _with(run={"time_budget_s": 20.0, "timing_only": True, "round_deadline_s": 1.0}),
    _with(link={"access": "aircomp", "model_bits": 200000, "truncation_gain": 0.8}),
    _with(protocol={"name": "fedbuff", "concurrency": 6, "buffer": 2},
          devices={"p_on_to_off": 0.3, "p_off_to_on": 0.5}),
], ids=["semi_sync_carry", "semi_sync_drop", "sync_arq", "sync_deadline", "aircomp", "fedbuff_offline"])
def test_every_upload_is_counted_by_its_outcome_and_carried_ones_are_not_dropped(tmp_path, case):
    res = simulate(from_dict(case), tmp_path / "run", progress=False)
    updates = pd.read_csv(tmp_path / "run" / "updates.csv")
    counted = {k: v for k, v in res.summary["outcomes"].items() if v}
    assert counted == updates["outcome"].value_counts().to_dict()
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["outcomes"] == res.summary["outcomes"]
    rounds = pd.read_csv(tmp_path / "run" / "rounds.csv", dtype={"dropped": str}, keep_default_na=False)
    listed = sum(len(cell.split()) for cell in rounds["dropped"])
    assert res.summary["dropped_uploads"] == listed
    gone = int(((updates["outcome"] != "applied") & (updates["outcome"] != "in_flight")).sum())
    if case.get("protocol", {}).get("name", "sync") in ("sync", "semi_sync"):
        assert listed <= gone  # a device listed as dropped is one whose update is gone, never a carried one
    if case.get("protocol", {}).get("late") is None and case.get("protocol", {}).get("name") == "semi_sync":
        assert listed == 0 and res.summary["carried_uploads"] > 0
        assert res.summary["carried_uploads"] == int((rounds["num_selected"] - rounds["num_arrived"]).sum())
    else:
        assert res.summary["carried_uploads"] == 0
    assert len(counted) > 1  # each case has an outcome other than applied


def test_the_summary_line_counts_the_uploads_by_outcome():
    from wirelessfl.cli import _fmt_summary

    summary = {"status": "complete", "rounds": 8, "sim_time_s": 20.0, "final_accuracy": 0.5,
               "mean_distinct_per_round": 9.75, "wall_time_s": 1.0, "carried_uploads": 38,
               "outcomes": {"applied": 68, "lost": 2, "silent": 0, "in_flight": 20}}
    line = _fmt_summary("semi_sync", summary)
    assert "uploads 90 (68 applied, 2 lost, 20 in flight; 38 carried to a later aggregation)" in line
    summary.update(outcomes={"applied": 68}, carried_uploads=0)
    assert "uploads" not in _fmt_summary("sync", summary)


@pytest.mark.parametrize("protocol", [{"name": "semi_sync", "first_k": 2}, {"name": "sync"}])
def test_a_resumed_run_counts_the_outcomes_an_uninterrupted_one_counts(interrupted_and_resumed, protocol):
    case = _with(protocol=protocol, link={"errors": "outage", "rate_bps": 4e6, "packet_bits": 50000,
                                          "max_attempts": 2} if protocol["name"] == "sync" else {},
                 run={"rounds": 12, "timing_only": True, "checkpoint_every": 3})
    case["run"].pop("time_budget_s")
    full, resumed = interrupted_and_resumed(from_dict(case), after=7)
    for key in ("outcomes", "dropped_uploads", "carried_uploads"):
        assert resumed.summary[key] == full.summary[key], key


# ---------------------------------------------------------------------------------------------
# bounds on options whose product would make the clock crawl

_SMALL = {"run": {"rounds": 3, "timing_only": True}, "devices": {"count": 4}, "link": {"model_bits": 10000}}
_FEDBUFF = {"name": "fedbuff", "concurrency": 2, "buffer": 1}


@pytest.mark.parametrize("setting, words", [
    ({"link": {"model_bits": 10 ** 12, "packet_bits": 1}},
     "link.packet_bits = 1, link.max_attempts = 1: an upload of 1e+12 bits (link.model_bits) would be "
     "1,000,000,000,000 packet(s)"),
    ({"link": {"rate_bps": 1e300, "errors": "outage", "max_attempts": 1000000}},
     "link.rate_bps = 1e+300: a packet of 10000 bits would be on the air for 1e-296 s"),
    ({"link": {"packet_bits": 100, "max_attempts": 100000}}, "link.packet_bits = 100, link.max_attempts = 100000: an "
     "upload of 10000 bits (link.model_bits) would be 100 packet(s) x 100,000 transmission(s) each = 1e+07; at most "
     "1,000,000 transmissions an upload"),
    ({"channel": {"coherence_s": 1e-308}}, "channel.coherence_s = 1e-308: an upload's channel would change every"),
    ({"devices": {"speed_mps": 1e308}}, "devices.speed_mps = 1e+308 and link.carrier_hz = 2e+09: an upload's channel"),
    ({"devices": {"speed_mps": 1.0}, "link": {"carrier_hz": 1e308}},
     "devices.speed_mps = 1 and link.carrier_hz = 1e+308: an upload's channel"),
    ({"devices": {"speed_mps": 1e300, "mobility": "random_waypoint"}, "channel": {"path_loss": True, "coherence_s": 1.0}},
     "devices.speed_mps = 1e+300: 4 devices at that speed in a cell of channel.cell_radius_m = 100 would begin"),
    ({"link": {"access": "aloha", "slot_s": 1e-308}}, "link.slot_s = 1e-308: 1e+308 slots a simulated second under "
                                                      "link.access = 'aloha'; at most 10,000,000"),
    ({"link": {"access": "tdma_slotted", "slot_s": 1e-308}}, "link.slot_s = 1e-308: 1e+308 slots"),
    ({"devices": {"p_on_to_off": 0.5, "availability_period_s": 1e-308}, "protocol": _FEDBUFF},
     "devices.availability_period_s = 1e-308: the availability chain would step 1e+308 times a simulated second"),
    ({"devices": {"p_on_to_off": 1.0, "p_off_to_on": 1e-9}, "protocol": _FEDBUFF},
     "devices.p_off_to_on = 1e-09: with devices.p_on_to_off = 1 and 4 devices, a step in which any device is "
     "available comes once in 2.5e+08 availability steps"),
    ({"learning": {"local_steps": 10 ** 12}}, "learning.local_steps = 1000000000000: must be <= 1000000"),
])
def test_options_whose_product_would_make_the_clock_crawl_are_one_line_errors(setting, words):
    data = json.loads(json.dumps(_SMALL))
    for table, values in setting.items():
        data.setdefault(table, {}).update(values)
    with pytest.raises(ConfigError) as err:
        from_dict(data)
    assert str(err.value).startswith(words) and "\n" not in str(err.value), str(err.value)


def test_the_bounds_leave_ordinary_values_alone():
    ordinary = [{"link": {"packet_bits": 12000, "max_attempts": 4, "errors": "waterfall"}},
                {"link": {"rate_bps": 1e7, "errors": "outage", "packet_bits": 12000, "max_attempts": 8}},
                {"devices": {"speed_mps": 30.0}, "link": {"carrier_hz": 6e9}},
                {"link": {"access": "aloha", "slot_s": 9e-6}},
                {"devices": {"p_on_to_off": 0.5, "p_off_to_on": 0.01, "availability_period_s": 1e-3},
                 "protocol": _FEDBUFF},
                {"devices": {"p_on_to_off": 1.0, "p_off_to_on": 1e-9}, "protocol": _FEDBUFF,
                 "run": {"time_budget_s": 5.0, "rounds": None}}]  # a time budget ends it
    for setting in ordinary:
        data = json.loads(json.dumps(_SMALL))
        for table, values in setting.items():
            data.setdefault(table, {}).update(values)
        data["run"] = {k: v for k, v in data["run"].items() if v is not None}
        from_dict(data)


def test_the_measured_upload_size_is_bounded_where_it_is_known(tmp_path):
    """Without link.model_bits the upload is 32 x the model's parameters, known when the run is built."""
    sc = from_dict({"run": {"rounds": 2, "timing_only": True}, "devices": {"count": 4}, "link": {"packet_bits": 1},
                    "learning": {"model": "mlp"}})
    with pytest.raises(ConfigError, match=r"^link.packet_bits = 1, link.max_attempts = 1: an upload of 6.37472e\+06 "
                                          r"bits \(32 x the model's parameters\)"):
        simulate(sc, progress=False)


def test_a_run_whose_devices_are_never_available_stops_as_stalled(monkeypatch):
    """Only run.rounds: aggregations that never come would keep the clock stepping availability forever."""
    from wirelessfl.config import limits
    from wirelessfl.sim.round.parts import NonFiniteTime  # noqa: F401  (the engines' errors module loads)
    from wirelessfl.sim.events.engine import EventStall

    import dataclasses

    monkeypatch.setattr(limits, "MAX_IDLE_STEPS", 200)
    sc = from_dict({"run": {"rounds": 3, "timing_only": True}, "devices": {"count": 4, "p_on_to_off": 1.0,
                    "p_off_to_on": 0.5}, "link": {"model_bits": 1000}, "protocol": _FEDBUFF,
                    "scheduler": {"name": "uniform", "m": 2}})
    # past the check at load, which refuses such a chain outright: what a trace or a plug-in could do
    sc = dataclasses.replace(sc, devices=dataclasses.replace(sc.devices, p_off_to_on=1e-12))
    with pytest.raises(EventStall, match=r"^devices: no device was in flight for 200 availability steps in a row"):
        simulate(sc, progress=False)


# ---------------------------------------------------------------------------------------------
# plug-in outputs checked where they enter

PARTS = textwrap.dedent('''
    import numpy as np
    import torch
    from torch import nn

    from wirelessfl.learning import Dataset, DatasetLoader, Partitioner

    def arrays(nan=False, n=80, features=6):
        rng = np.random.default_rng(0)
        x = rng.normal(size=(n, features)).astype(np.float32)
        y = rng.integers(0, 3, size=n)
        if nan:
            x[5, 2] = np.nan
        return x, y

    class Tiny(DatasetLoader):
        def __init__(self, options=None):
            pass

        @classmethod
        def from_scenario(cls, scenario, options):
            return cls()

        @classmethod
        def shape(cls, scenario, options):
            return (6,), 3

        def load(self):
            x, y = arrays()
            return Dataset.from_arrays("tiny", x[:60], y[:60], x[60:], y[60:], 3)

    class WithNaN(Tiny):
        def load(self):
            x, y = arrays(nan=True)
            return Dataset.from_arrays("nan", x[:60], y[:60], x[60:], y[60:], 3)

    class Misdeclared(Tiny):
        @classmethod
        def shape(cls, scenario, options):
            return (7,), 3

    class NoParameters(nn.Module):
        def __init__(self, input_shape, num_classes):
            super().__init__()
            self.layers = [nn.Linear(input_shape[0], num_classes)]  # a plain list: not registered

        def forward(self, x):
            return self.layers[0](x)

    class ThreeLogits(nn.Module):
        def __init__(self, input_shape, num_classes):
            super().__init__()
            self.fc = nn.Linear(input_shape[0], 2)

        def forward(self, x):
            return self.fc(x)

    class Miscounted(nn.Module):
        def __init__(self, input_shape, num_classes):
            super().__init__()
            self.fc = nn.Linear(input_shape[0], num_classes)

        @staticmethod
        def parameter_count(input_shape, num_classes):
            return 1000

        def forward(self, x):
            return self.fc(x)

    class GivesNone(Partitioner):
        def __init__(self, options=None):
            pass

        @classmethod
        def from_scenario(cls, scenario, options):
            return cls()

        def split(self, labels, num_devices, rng, num_classes=None):
            return None

    class GivesRagged(GivesNone):
        def split(self, labels, num_devices, rng, num_classes=None):
            return [np.zeros((2, 2), dtype=int)] * num_devices

    class Exits(nn.Module):
        def __init__(self, input_shape, num_classes):
            raise SystemExit(3)
''')


@pytest.fixture
def parts_folder(tmp_path):
    (tmp_path / "my_parts.py").write_text(PARTS)
    return tmp_path


def _training(folder: Path, **learning) -> dict:
    table = {"dataset": "my_parts:Tiny", "model": "logreg", "partition": "iid", "samples_per_device": 10,
             "local_steps": 2, "batch_size": 4, "eval_train_samples": 20, **learning}
    return {"plugin_path": [str(folder)], "run": {"rounds": 2}, "devices": {"count": 4},
            "scheduler": {"name": "uniform", "m": 2}, "learning": table}


@pytest.mark.parametrize("learning, error, words", [
    ({"model": "my_parts:NoParameters"}, ConfigError,
     "learning.model = 'my_parts:NoParameters': the module it built has no parameters to train"),
    ({"model": "my_parts:ThreeLogits"}, ConfigError,
     "learning.model = 'my_parts:ThreeLogits': a batch of 2 inputs gave output (2, 2); it must give logits of "
     "shape (batch, num_classes) = (2, 3)"),
    ({"model": "my_parts:Miscounted"}, ConfigError,
     "learning.model = 'my_parts:Miscounted': parameter_count() says 1,000 parameters and the module it builds has 21"),
    ({"partition": "my_parts:GivesNone"}, "DatasetError",
     "learning.partition = 'my_parts:GivesNone': returned None; it must return one list of sample indices per device"),
    ({"partition": "my_parts:GivesRagged"}, "DatasetError",
     "learning.partition = 'my_parts:GivesRagged': device 0's indices have shape (2, 2): one flat list each"),
    ({"dataset": "my_parts:WithNaN"}, "DatasetError",
     "learning.dataset = 'my_parts:WithNaN': train sample 5 has a feature that is not finite"),
    ({"dataset": "my_parts:Misdeclared"}, "DatasetError",
     "learning.dataset = 'my_parts:Misdeclared': shape() declares inputs (7,) and 3 classes, and load() gave inputs "
     "(6,) and 3 classes"),
])
def test_a_plug_in_s_output_is_checked_where_it_enters(parts_folder, learning, error, words):
    from wirelessfl.learning import DatasetError

    expected = DatasetError if error == "DatasetError" else error
    with pytest.raises(expected) as err:
        simulate(from_dict(_training(parts_folder, **learning)), progress=False)
    assert str(err.value).startswith(words) and "\n" not in str(err.value), str(err.value)


def test_a_timing_only_run_holds_a_plug_in_s_parameter_count_to_its_module(parts_folder):
    """A timing-only run sizes its uploads by the declared count: a wrong one is refused as in training."""
    data = _training(parts_folder, model="my_parts:Miscounted")
    data["run"]["timing_only"] = True
    with pytest.raises(ConfigError) as err:
        simulate(from_dict(data), progress=False)
    assert str(err.value) == ("learning.model = 'my_parts:Miscounted': parameter_count() says 1,000 parameters and "
                              "the module it builds has 21; they must agree (a timing-only run sizes its upload by "
                              "the count)")
    data["learning"]["model"] = "logreg"  # a built-in counts the layers it builds: nothing to hold
    assert simulate(from_dict(data), progress=False).summary["status"] == "complete"


def test_the_plug_in_checks_pass_a_sound_plug_in(parts_folder):
    res = simulate(from_dict(_training(parts_folder)), progress=False)
    assert res.summary["status"] == "complete" and np.isfinite(res.summary["final_accuracy"])


def test_system_exit_in_a_plug_in_is_reported_in_one_line(parts_folder):
    (parts_folder / "s.toml").write_text(
        '[run]\nrounds = 2\n[devices]\ncount = 4\n[scheduler]\nname = "uniform"\nm = 2\n'
        '[learning]\ndataset = "my_parts:Tiny"\nmodel = "my_parts:Exits"\npartition = "iid"\nsamples_per_device = 10\n')
    proc = cli("run", "s.toml", "--no-progress", cwd=parts_folder)
    assert proc.returncode != 0
    error_lines = [line for line in proc.stderr.splitlines() if line.startswith("wirelessfl")]
    assert len(error_lines) == 1 and proc.returncode == 1, proc.stderr
    assert "PartError: module my_parts (my_parts.py:" in error_lines[0] and "called sys.exit(3)" in error_lines[0]


DIVERGING = textwrap.dedent('''
    import math

    import torch

    from wirelessfl.learning import FedAvg

    class BadState(FedAvg):
        """Keeps a per-device state that turns NaN, and a model that follows it."""

        def round(self, trainer, selected, q, num_devices, round_idx):
            state = trainer.device_state("memory", 1)
            state[[1]] = torch.full((1, 1), math.nan)
            out = super().round(trainer, selected, q, num_devices, round_idx)
            trainer.params = trainer.params + state[[1]].sum()
            return out

    class BadAggregate(FedAvg):
        """Finite local updates, then an aggregation that overflows."""

        def round(self, trainer, selected, q, num_devices, round_idx):
            out = super().round(trainer, selected, q, num_devices, round_idx)
            trainer.params = trainer.params * 1e308 * 1e308
            return out
''')


@pytest.mark.parametrize("learning, words", [
    ({"lr": 1e6, "model": "mlp"}, "the local update of device 0 (round 0) was the first value that was not finite"),
    ({"algorithm": "diverging:BadState"}, "device 1's state 'memory' is not finite"),
    ({"algorithm": "diverging:BadAggregate"}, "the local updates were finite and the aggregation of "
                                              "learning.algorithm = 'diverging:BadAggregate' made the model non-finite"),
])
def test_a_divergence_says_where_the_first_value_that_was_not_finite_appeared(parts_folder, learning, words):
    from wirelessfl import TrainingDiverged

    (parts_folder / "diverging.py").write_text(DIVERGING)
    data = _training(parts_folder, **learning)
    data["learning"]["local_steps"] = 20
    with pytest.raises(TrainingDiverged) as err:
        simulate(from_dict(data), progress=False)
    text = str(err.value)
    assert "training diverged in round" in text and words in text and "\n" not in text, text
    if "lr" not in learning:
        assert "learning.lr" not in text  # not blamed for what it did not cause
    else:
        assert "try a smaller learning.lr (now 1e+06)" in text


def test_a_checkpoint_whose_model_is_not_finite_is_refused_in_one_line(parts_folder, monkeypatch):
    import torch

    from fakes import interrupted
    from wirelessfl import resume
    from wirelessfl.sim.run.checkpoint import ResumeError, load_checkpoint, save_checkpoint

    data = _training(parts_folder)
    data["run"] = {"rounds": 6, "checkpoint_every": 2}
    interrupted(from_dict(data), parts_folder / "cut", monkeypatch, after=3)
    path = parts_folder / "cut" / "checkpoint.pt"
    state = load_checkpoint(path)
    state["learner"]["params"] = torch.full_like(state["learner"]["params"], float("nan"))
    save_checkpoint(path, state)  # written whole, as by a run: only its model is not finite
    before = (parts_folder / "cut" / "rounds.csv").read_bytes()
    with pytest.raises(ResumeError, match=r"checkpoint.pt: the model in it is not finite") as err:
        resume(parts_folder / "cut", progress=False)
    assert "\n" not in str(err.value) and "learning.lr" not in str(err.value)
    assert (parts_folder / "cut" / "rounds.csv").read_bytes() == before


@pytest.mark.parametrize("options, words", [
    ({"V": 1e308}, "scheduler.V = 1e+308: must be <= 1e+100"),
    ({"lam": 1e308}, "scheduler.V = 100, scheduler.lam = 1e+308: their product (inf)"),
    ({"age_weight": 1e308}, "scheduler.V = 100, scheduler.age_weight = 1e+308: their product (inf)"),
    ({"V": 1e99, "lam": 100.0}, "scheduler.V = 1e+99, scheduler.lam = 100: their product (1e+101)"),
])
@pytest.mark.parametrize("protocol", [{"name": "sync"}, _FEDBUFF])
def test_lyapunov_weights_whose_costs_overflow_are_refused_instead_of_scheduling_nobody(options, words, protocol):
    data = {**json.loads(json.dumps(_SMALL)), "scheduler": {"name": "lyapunov", "m": 2, **options},
            "protocol": protocol}
    with pytest.raises(ConfigError) as err:
        from_dict(data)
    assert str(err.value).startswith(words) and "\n" not in str(err.value)
    data["scheduler"] = {"name": "lyapunov", "m": 2, "V": 1e100, "lam": 1.0, "age_weight": 1.0}  # at the bound: runs
    assert simulate(from_dict(data), progress=False).summary["uploads"] > 0


def test_the_price_of_airtime_that_overflows_is_an_error_not_an_empty_schedule():
    from types import SimpleNamespace

    from wirelessfl.scheduling.pricing import priced_power_and_airtime

    state = SimpleNamespace(access=None, bandwidth_hz=1e-300, noise_power=1.0, model_bits=1e10)
    with pytest.raises(ConfigError, match=r"^scheduler.V = 1e\+50, scheduler.lam = 1e\+50: the price of airtime"):
        priced_power_and_airtime(state, np.ones(3), np.zeros(3), np.full(3, 10.0), V=1e50, lam=1e50, k=1, rule="exact")


# ---------------------------------------------------------------------------------------------
# Flower strategies: what aggregate_fit returns and what configure_fit asks for

STRATEGIES = textwrap.dedent('''
    from flwr.common import FitIns
    from flwr.server.strategy import FedAvg

    class Garbage(FedAvg):
        def aggregate_fit(self, server_round, results, failures):
            return "not a pair of parameters and metrics"

    class NotParameters(FedAvg):
        def aggregate_fit(self, server_round, results, failures):
            return [1.0, 2.0], {}

    class Endless(FedAvg):
        def configure_fit(self, server_round, parameters, client_manager):
            return [(c, FitIns(parameters, {"local_steps": 10 ** 12})) for c in client_manager.all().values()]
''')


def _flower(folder: Path, algorithm: str, options=None) -> dict:
    data = _training(folder, algorithm=algorithm)
    data["learning"]["options"] = options or {}
    return data


@pytest.mark.parametrize("algorithm, options, error, words", [
    ("strategies:Garbage", None, "PartError", "learning.algorithm = Garbage: aggregate_fit (round 1) returned str 'not a "
                                              "pair of parameters and metrics'; Flower's contract is a pair"),
    ("strategies:NotParameters", None, "PartError", "learning.algorithm = NotParameters: aggregate_fit (round 1) "
                                                    "returned list [1.0, 2.0] as the parameters"),
    ("strategies:Endless", None, ConfigError, "Endless's fit config local_steps = 1000000000000: at most 1,000,000 "
                                              "local steps of a device in a round"),
    ("flwr.server.strategy:FedAdam", {"eta": 1e308}, "TrainingDiverged",
     "training diverged in round 0: the model is no longer finite: FedAdam.aggregate_fit returned parameters that are "
     "not finite from finite local models; check the strategy's options"),
])
def test_a_flower_strategy_s_output_is_checked_where_it_enters(parts_folder, algorithm, options, error, words):
    pytest.importorskip("flwr")
    from wirelessfl import TrainingDiverged
    from wirelessfl.plugins import PartError

    (parts_folder / "strategies.py").write_text(STRATEGIES)
    expected = {"PartError": PartError, "TrainingDiverged": TrainingDiverged}.get(error, error)
    with pytest.raises(expected) as err:
        simulate(from_dict(_flower(parts_folder, algorithm, options)), progress=False)
    assert str(err.value).startswith(words) and "\n" not in str(err.value), str(err.value)
    assert "learning.lr" not in str(err.value)


# ---------------------------------------------------------------------------------------------
# what a plug-in author and a new user met


def test_an_integer_field_takes_a_whole_number_in_float_notation():
    sc = from_dict({"run": {"rounds": 2e0, "timing_only": True}, "devices": {"count": 1e1},
                    "link": {"model_bits": 1e6, "packet_bits": 1.5e4}})
    assert (sc.run.rounds, sc.devices.count, sc.link.model_bits, sc.link.packet_bits) == (2, 10, 10 ** 6, 15000)
    assert all(type(v) is int for v in (sc.run.rounds, sc.devices.count, sc.link.model_bits))
    for bad, words in ((2.5, "run.rounds = 2.5: must be an integer"), (float("inf"), "run.rounds = inf: must be an "
                                                                                    "integer"),
                       (1e300, "run.rounds = 1e+300: must be a 64-bit integer")):
        with pytest.raises(ConfigError, match="^" + words.replace("+", r"\+")):
            from_dict({"run": {"rounds": bad}})
    assert "model_bits = 1000000\n" in __import__("wirelessfl.config", fromlist=["dumps"]).dumps(sc)


def test_a_resumed_run_s_progress_bar_shows_the_accuracy_reached_not_nan(parts_folder, monkeypatch):
    from fakes import interrupted
    from wirelessfl.sim.run.checkpoint import load_checkpoint
    from wirelessfl.sim.run.runner import Run

    data = _training(parts_folder)
    data["run"] = {"rounds": 6, "checkpoint_every": 2, "eval_every_rounds": 1}
    sc = from_dict(data)
    interrupted(sc, parts_folder / "cut", monkeypatch, after=3)
    run = Run(sc, parts_folder / "cut", progress=False)
    run.load_state(load_checkpoint(parts_folder / "cut" / "checkpoint.pt"))
    evals = pd.read_csv(parts_folder / "cut" / "evals.csv")
    assert run.bar.acc == pytest.approx(evals["accuracy"].iloc[-1])
    run.bar._last = type("Rec", (), {"round": 3, "t_end": 1.0})()
    assert run.bar._postfix()["acc"] != "nan"
    run.bar.acc = float("nan")  # before any evaluation: no accuracy shown rather than nan
    assert "acc" not in run.bar._postfix()


def test_a_summary_without_its_numbers_is_reported_not_a_key_error(tmp_path):
    (tmp_path / "s.toml").write_text("[run]\nrounds = 2\ntiming_only = true\n[devices]\ncount = 4\n")
    assert cli("run", "s.toml", "--out", "out", "--no-progress", cwd=tmp_path).returncode == 0
    summary = tmp_path / "out" / "s" / "summary.json"
    data = json.loads(summary.read_text())
    del data["rounds"]
    summary.write_text(json.dumps(data))
    proc = cli("run", "--resume", "out/s", "--no-progress", cwd=tmp_path)
    assert "KeyError" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    # an edited summary is not the run's (its digest is not the manifest's): refused in one line
    assert proc.returncode == 2 and "out/s/summary.json: damaged" in proc.stderr, proc.stderr
    from wirelessfl.experiments.summary_line import summary_line

    assert summary_line("s", data) == "s: complete (its summary.json lacks rounds)"


def test_reproduce_list_imports_neither_torch_nor_the_plotting_and_solver_libraries(tmp_path):
    """The listing's speed (benchmarks/cli.py: 0.6 s on 2 cores, goal under 1 s) comes from importing
    only what it prints: no torch, matplotlib, scipy, h5py or pymanopt (about 2 s together)."""
    listing = ("import contextlib, io, sys\nfrom wirelessfl.cli import main\n"
               "with contextlib.redirect_stdout(io.StringIO()) as out:\n    code = main(['reproduce', '--list'])\n"
               "print(code, 'runs/seed' in out.getvalue(), *sorted({m.split('.')[0] for m in sys.modules}))")
    done = subprocess.run([sys.executable, "-c", listing], capture_output=True, text=True, cwd=tmp_path)
    code, listed, *modules = done.stdout.split()
    assert code == "0" and listed == "True", done.stderr
    assert not {"torch", "matplotlib", "scipy", "h5py", "pymanopt"} & set(modules)


def test_type_hints_are_evaluated_once_per_class():
    from wirelessfl.config.tables import RunConfig
    from wirelessfl.fields import type_hints

    assert type_hints(RunConfig) is type_hints(RunConfig) and type_hints(RunConfig)["rounds"] == int | None


@pytest.mark.parametrize("protocol", [{"name": "sync"}, {"name": "semi_sync", "first_k": 2}, _FEDBUFF])
def test_updates_and_rounds_join_on_time_exactly(tmp_path, protocol):
    case = _with(protocol=protocol)
    case["protocol"]["name"] = protocol["name"]
    simulate(from_dict(case), tmp_path / "run", progress=False)
    rounds = pd.read_csv(tmp_path / "run" / "rounds.csv", dtype=str, keep_default_na=False)
    updates = pd.read_csv(tmp_path / "run" / "updates.csv", dtype=str, keep_default_na=False)
    ends = set(rounds["t_end"])
    applied = updates[updates["outcome"] == "applied"]
    if protocol["name"] == "fedbuff":  # an aggregation happens as the update that fills the buffer arrives
        assert set(applied["tx_end_s"]) & ends and len(set(applied["tx_end_s"]) & ends) == len(rounds)
    else:  # sync: the round ends when the last upload does; semi_sync when its k-th does
        assert len(set(applied["tx_end_s"]) & ends) >= len(rounds[rounds["num_selected"].astype(int) > 0]) - 1
    for column in ("dispatch_s", "compute_end_s", "tx_start_s", "tx_end_s", "lost_s"):
        for cell in updates[column]:
            assert cell == "" or repr(float(cell)) == cell or cell == "0", (column, cell)  # the shortest exact form


def test_no_empty_lock_file_is_left_in_a_run_or_sweep_folder(tmp_path):
    (tmp_path / "s.toml").write_text("[run]\nrounds = 2\ntiming_only = true\n[devices]\ncount = 4\n"
                                     "[variants.a]\nscheduler.m = 2\n[variants.b]\nscheduler.m = 3\n")
    assert cli("run", "s.toml", "--out", "out", "--no-progress", cwd=tmp_path).returncode == 0
    assert cli("sweep", "s.toml", "--grid", "scheduler.V=1,10", "--out", "sw", "--no-progress", cwd=tmp_path).returncode == 0
    assert cli("run", "--resume", "out", "--no-progress", cwd=tmp_path).returncode == 0
    assert not [p for p in tmp_path.rglob(".lock")]


def test_a_lock_whose_file_was_removed_by_its_last_holder_is_taken_afresh(tmp_path):
    """The race a removed lock file opens: B opens .lock, A removes it and lets go, B locks the removed
    file. B must see that the path no longer names what it locked and lock the file there now."""
    import fcntl

    from wirelessfl.files import FolderLock

    first = FolderLock(tmp_path)
    first.__enter__()
    stale = open(tmp_path / ".lock", "a")  # opened before the holder lets go
    first.__exit__(None, None, None)
    assert not (tmp_path / ".lock").exists()
    fcntl.flock(stale, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a lock on a file nobody can find: worth nothing
    with FolderLock(tmp_path) as lock:  # a new file, locked for real
        assert lock._ours() and (tmp_path / ".lock").exists()
    stale.close()


def test_the_guide_s_fedprox_and_per_device_state_blocks_run_as_written(parts_folder):
    import re

    blocks = re.findall(r"```(\w+)\n(.*?)```", (ROOT / "docs" / "extending.md").read_text(), re.S)
    python = [code for lang, code in blocks if lang == "python"]
    for module, marker in (("fedprox", "class FedProx("), ("lastdelta", "class LastDelta(")):
        code = next(code for code in python if marker in code)
        assert code.lstrip().startswith(("import", "from")), module  # complete, with its imports
        (parts_folder / f"{module}.py").write_text(code)
    for algorithm, extra in (("fedprox:FedProx", {"mu": 0.5}), ("lastdelta:LastDelta", {})):
        data = _training(parts_folder, algorithm=algorithm, **extra)
        data["run"] = {"rounds": 2, "checkpoint_every": 1}
        res = simulate(from_dict(data), parts_folder / algorithm.partition(":")[0], progress=False)
        assert res.summary["status"] == "complete"
        assert not (parts_folder / algorithm.partition(":")[0] / "checkpoint.pt").exists()  # removed: complete
        assert not (parts_folder / algorithm.partition(":")[0] / "device_state").exists()


def test_the_summary_line_names_aggregations_and_gives_power_for_training_runs_too():
    from wirelessfl.cli import _fmt_summary

    base = {"status": "complete", "rounds": 12, "sim_time_s": 10.0, "mean_distinct_per_round": 10.0,
            "wall_time_s": 1.0, "total_comm_s": 12.0, "total_energy_j": 3.0, "mean_time_avg_power": 1.4,
            "p_bar": 1.0, "power_settled_round": float("nan"), "scheduler": "uniform"}
    event = _fmt_summary("fedbuff", {**base, "protocol": "fedbuff"})
    assert "12 aggregations" in event and "10.00 updates/aggregation" in event and "s/aggregation" in event
    assert "12 rounds" in _fmt_summary("sync", {**base, "protocol": "sync"})
    trained = _fmt_summary("sync", {**base, "protocol": "sync", "final_accuracy": 0.8})
    assert "accuracy 0.800" in trained and "time-average power 1.4 (budget P̄ = 1" in trained
    # a scheduler without virtual queues has no queues' transient to speak of
    assert "transient" not in trained and "above it to the end of these 12 rounds" in trained
    assert "empty queues' transient" in _fmt_summary("sync", {**base, "protocol": "sync", "scheduler": "lyapunov"})


def test_mobility_whose_segments_the_clock_cannot_tell_apart_stops_in_one_line():
    from wirelessfl.mobility import Mobility

    mobility = Mobility(np.zeros((1, 2)), 1.0, 2.5e6, "constant_velocity", 0)
    # far into a run: a segment of 4e-7 s is below the clock's resolution at 1e10 s (1.9e-6 s)
    mobility.t0[:], mobility.t1[:], mobility.segments[:], mobility.now = 1e10 - 1e-7, 1e10, 1, 1e10
    with pytest.raises(ConfigError, match=r"^devices.speed_mps = 2.5e\+06: at t = 1e\+10 s a device's straight segments"):
        mobility.positions(1e10 + 1.0)


def test_run_and_sweep_folders_are_not_taken_for_each_other(tmp_path):
    (tmp_path / "s.toml").write_text("[run]\nrounds = 2\ntiming_only = true\n[devices]\ncount = 4\n")
    assert cli("sweep", "s.toml", "--grid", "scheduler.V=1,10", "--out", "sw", "--no-progress", cwd=tmp_path).returncode == 0
    before = sorted(p.name for p in (tmp_path / "sw").iterdir())
    one_line_error(cli("run", "--resume", "sw", "--no-progress", cwd=tmp_path), "sw is a sweep's folder, not a run's")
    one_line_error(cli("run", "s.toml", "--out", "sw", "--no-progress", cwd=tmp_path), "sw holds a sweep")
    assert sorted(p.name for p in (tmp_path / "sw").iterdir()) == before
    assert cli("run", "s.toml", "--out", "rn", "--no-progress", cwd=tmp_path).returncode == 0
    one_line_error(cli("sweep", "s.toml", "--grid", "scheduler.V=1", "--out", "rn", cwd=tmp_path),
                   "rn holds a scenario's runs")


def test_a_run_that_ends_with_no_aggregation_says_so():
    from wirelessfl.cli import _fmt_summary

    # path loss with moving devices at the defaults: the first upload takes longer than the budget
    res = simulate(from_dict({"run": {"time_budget_s": 2.0, "timing_only": True}, "devices": {"count": 4},
                              "link": {"model_bits": 10 ** 9}, "protocol": _FEDBUFF}), progress=False)
    line = _fmt_summary("fedbuff", res.summary)
    assert res.summary["rounds"] == 0 and "no aggregation within run.time_budget_s" in line


def test_an_override_reaches_the_variants_of_a_written_scenario_too():
    """scenario.toml writes a variant's fields as quoted dotted keys ("protocol.concurrency" = 20), and
    Scenario.replace rebuilds from that form: the override reaches them as it reaches nested tables."""
    import tomllib

    from wirelessfl.config import dumps

    family = load_scenario(ROOT / "scenarios" / "async.toml")
    for again in (from_dict(tomllib.loads(dumps(family)), ["protocol.concurrency=15"]),
                  family.replace("protocol.concurrency=15")):
        members = dict(again.variant_scenarios())
        assert members["fedbuff"].protocol.options.concurrency == members["fedasync"].protocol.options.concurrency == 15
        assert members["fedbuff"].protocol.options.buffer == 10
        assert [k for k, _ in dict(again.variants)["fedbuff"]] == ["protocol.name", "protocol.concurrency",
                                                                   "protocol.buffer"]  # in the file's order
