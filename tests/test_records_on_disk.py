"""Records that live on disk: a run with a folder keeps no rows of rounds.csv in memory, its
checkpoints refer to the file by length (so they do not grow with the run), and a resume cuts the
file back to the checkpoint, also when a column was added to it after the checkpoint."""
import math

import numpy as np
import pandas as pd
import pytest

from wirelessfl.config import from_dict
from wirelessfl.experiments.run import load_run, resume, simulate
from wirelessfl.scheduling import schedulers
from wirelessfl.sim.run import runner as runner_module
from wirelessfl.sim.run.checkpoint import load_checkpoint
from wirelessfl.sim.records.summary import PowerSettling, RoundTotals, power_settled_round

from fakes import interrupted


def fedbuff(budget_s: float, every: int = 20):
    return from_dict({"seed": 2, "run": {"time_budget_s": budget_s, "timing_only": True, "checkpoint_every": every},
                      "devices": {"count": 30, "compute": "shifted_exponential", "delay_mean_s": 1.0},
                      "link": {"model_bits": 200000},
                      "protocol": {"name": "fedbuff", "concurrency": 8, "buffer": 2},
                      "scheduler": {"name": "uniform"}})


def test_a_checkpoint_costs_the_same_after_ten_times_the_rounds(tmp_path, monkeypatch):
    sizes = []
    real = runner_module.save_checkpoint

    def measured(path, state):
        real(path, state)
        sizes.append((state["engine"]["rounds_done"], path.stat().st_size))

    monkeypatch.setattr(runner_module, "save_checkpoint", measured)
    res = simulate(fedbuff(400.0), tmp_path / "run", progress=False)
    assert res.summary["aggregations"] > 400
    (early_rounds, early), (late_rounds, late) = sizes[1], sizes[-1]
    assert late_rounds >= 10 * early_rounds
    assert late <= 1.05 * early  # the rows are on disk, referred to by length


def test_a_run_with_a_folder_reads_its_rows_back_as_the_file_has_them(tmp_path):
    res = simulate(fedbuff(30.0), tmp_path / "run", progress=False)
    pd.testing.assert_frame_equal(res.rounds, load_run(tmp_path / "run").rounds)
    in_memory = simulate(fedbuff(30.0), progress=False)
    assert len(in_memory.rounds) == len(res.rounds) == res.summary["aggregations"]
    np.testing.assert_array_equal(in_memory.rounds["t_end"].to_numpy(float), res.rounds["t_end"].to_numpy(float))


def _late_column_from(first_round: int, monkeypatch):
    """The uniform scheduler's decisions gain the fact ``late_fact`` from round ``first_round`` on."""
    real = schedulers.UniformScheduler.decide

    def decide(self, state):
        decision = real(self, state)
        if state.round >= first_round:
            decision.info["late_fact"] = state.round * 0.5
        return decision

    monkeypatch.setattr(schedulers.UniformScheduler, "decide", decide)


@pytest.mark.parametrize("every", [3, 4])  # checkpoint after (6) or before (4) the column appeared (5)
def test_a_resume_cuts_rounds_csv_back_also_after_a_column_was_added(tmp_path, monkeypatch, every):
    sc = from_dict({"seed": 1, "run": {"rounds": 9, "timing_only": True, "checkpoint_every": every},
                    "devices": {"count": 10}, "scheduler": {"name": "uniform", "m": 3}})
    _late_column_from(5, monkeypatch)
    full = simulate(sc, tmp_path / "full", progress=False)
    assert "late_fact" in full.rounds and math.isnan(full.rounds["late_fact"][4]) and full.rounds["late_fact"][5] == 2.5
    interrupted(sc, tmp_path / "cut", monkeypatch, after=7)  # in round 7
    assert load_checkpoint(tmp_path / "cut" / "checkpoint.pt")["engine"]["rounds_done"] == 6 // every * every
    resume(tmp_path / "cut", progress=False)
    for name in ("rounds.csv", "updates.csv", "devices.csv"):
        assert (tmp_path / "cut" / name).read_bytes() == (tmp_path / "full" / name).read_bytes(), name


def test_a_damaged_rounds_file_is_a_one_line_resume_error_and_the_folder_is_left_as_it_was(tmp_path, monkeypatch):
    interrupted(fedbuff(60.0, every=5), tmp_path / "cut", monkeypatch, after=11)
    path = tmp_path / "cut" / "rounds.csv"
    text = path.read_text()
    path.write_text(text[: len(text) // 3])  # rows the checkpoint counts are gone
    with pytest.raises(ValueError, match="rounds.csv") as err:
        resume(tmp_path / "cut", progress=False)
    assert "\n" not in str(err.value)
    assert path.read_text() == text[: len(text) // 3]


def test_the_running_totals_are_the_sums_over_the_rows():
    rng = np.random.default_rng(0)
    rows = [{"t_end": float(i), "comm_s": float(rng.random()), "comp_s": float(rng.random()),
             "downlink_s": 0.1, "energy_j": float(rng.random()), "num_selected": int(rng.integers(0, 5)),
             "num_arrived": 0, "server_round": int(i % 3 == 0), "server_s": float(rng.random())} for i in range(50)]
    totals = RoundTotals.of(rows)
    assert totals.rounds == 50 and totals.end_s == 49.0
    assert totals.sums["comm_s"] == sum(r["comm_s"] for r in rows)  # the same additions: exactly equal
    assert totals.sums["dropped"] == sum(r["num_selected"] for r in rows)
    assert totals.sums["server_round"] == 17


@pytest.mark.parametrize("seed", range(5))
def test_power_settling_kept_as_it_goes_equals_the_whole_series(seed):
    rng = np.random.default_rng(seed)
    series = list(np.where(np.arange(300) < rng.integers(1, 200), 5.0, 1.0) * rng.uniform(0.9, 1.1, 300))
    for n in (0, 1, 50, 300):
        running = PowerSettling(1.0)
        for p in series[:n]:
            running.add(p)
        expected = power_settled_round(series[:n], 1.0)
        assert running.settled_round == expected or (math.isnan(expected) and math.isnan(running.settled_round))


def test_the_row_at_a_checkpoint_s_length_is_found_however_long_rows_are(tmp_path):
    from wirelessfl.sim.records.round_file import rounds_file_problem

    path = tmp_path / "rounds.csv"
    rows = ["round,selected"] + [f"{r}," + " ".join(["12345"] * (3000 if r == 2 else 3)) for r in range(4)]
    text = "\n".join(rows) + "\n"
    path.write_text(text)
    through_round_2 = len("\n".join(rows[:4]) + "\n")  # the header and rounds 0, 1, 2 (a 18 KB row)
    assert rounds_file_problem(path, 3, ["round", "selected"], through_round_2) is None
    assert "3 rounds" in rounds_file_problem(path, 3, ["round", "selected"], len("\n".join(rows[:3]) + "\n"))
    assert rounds_file_problem(path, 3, ["round", "selected"], through_round_2 - 5) is not None  # mid-row
    assert rounds_file_problem(path, 0, ["round", "selected"], len("round,selected\n")) is None


LONG_FEDBUFF = """seed = 0
[run]
time_budget_s = 20000.0
timing_only = true
checkpoint_every = 200
[channel]
profile = "linear"
sigma_min = 0.1
sigma_max = 10.0
[link]
bandwidth_hz = 10e6
p_max = "30 dB"
model_bits = 3000000
[devices]
count = 100
compute = "shifted_exponential"
delay_shift_s = 0.5
delay_mean_s = 1.5
[scheduler]
name = "uniform"
[protocol]
name = "fedbuff"
concurrency = 20
buffer = 10
"""


@pytest.mark.slow
def test_a_long_fedbuff_run_killed_with_sigkill_resumes_to_the_uninterrupted_files(tmp_path):
    """20,000 simulated s of fedbuff (about 126k uploads, a checkpoint every 200 aggregations): the
    run killed outright midway and resumed writes the files of the run left alone, byte for byte."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "fb.toml").write_text(LONG_FEDBUFF)
    run = [sys.executable, "-m", "wirelessfl.cli", "run", str(tmp_path / "fb.toml"), "--no-progress"]
    whole = subprocess.run(run + ["--out", str(tmp_path / "whole")], capture_output=True, text=True)
    assert whole.returncode == 0, whole.stderr
    proc = subprocess.Popen(run + ["--out", str(tmp_path / "cut")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    cut = tmp_path / "cut" / "fb"
    deadline = time.time() + 120
    # kill it once it has checkpointed past a third of the run's aggregations
    while time.time() < deadline and proc.poll() is None:
        rounds = cut / "rounds.csv"
        if (cut / "checkpoint.pt").exists() and rounds.exists() and rounds.stat().st_size > 2_500_000:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert json.loads((cut / "summary.json").read_text())["status"] != "complete" if (cut / "summary.json").exists() \
        else True
    done = subprocess.run([sys.executable, "-m", "wirelessfl.cli", "run", "--resume", str(tmp_path / "cut"),
                           "--no-progress"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    whole_dir = tmp_path / "whole" / "fb"
    assert json.loads((whole_dir / "summary.json").read_text())["uploads"] > 100_000
    for name in ("rounds.csv", "updates.csv", "evals.csv", "devices.csv"):
        assert (cut / name).read_bytes() == (whole_dir / name).read_bytes(), name


# --- rows of one-update aggregations (sim/records/aggregation_rows.py): csv.writer's bytes -----------------


def test_the_one_update_row_format_writes_what_csv_writer_writes_for_any_number():
    import csv
    import io

    from wirelessfl.sim.records.aggregation_rows import ROW
    from wirelessfl.sim.records.columns import G6

    rng = np.random.default_rng(0)
    specials = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e-300, 1e300, 5e-324, 1e16, 123456789.0, 0.1 + 0.2]
    for i in range(2000):
        x = [specials[rng.integers(len(specials))] if rng.random() < 0.3 else float(rng.lognormal(0, 20))
             for _ in range(9)]
        if i % 2:  # numpy scalars where a part hands one over
            x = [np.float64(v) for v in x]
        round_, device, available, staleness = (int(v) for v in rng.integers(0, 10 ** 6, 4))
        row = (round_, x[0], x[1], x[2], x[3], x[4], device, x[5], x[6], x[7], x[8], available, float(staleness),
               staleness)
        values = [round_, x[0], x[1], x[2], x[3], x[4], 1, str(device), "", G6(x[5]), x[6], x[7], "", 0.0, math.nan,
                  x[8], available, 1, "", 0, 0.0, 0.0, 0.0, 0.0, 1, float(staleness), staleness]
        text = io.StringIO(newline="")
        csv.writer(text).writerow(values)
        assert ROW % row == text.getvalue(), values


@pytest.mark.parametrize("protocol", [{"name": "fedasync", "concurrency": 6},
                                      {"name": "fedbuff", "concurrency": 6, "buffer": 1}])
def test_one_update_aggregations_write_the_rows_of_their_values(tmp_path, monkeypatch, protocol):
    """Every row of rounds.csv a one-update aggregation wrote is the csv.writer row of the values an
    aggregation's row has (aggregation_rows.aggregation_values), also with devices that come and go, lost
    packets and a timed downlink, across a resume, and around rows with columns of their own."""
    import csv
    import io

    from wirelessfl.sim.records import recorder as records
    from wirelessfl.sim.records.aggregation_rows import aggregation_values

    expected = []
    real = records.Recorder._single_update_row

    def checked(self, rec):
        text = io.StringIO(newline="")
        available = 20 if rec.available is None else int(np.count_nonzero(rec.available))
        csv.writer(text).writerow(aggregation_values(rec, available))
        expected.append(text.getvalue())
        real(self, rec)

    monkeypatch.setattr(records.Recorder, "_single_update_row", checked)
    scenario = from_dict({"seed": 4, "run": {"rounds": 300, "timing_only": True, "checkpoint_every": 40},
                          "devices": {"count": 20, "compute": "shifted_exponential", "delay_mean_s": 1.0,
                                      "availability": "chain", "p_on_to_off": 0.2, "p_off_to_on": 0.5},
                          "link": {"model_bits": 200000, "packet_bits": 50000, "errors": "waterfall",
                                   "downlink": "broadcast"},
                          "protocol": protocol, "scheduler": {"name": "uniform"}})
    simulate(scenario, tmp_path / "whole", progress=False)
    whole = (tmp_path / "whole" / "rounds.csv").read_bytes()
    rows = whole.decode().split("\r\n")[1:-1]
    assert len(rows) == 300 and len(set(rows)) == 300
    assert [row + "\r\n" for row in rows] == expected
    interrupted(scenario, tmp_path / "cut", monkeypatch, after=130)
    resume(tmp_path / "cut", progress=False)
    assert (tmp_path / "cut" / "rounds.csv").read_bytes() == whole
