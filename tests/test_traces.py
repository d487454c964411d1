"""Trace-driven models: measured gains, computation times and availability replayed from files.

A trace recorded from a scenario's own models with ``wirelessfl trace`` and replayed gives that
scenario's run back; malformed traces are one-line errors naming the field; running out of rounds
stops with an error or starts over, as the scenario says."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from wirelessfl import load_scenario, simulate
from wirelessfl.config import ConfigError, from_dict
from wirelessfl.experiments.recording import record_traces
from wirelessfl.traces import TraceExhausted, write_trace
from wirelessfl import load_decisions

SCENARIO = textwrap.dedent('''
    seed = 4
    [run]
    rounds = 30
    timing_only = true
    [channel]
    profile = "linear"
    sigma_min = 0.5
    sigma_max = 3.0
    path_loss = true
    reference_gain_db = 20.0
    [devices]
    count = 8
    compute = "cpu"
    cpu_hz_per_device = [1e9, 2e9, 3e9, 1e9, 2e9, 3e9, 1e9, 2e9]
    p_on_to_off = 0.2
    p_off_to_on = 0.5
    [link]
    model_bits = 100000
    [scheduler]
    m = 3
''')


def replay_overrides(folder, fmt="csv", end="stop"):
    return ['channel.model="trace"', f'channel.trace="{folder}/gains.{fmt}"', f'channel.trace_end="{end}"',
            "channel.path_loss=false",  # the recorded gains include it
            'devices.compute="trace"', f'devices.trace="{folder}/compute_s.{fmt}"',
            "devices.p_on_to_off=0", f'devices.availability_trace="{folder}/available.{fmt}"']


@pytest.mark.parametrize("fmt", ["csv", "npy"])
def test_a_recorded_trace_replays_the_scenarios_run(tmp_path, fmt):
    (tmp_path / "s.toml").write_text(SCENARIO)
    proc = subprocess.run([sys.executable, "-m", "wirelessfl.cli", "trace", str(tmp_path / "s.toml"), "--rounds", "30",
                           "--out", str(tmp_path / "tr"), "--format", fmt], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.count("wrote") == 3, proc.stderr
    model = simulate(load_scenario(tmp_path / "s.toml"), tmp_path / "model", progress=False)
    replay = simulate(load_scenario(tmp_path / "s.toml", replay_overrides(tmp_path / "tr", fmt)), tmp_path / "replay",
                      progress=False)
    columns = ["t_start", "t_end", "comp_s", "comm_s", "selected", "upload_order", "airtime_s", "num_available",
               "energy_j"]
    pd.testing.assert_frame_equal(replay.rounds[columns], model.rounds[columns])
    for key in ("gains", "available"):
        assert np.array_equal(load_decisions(tmp_path / "replay")[key],
                              load_decisions(tmp_path / "model")[key])


def test_the_trace_files_hold_what_the_models_draw(tmp_path):
    sc = load_scenario_text(tmp_path, SCENARIO)
    paths = record_traces(sc, 5, tmp_path / "tr")
    gains = np.loadtxt(paths["gains"], delimiter=",", skiprows=1)
    times = np.loadtxt(paths["compute_s"], delimiter=",", skiprows=1)
    avail = np.loadtxt(paths["available"], delimiter=",", skiprows=1)
    assert gains.shape == times.shape == avail.shape == (5, 8)
    assert np.allclose(times, 1e7 * 10 * 32 / np.array([1e9, 2e9, 3e9, 1e9, 2e9, 3e9, 1e9, 2e9]))  # c S / f
    assert set(np.unique(avail)) <= {0.0, 1.0} and (gains > 0).all()
    assert open(paths["gains"]).readline().strip() == ",".join(f"device_{n}" for n in range(8))


def load_scenario_text(tmp_path, text, overrides=()):
    (tmp_path / "s.toml").write_text(text)
    return load_scenario(tmp_path / "s.toml", overrides)


def test_a_short_trace_stops_the_run_or_cycles(tmp_path):
    record_traces(load_scenario_text(tmp_path, SCENARIO), 10, tmp_path / "tr")
    stop = load_scenario(tmp_path / "s.toml", replay_overrides(tmp_path / "tr"))
    with pytest.raises(TraceExhausted, match=r"channel.trace = '.*gains.csv' has 10 rounds and the run needs more; "
                                             r"make it longer, or set channel.trace_end = 'cycle'"):
        simulate(stop, progress=False)
    cyc = simulate(load_scenario(tmp_path / "s.toml", replay_overrides(tmp_path / "tr", end="cycle")
                                 + ['devices.trace_end="cycle"', 'devices.availability_trace_end="cycle"']),
                   tmp_path / "cyc", progress=False)
    gains = load_decisions(tmp_path / "cyc")["gains"]
    assert len(cyc.rounds) == 30 and np.array_equal(gains[10:20], gains[:10])
    proc = subprocess.run([sys.executable, "-m", "wirelessfl.cli", "run", str(tmp_path / "s.toml"), "--out",
                           str(tmp_path / "cli"), "--no-progress", *[a for o in replay_overrides(tmp_path / "tr") for a in ("--set", o)]],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "channel.trace" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert len(pd.read_csv(tmp_path / "cli" / "s" / "rounds.csv")) == 10  # the rounds it could run are kept


@pytest.mark.parametrize("content, words", [
    ("device_0,device_1\n1.0,2.0\n", "has 2 columns: must have one per device (devices.count = 3)"),
    ("1.0,2.0,3.0\n1.0,x,3.0\n", "line 2, column 2: 'x' is not a number"),
    ("1.0,2.0,3.0\n1.0,2.0\n", "line 2 has 2 columns, the rows before it 3"),
    ("a,b,c\nd,e,f\n1.0,2.0,3.0\n", "line 2, column 1: 'd' is not a number"),  # one header line only
    ("1.0,1_000,3.0\n", "line 1, column 2: '1_000' is not a number"),
    ("1.0,2.0,0x10\n", "line 1, column 3: '0x10' is not a number"),
    ("1.0,0.0,3.0\n", "every value must be > 0"),
    ("1.0,nan,3.0\n", "not finite"),
    ("# only a comment\n", "must hold a table of rounds x devices"),
])
def test_malformed_gain_traces_are_one_line_errors(tmp_path, content, words):
    (tmp_path / "g.csv").write_text(content)
    with pytest.raises(ConfigError) as err:
        from_dict({"run": {"rounds": 2}, "devices": {"count": 3},
                   "channel": {"model": "trace", "trace": str(tmp_path / "g.csv")}})
    assert str(err.value).startswith("channel.trace = ") and words in str(err.value)


def test_relative_trace_paths_are_taken_from_the_scenarios_folder(tmp_path):
    folder = tmp_path / "study"
    folder.mkdir()
    write_trace(folder / "t.npy", np.full((4, 3), 2.0))
    write_trace(folder / "a.csv", np.array([[1, 0, 1]] * 4, dtype=bool))
    sc = load_scenario_text(folder, '[run]\nrounds = 4\ntiming_only = true\n[devices]\ncount = 3\n'
                                    'availability_trace = "a.csv"\n[channel]\nmodel = "trace"\ntrace = "t.npy"\n'
                                    '[link]\nmodel_bits = 1000\n[scheduler]\nname = "uniform"\nm = 3\n')
    assert sc.channel.options.trace == str(folder / "t.npy") and sc.devices.availability_trace == str(folder / "a.csv")
    res = simulate(sc, progress=False)
    assert set(" ".join(res.rounds["selected"].astype(str)).split()) <= {"0", "2"}  # device 1 is never on
    with pytest.raises(ConfigError, match=r"^devices.availability_trace = .*every value must be 0 or 1"):
        write_trace(folder / "a.csv", np.full((4, 3), 2.0))
        load_scenario(folder / "s.toml")
    with pytest.raises(ConfigError, match=r"^channel.trace = .*no such file"):
        from_dict({"run": {"rounds": 1}, "channel": {"model": "trace", "trace": "missing.csv"}})


def test_a_trace_is_never_overwritten_unasked_and_never_written_through_a_link(tmp_path):
    (tmp_path / "s.toml").write_text(SCENARIO)
    cmd = [sys.executable, "-m", "wirelessfl.cli", "trace", str(tmp_path / "s.toml"), "--rounds", "5",
           "--out", str(tmp_path / "tr")]
    assert subprocess.run(cmd, capture_output=True, text=True).returncode == 0
    first = (tmp_path / "tr" / "gains.csv").read_text()
    again = subprocess.run([*cmd[:-3], "7", *cmd[-2:]], capture_output=True, text=True)
    assert again.returncode == 2 and "--overwrite" in again.stderr and len(again.stderr.strip().splitlines()) == 1
    assert (tmp_path / "tr" / "gains.csv").read_text() == first
    # --overwrite replaces them; a link planted where a file goes is replaced, not written through
    victim = tmp_path / "victim.csv"
    victim.write_text("keep me")
    (tmp_path / "tr" / "gains.csv").unlink()
    (tmp_path / "tr" / "gains.csv").symlink_to(victim)
    for planted in (".gains.csv.tmp", ".compute_s.csv.tmp"):
        (tmp_path / "tr" / planted).symlink_to(victim)
    done = subprocess.run([*cmd[:-3], "7", *cmd[-2:], "--overwrite"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "keep me"
    assert not (tmp_path / "tr" / "gains.csv").is_symlink()
    assert len(np.loadtxt(tmp_path / "tr" / "gains.csv", delimiter=",", skiprows=1)) == 7


def test_a_complex_npy_trace_is_refused_not_cut_to_its_real_part(tmp_path):
    np.save(tmp_path / "g.npy", np.ones((4, 3), dtype=complex) * (1 + 2j))
    with pytest.raises(ConfigError, match="holds complex128 values; a trace holds real numbers"):
        from_dict({"run": {"rounds": 2, "timing_only": True}, "devices": {"count": 3},
                   "channel": {"model": "trace", "trace": str(tmp_path / "g.npy")}})


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="needs FIFOs")
def test_files_that_never_end_are_refused_before_they_are_opened(tmp_path):
    """A FIFO waits for a writer forever and /dev/zero never ends: traces, scenarios and checkpoints
    that are not regular files are one-line errors, and nothing is opened."""
    import os

    from wirelessfl.sim.run.checkpoint import ResumeError, load_checkpoint

    os.mkfifo(tmp_path / "fifo")
    for trace, kind in ((tmp_path / "fifo", "a FIFO"), ("/dev/zero", "a device"), (tmp_path, "a folder")):
        with pytest.raises(ConfigError, match=f"^channel.trace = .*: is {kind}"):
            from_dict({"run": {"rounds": 1}, "devices": {"count": 3},
                       "channel": {"model": "trace", "trace": str(trace)}})
    with pytest.raises(ConfigError, match="scenario file .*fifo is a FIFO, not a regular file"):
        load_scenario(tmp_path / "fifo")
    with pytest.raises(ResumeError, match="fifo: is a FIFO, not a regular file; it cannot be a checkpoint"):
        load_checkpoint(tmp_path / "fifo")


def test_an_npy_trace_whose_header_claims_more_than_the_file_holds_is_refused_unallocated(tmp_path):
    np.save(tmp_path / "g.npy", np.ones((4, 3)))
    raw = (tmp_path / "g.npy").read_bytes()
    header_end = raw.index(b"\n") + 1
    header = raw[:header_end].replace(b"(4, 3)", b"(1099511627776, 3)")  # 24 TiB of float64
    header = header[:-1].rstrip(b" ") + b" " * (header_end - len(header[:-1].rstrip(b" ")) - 1) + b"\n"
    (tmp_path / "g.npy").write_bytes(header + raw[header_end:])
    with pytest.raises(ConfigError, match=r"header declares \(1099511627776, 3\) float64 values "
                                          r"\(26,388,279,066,624 bytes\) and the file holds 96"):
        from_dict({"run": {"rounds": 1}, "devices": {"count": 3},
                   "channel": {"model": "trace", "trace": str(tmp_path / "g.npy")}})
