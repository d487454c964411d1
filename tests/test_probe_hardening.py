"""Hardening, fifth round (issue 61, item 7): what a hostile probe found at medium and low severity.
Each failure is reproduced on a small scenario and pinned: the time-average power of tasks that never
reached the air, divergence under compression, an airtime that overflows, a --window past what an axis
can draw, a full disk during --resume, a scheduler's overflow, read-only output folders, FIFOs where
files are read, and summary lines of hundreds of fixed-point digits."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fakes
from wirelessfl import load_scenario, simulate
from wirelessfl.config import ConfigError, from_dict


def one_line_error(proc: subprocess.CompletedProcess, words: str, code: int = 2) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert words in proc.stderr, proc.stderr


def quiet_cli(*args, cwd):
    """fakes.cli with numpy's and matplotlib's warnings turned into errors: a warning that would print in
    front of the command's one line fails the command (a traceback, exit 1) instead of passing unseen."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        warnings.simplefilter("error", UserWarning)
        return fakes.cli(*args, cwd=cwd)


# ---------------------------------------------------------------------------------------------
# the time-average power counts the uploads that reached the air

_BATTERIES = {"run": {"time_budget_s": 30.0, "timing_only": True},
              "devices": {"count": 6, "availability": "battery", "battery_capacity_j": 3.0, "rx_power_w": 2.0,
                          "availability_period_s": 1.0, "battery_threshold": 0.0},
              "link": {"model_bits": 2e5, "bandwidth_hz": 1e6, "downlink_s": 0.5},
              "protocol": {"name": "fedbuff", "concurrency": 3, "buffer": 2}, "scheduler": {"name": "uniform"}}


def test_tasks_whose_batteries_ran_dry_before_the_air_add_no_power(tmp_path):
    """Receiving the model at 100 W empties 1 J batteries in 10 ms: no task reaches the air, so the
    time-average power is 0 (it said 95.8, the dispatched tasks' power)."""
    data = fakes.changed(json.loads(json.dumps(_BATTERIES)), {
        "devices": {"battery_capacity_j": 1.0, "rx_power_w": 100.0, "battery_threshold": None},
        "link": {"p_max": 100.0, "p_bar": 50.0}})
    res = simulate(from_dict(data), tmp_path / "r", progress=False)
    updates = pd.read_csv(tmp_path / "r" / "updates.csv")
    assert len(updates) > 0 and updates["tx_start_s"].isna().all() and set(updates["outcome"]) == {"battery"}
    assert res.summary["mean_time_avg_power"] == 0.0
    assert (pd.read_csv(tmp_path / "r" / "devices.csv")["time_avg_power"] == 0.0).all()


def test_the_time_average_power_is_the_power_of_the_uploads_on_the_air(tmp_path):
    """Batteries that run dry in most tasks (173 of 184 here): each device's time-average power is the
    power of its uploads that went on the air over the aggregations, computed again from updates.csv."""
    res = simulate(from_dict(_BATTERIES), tmp_path / "r", progress=False)
    updates = pd.read_csv(tmp_path / "r" / "updates.csv")
    devices = pd.read_csv(tmp_path / "r" / "devices.csv")
    assert (updates["outcome"] == "battery").sum() > 100 and updates["tx_start_s"].notna().sum() >= 5
    aired = updates[updates["tx_start_s"].notna()].groupby("device")["power"].sum().reindex(range(6), fill_value=0.0)
    np.testing.assert_allclose(devices["time_avg_power"], aired.to_numpy() / max(res.summary["rounds"], 1), rtol=1e-12)
    every_task = updates.groupby("device")["power"].sum().to_numpy() / max(res.summary["rounds"], 1)
    assert (devices["time_avg_power"].to_numpy() < every_task).all()  # what it said before: every dispatch


# ---------------------------------------------------------------------------------------------
# a divergence under compression is diagnosed as without it

TINY = textwrap.dedent('''
    import numpy as np

    from wirelessfl.learning import Dataset, DatasetLoader

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
            rng = np.random.default_rng(0)
            x = rng.normal(size=(80, 6)).astype(np.float32)
            y = rng.integers(0, 3, size=80)
            return Dataset.from_arrays("tiny", x[:60], y[:60], x[60:], y[60:], 3)
''')


def _diverging(folder: Path, compression: str, protocol: dict) -> dict:
    (folder / "tiny_data.py").write_text(TINY)
    return {"plugin_path": [str(folder)], "run": {"rounds": 3}, "devices": {"count": 4},
            "scheduler": {"name": "uniform", "m": 2}, "protocol": protocol,
            "learning": {"dataset": "tiny_data:Tiny", "model": "mlp", "partition": "iid", "samples_per_device": 10,
                         "local_steps": 20, "batch_size": 4, "eval_train_samples": 20, "lr": 1e6,
                         "compression": compression}}


@pytest.mark.parametrize("protocol", [{"name": "sync"}, {"name": "fedbuff", "concurrency": 2, "buffer": 2}],
                         ids=["sync", "fedbuff"])
@pytest.mark.parametrize("compression", ["topk", "sign", "qsgd"])
def test_a_diverging_run_with_compression_gets_the_diagnosis_it_gets_without(tmp_path, compression, protocol):
    """It stopped with "TopK.encode wrote 0 bits" (top-k of NaNs keeps nothing) or blamed a damaged
    state journal (sign's error-feedback memory turned NaN)."""
    from wirelessfl import TrainingDiverged

    said = {}
    for scheme in ("none", compression):
        with pytest.raises(TrainingDiverged) as err:
            simulate(from_dict(_diverging(tmp_path, scheme, protocol)), progress=False)
        said[scheme] = str(err.value)
    assert said[compression] == said["none"]
    assert "was the first value that was not finite; try a smaller learning.lr (now 1e+06)" in said[compression]
    assert "journal" not in said[compression]


def test_a_finite_update_too_large_for_float16_is_named_as_the_cause(tmp_path):
    """float16 ends at 65504: a finite local update beyond it decodes to inf. The model diverges with
    finite local updates, which was blamed on the aggregation ("check the algorithm's options")."""
    from wirelessfl import TrainingDiverged

    data = _diverging(tmp_path, "float16", {"name": "sync"})
    data["learning"].update(model="logreg", local_steps=1)  # one step of lr 1e6: finite, far past 65504
    with pytest.raises(TrainingDiverged) as err:
        simulate(from_dict(data), progress=False)
    text = str(err.value)
    assert "the local update of device 0 (round 0) was finite and too large for learning.compression = 'float16' " \
           "to encode (it decoded to inf); try a smaller learning.lr (now 1e+06)" in text, text
    assert "aggregation" not in text


def test_the_uplink_passes_a_non_finite_update_through_and_keeps_its_memory():
    import torch

    from wirelessfl.learning.compression import TopK, TopKOptions, Uplink

    topk = TopK(TopKOptions(k=2))
    memory = torch.zeros(2, 4)
    uplink = Uplink(topk, 0, lambda name: memory)
    rows = torch.tensor([[1.0, -3.0, 0.5, 2.0], [float("nan"), 1.0, 2.0, 3.0]])
    out = uplink.send([0, 1], rows, round_idx=0)
    # device 0: the 2 largest of 4 kept, the rest in its memory; device 1: as it came, memory untouched
    assert out[0].tolist() == [0.0, -3.0, 0.0, 2.0] and memory[0].tolist() == [1.0, 0.0, 0.5, 0.0]
    assert np.isnan(out[1, 0].item()) and out[1, 1:].tolist() == [1.0, 2.0, 3.0]
    assert memory[1].tolist() == [0.0, 0.0, 0.0, 0.0] and uplink.overflowed is None  # not encoded at all


# ---------------------------------------------------------------------------------------------
# an airtime that overflows; --window past what an axis can draw

_S = "[run]\nrounds = 3\ntiming_only = true\n[devices]\ncount = 4\n[scheduler]\nname = \"uniform\"\n"


@pytest.mark.parametrize("protocol", [
    [], ["--set", "protocol.name=fedbuff", "--set", "protocol.concurrency=2", "--set", "protocol.buffer=2"],
    ["--set", "protocol.name=fedasync", "--set", "protocol.concurrency=2"],
    ["--set", "protocol.name=semi_sync", "--set", "protocol.first_k=1"]],
    ids=["sync", "fedbuff", "fedasync", "semi_sync"])
def test_a_bandwidth_whose_airtime_overflows_is_refused_in_one_line(tmp_path, protocol):
    """1e-306 Hz: a 926,016-bit upload (32 x the model's parameters) takes inf s at any SNR. It gave a
    matplotlib traceback (event protocols) or a numpy warning before the failure's line (sync)."""
    (tmp_path / "s.toml").write_text(_S)
    proc = quiet_cli("run", "s.toml", "--set", "link.bandwidth_hz=1e-306", *protocol, "--out", "o", "--no-progress",
                     cwd=tmp_path)
    one_line_error(proc, "link.bandwidth_hz = 1e-306: an upload of 926016 bits (32 x the model's parameters) is more "
                         "than 1e+300 bits per hertz of the band, whose airtime overflows floating point at any SNR; "
                         "bandwidth_hz must be at least 9.26e-295")


def test_the_bits_per_hertz_bound_leaves_a_narrow_band_alone():
    from wirelessfl.config.limits import MAX_BITS_PER_HZ

    assert MAX_BITS_PER_HZ == 1e300
    from_dict({"run": {"rounds": 1, "timing_only": True}, "link": {"model_bits": 1e6, "bandwidth_hz": 1e-294}})
    with pytest.raises(ConfigError, match=r"^link.bandwidth_hz = 1e-295: an upload of 1e\+06 bits \(link.model_bits\)"):
        from_dict({"run": {"rounds": 1, "timing_only": True}, "link": {"model_bits": 1e6, "bandwidth_hz": 1e-295}})


@pytest.mark.parametrize("protocol", [
    [], ["--set", "protocol.name=fedbuff", "--set", "protocol.concurrency=2", "--set", "protocol.buffer=2"],
    ["--set", "protocol.name=fedasync", "--set", "protocol.concurrency=2"],
    ["--set", "protocol.name=semi_sync", "--set", "protocol.first_k=1"]],
    ids=["sync", "fedbuff", "fedasync", "semi_sync"])
def test_an_airtime_that_overflows_stops_the_run_in_its_one_line(tmp_path, protocol):
    """A power of 1e-320 W (a subnormal SNR): the airtime is inf. The run stops as NonFiniteTime, in one
    line with no numpy warning before it, and its figures are drawn (the Gantt chart's window ends at a
    finite time)."""
    (tmp_path / "s.toml").write_text(_S)
    proc = quiet_cli("run", "s.toml", "--set", "link.p_max=1e-320", "--set", "link.p_bar=1e-320", *protocol,
                     "--out", "o", "--no-progress", cwd=tmp_path)
    one_line_error(proc, "s did not complete: NonFiniteTime: the simulated clock became inf", code=1)
    assert "Traceback" not in proc.stdout and "wrote o/timing.png" in proc.stdout
    if protocol:
        assert "wrote o/gantt.png" in proc.stdout


def test_a_gantt_window_beyond_the_axis_range_is_refused_in_one_line(tmp_path):
    (tmp_path / "s.toml").write_text(_S)
    assert fakes.cli("run", "s.toml", "--set", "protocol.name=fedasync", "--set", "protocol.concurrency=2", "--out",
                     "o", "--no-progress", cwd=tmp_path).returncode == 0
    before = sorted(p.name for p in (tmp_path / "o" / "s").iterdir())
    one_line_error(quiet_cli("plot", "o/s", "--events", "--window", "1e308,1.7e308", cwd=tmp_path),
                   "--window 1e308,1.7e308: START and END must lie within ±1e+300 simulated seconds")
    assert sorted(p.name for p in (tmp_path / "o" / "s").iterdir()) == before  # nothing drawn
    proc = quiet_cli("plot", "o/s", "--events", "--window=-1e300,1e300", "--out", "edge", cwd=tmp_path)
    assert proc.returncode == 0 and (tmp_path / "edge" / "gantt.png").exists(), proc.stderr


def test_the_default_gantt_window_ends_at_a_finite_upload_end():
    from wirelessfl.experiments.plots import gantt_window

    updates = pd.DataFrame({"tx_end_s": [2.0, np.inf, 5.0, np.nan]})
    assert gantt_window(updates, uploads=40) == (0.0, 5.0)
    assert gantt_window(pd.DataFrame({"tx_end_s": [np.inf]})) == (0.0, 1.0)


# ---------------------------------------------------------------------------------------------
# a full disk during --resume


@pytest.mark.parametrize("killed", [False, True], ids=["interrupted", "killed"])
def test_a_full_disk_during_resume_is_said_in_one_line_naming_the_file(tmp_path, monkeypatch, killed):
    """ENOSPC on every file synced: "did not complete: None" (no summary.json, after kill -9) or the
    interrupted attempt's "KeyboardInterrupt" before; now the file and the cause. Nothing is lost: with
    the disk freed the resume finishes the run as an uninterrupted one."""
    from wirelessfl import files

    (tmp_path / "s.toml").write_text("[run]\nrounds = 12\ntiming_only = true\ncheckpoint_every = 2\n"
                                     "[devices]\ncount = 4\n")
    scenario = load_scenario(tmp_path / "s.toml")
    fakes.interrupted(scenario, tmp_path / "out" / "s", monkeypatch, after=5)
    if killed:
        (tmp_path / "out" / "s" / "summary.json").unlink()
    checkpoint = (tmp_path / "out" / "s" / "checkpoint.pt").read_bytes()

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.os, "fsync", full)
    proc = fakes.cli("run", "--resume", "out", "--no-progress", cwd=tmp_path)
    monkeypatch.undo()
    one_line_error(proc, "wirelessfl: s did not complete: OSError: ", code=1)
    assert proc.stderr.rstrip().endswith(": No space left on device"), proc.stderr
    named = proc.stderr.split("OSError: ")[1].rsplit(": No space", 1)[0]
    assert Path(named).parent == Path("out/s") and not Path(named).name.startswith(".")  # not a scratch file
    assert (tmp_path / "out" / "s" / "checkpoint.pt").read_bytes() == checkpoint
    assert fakes.cli("run", "--resume", "out", "--no-progress", cwd=tmp_path).returncode == 0
    whole = simulate(scenario, tmp_path / "whole", progress=False)
    assert (tmp_path / "out" / "s" / "rounds.csv").read_bytes() == (tmp_path / "whole" / "rounds.csv").read_bytes()
    assert whole.summary["status"] == "complete"


def test_a_full_disk_while_resuming_a_scenario_s_folder_is_one_line(tmp_path, monkeypatch):
    """`run --resume OUT` of a folder `run` wrote (index.json beside the variants): the disk fills as
    the variant resumes and again as index.json is written; one line names the file and the cause."""
    from wirelessfl import files
    from wirelessfl.sim.records import recorder as records_module

    (tmp_path / "s.toml").write_text("[run]\nrounds = 12\ntiming_only = true\ncheckpoint_every = 2\n"
                                     "[devices]\ncount = 4\n")
    real, calls = records_module.Recorder.on_round, {"n": 0}

    def stop(self, rec):
        calls["n"] += 1
        if calls["n"] == 6:
            raise KeyboardInterrupt
        return real(self, rec)

    monkeypatch.setattr(records_module.Recorder, "on_round", stop)
    assert fakes.cli("run", "s.toml", "--out", "out", "--no-progress", cwd=tmp_path).returncode == 130
    monkeypatch.setattr(records_module.Recorder, "on_round", real)
    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.os, "fsync", full)
    proc = fakes.cli("run", "--resume", "out", "--no-progress", cwd=tmp_path)
    one_line_error(proc, "wirelessfl: error: out/index.json: No space left on device", code=1)


def test_a_failure_the_folder_recorded_is_read_back_with_its_traceback(tmp_path):
    from wirelessfl.experiments.run import failed_result

    (tmp_path / "summary.json").write_text(json.dumps({"status": "failed", "error": "ValueError: bad",
                                                       "error_log": "error.log"}))
    assert failed_result(tmp_path, "r", ValueError("bad")).summary["error_log"] == "error.log"
    other = failed_result(tmp_path, "r", OSError(errno.ENOSPC, "No space left on device", "/x/rounds.csv"))
    assert other.summary["error"] == "OSError: /x/rounds.csv: No space left on device"
    assert "error_log" not in other.summary  # the earlier failure's traceback is not this one's


# ---------------------------------------------------------------------------------------------
# a scheduler's costs that would overflow


def _frequency_choice(cycles: float) -> dict:
    return {"run": {"rounds": 3, "timing_only": True}, "devices": {"count": 4, "compute": "cpu",
            "cycles_per_sample": cycles}, "scheduler": {"choose_frequency": True, "e_bar_j": 0.05}}


@pytest.mark.parametrize("protocol", [{"name": "sync"}, {"name": "fedbuff", "concurrency": 2, "buffer": 2}])
def test_a_computation_whose_frequency_costs_overflow_is_refused_in_one_line(protocol):
    data = {**_frequency_choice(1e300), "protocol": protocol}
    sc = from_dict({**_frequency_choice(1e7), "protocol": protocol})  # the same scenario, ordinary cycles
    options = sc.options("compute")
    samples = sc.learning.local_steps * sc.learning.batch_size
    energy = options.kappa * options.cpu_hz ** 2 * 1e300 * samples  # kappa f_max^2 c S, by hand
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ConfigError) as err:
            from_dict(data)
    text = str(err.value)
    assert text.startswith("scheduler.choose_frequency: device 0's computation of a round") and "\n" not in text
    assert f"its energy at f_max, kappa f^2 c S, {energy:.3g}; at most 1e+100" in text


def test_ordinary_computations_pass_the_frequency_cost_bound():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        res = simulate(from_dict(_frequency_choice(1e7)), progress=False)
    assert res.summary["status"] == "complete" and res.summary["rounds"] == 3


# ---------------------------------------------------------------------------------------------
# read-only output folders: one line, exit 2


@pytest.fixture
def read_only(tmp_path, monkeypatch):
    """tmp_path/ro and everything under it read-only as os.access sees it (the tests may run as root,
    whom chmod does not stop)."""
    from wirelessfl import files

    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access

    def access(path, mode, *args, **kwargs):
        inside = Path(path).resolve() == ro.resolve() or ro.resolve() in Path(path).resolve().parents
        return False if inside and mode & os.W_OK else real(path, mode, *args, **kwargs)

    monkeypatch.setattr(files.os, "access", access)
    return ro


def test_a_read_only_output_folder_is_refused_with_exit_2(tmp_path, read_only):
    (tmp_path / "s.toml").write_text(_S)
    assert fakes.cli("run", "s.toml", "--set", "protocol.name=fedasync", "--set", "protocol.concurrency=2",
                     "--out", "ro/run", "--no-progress", cwd=tmp_path).returncode == 2
    for args, words in [(("plot", "run", "--out", "ro"), "plot: --out ro: ro is not writable"),
                        (("plot", "run", "--events", "--out", "ro/figures"),
                         "plot: --out ro/figures: ro is not writable"),
                        (("trace", "s.toml", "--rounds", "2", "--out", "ro"), "--out ro: ro is not writable"),
                        (("run", "s.toml", "--out", "ro", "--no-progress"), "--out ro: ro is not writable"),
                        (("reproduce", "fig2", "--scale", "tiny", "--out", "cache", "--figures", "ro", "--no-run",
                          "--no-progress"), "--figures ro: ro is not writable")]:
        if args[0] == "plot" and not (tmp_path / "run").exists():
            assert fakes.cli("run", "s.toml", "--set", "protocol.name=fedasync", "--set", "protocol.concurrency=2",
                             "--out", "run", "--no-progress", cwd=tmp_path).returncode == 0
        one_line_error(fakes.cli(*args, cwd=tmp_path), words)
    assert fakes.cli("sweep", "s.toml", "--grid", "scheduler.m=1,2", "--out", "sw", "--no-progress",
                     cwd=tmp_path).returncode == 0
    one_line_error(fakes.cli("plot", "sw", "--x", "scheduler.m", "--y", "mean_round_s", "--out", "ro/m.png", cwd=tmp_path),
                   "plot: the folder of --out ro: ro is not writable")
    assert list(read_only.iterdir()) == []


def test_resuming_a_run_in_a_read_only_folder_is_refused_with_exit_2(tmp_path, monkeypatch):
    (tmp_path / "s.toml").write_text(_S)
    assert fakes.cli("run", "s.toml", "--out", "ro", "--no-progress", cwd=tmp_path).returncode == 0
    (tmp_path / "ro" / "s" / "summary.json").unlink()  # as if killed
    before = sorted(p.name for p in (tmp_path / "ro" / "s").iterdir())
    from wirelessfl import files

    real = os.access
    monkeypatch.setattr(files.os, "access", lambda p, mode, *a, **k: False if mode & os.W_OK else real(p, mode))
    for target, words in (("ro", "resume ro: ro is not writable"), ("ro/s", "resume ro/s: ro/s is not writable")):
        one_line_error(fakes.cli("run", "--resume", target, "--no-progress", cwd=tmp_path), words)
    assert sorted(p.name for p in (tmp_path / "ro" / "s").iterdir()) == before  # no lock file, nothing written


# ---------------------------------------------------------------------------------------------
# FIFOs where files are read: "not a regular file", not "missing"

IDX = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def test_a_fifo_among_the_idx_files_is_not_a_regular_file(tmp_path):
    from wirelessfl.learning import DatasetError
    from wirelessfl.learning.datasets import load_dataset

    (tmp_path / "idx").mkdir()
    for name in IDX:
        os.mkfifo(tmp_path / "idx" / name)
    with pytest.raises(DatasetError) as err:
        load_dataset("fashion_mnist", data_dir=str(tmp_path / "idx"))
    assert str(err.value) == (f"dataset 'fashion_mnist': {tmp_path / 'idx' / IDX[0]} is a FIFO, not a regular file; "
                              "it reads regular files only")


def test_a_fifo_given_as_a_dataset_csv_is_not_a_regular_file(tmp_path):
    """examples/own_data's dataset reads learning.dataset_options.csv (a FilePath): it said "no such file"."""
    import shutil

    shutil.copy(Path(__file__).resolve().parents[1] / "examples" / "own_data" / "my_parts.py", tmp_path / "my_parts.py")
    os.mkfifo(tmp_path / "rows.csv")
    (tmp_path / "s.toml").write_text('[run]\nrounds = 1\n[devices]\ncount = 2\n[learning]\n'
                                     'dataset = "my_parts:PumpFaults"\nmodel = "my_parts:TabularMLP"\n'
                                     '[learning.dataset_options]\ncsv = "rows.csv"\n')
    one_line_error(fakes.cli("run", "s.toml", "--no-progress", "--out", "o", cwd=tmp_path),
                   f"learning.dataset_options.csv = 'rows.csv' ({tmp_path / 'rows.csv'}): is a FIFO, "
                   "not a regular file")
    assert not (tmp_path / "o").exists()


def test_a_fifo_given_as_a_plug_in_module_is_not_a_regular_file(tmp_path):
    (tmp_path / "plug").mkdir()
    os.mkfifo(tmp_path / "plug" / "fifo_parts.py")
    with pytest.raises(ConfigError) as err:
        from_dict({"plugin_path": [str(tmp_path / "plug")], "run": {"rounds": 1, "timing_only": True},
                   "scheduler": {"name": "fifo_parts:Mine"}})
    assert str(err.value) == (f"scheduler.name = 'fifo_parts:Mine': module 'fifo_parts': "
                              f"{tmp_path / 'plug' / 'fifo_parts.py'} is a FIFO, not a regular file")


def test_a_folder_is_still_a_file_path_for_plugin_path(tmp_path):
    sc = from_dict({"plugin_path": [str(tmp_path)], "run": {"rounds": 1, "timing_only": True}})
    assert sc.plugin_path == (str(tmp_path),)


# ---------------------------------------------------------------------------------------------
# the summary line: huge and tiny values compactly, ordinary ones as before

_SUMMARY = {"status": "complete", "rounds": 3, "sim_time_s": 10.0, "mean_distinct_per_round": 2.5,
            "wall_time_s": 0.04, "total_comm_s": 3.0, "total_energy_j": 3.0, "mean_time_avg_power": 1.4,
            "p_bar": 1.0, "protocol": "sync", "scheduler": "uniform", "power_settled_round": float("nan")}


def test_a_huge_time_is_said_in_a_few_characters():
    from wirelessfl.cli import _fmt_summary

    line = _fmt_summary("s", {**_SUMMARY, "sim_time_s": 9.6e293, "wall_time_s": 2e20, "mean_distinct_per_round": 1e18})
    assert "3 rounds, 9.6e+293 s simulated, 1e+18 devices/round" in line and "wall 2e+20 s" in line
    assert len(line) < 300, len(line)
    assert "1e-300 s simulated" in _fmt_summary("s", {**_SUMMARY, "sim_time_s": 1e-300})


def test_ordinary_values_are_printed_as_before():
    from wirelessfl.cli import _fmt_summary

    line = _fmt_summary("s", {**_SUMMARY, "sim_time_s": 123456789012.34, "final_accuracy": 0.8125,
                              "target_accuracy": 0.8, "time_to_target_s": 99999.96})
    assert line.startswith("s: 3 rounds, 123456789012.3 s simulated, accuracy 0.812")
    assert "time to 0.8: 100000.0 s" in line and "2.50 devices/round" in line and line.endswith("wall 0.0 s")
    assert "0.0 s simulated" in _fmt_summary("s", {**_SUMMARY, "sim_time_s": 0.0})
