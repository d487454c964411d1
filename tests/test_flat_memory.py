"""Memory is bounded by the state, not by the run: records stream to the run folder, a checkpoint
refers to them by length, and an event protocol holds only the updates in flight and its buffer."""
import subprocess
import sys
import textwrap

import pytest

from wirelessfl.config import from_dict
from wirelessfl.fields import ConfigError

RUN = textwrap.dedent("""
    import resource, sys, tempfile
    from pathlib import Path
    from wirelessfl.config import from_dict
    from wirelessfl.experiments.run import simulate
    aggregations = int(sys.argv[1])
    scenario = from_dict({"seed": 0, "run": {"rounds": aggregations, "timing_only": True},
                          "devices": {"count": 200, "compute": "shifted_exponential", "delay_mean_s": 1.0},
                          "channel": {"sigma": 1e-6, "gain_floor": 1e-3}, "link": {"model_bits": 69},
                          "protocol": {"name": "fedbuff", "concurrency": 20, "buffer": 1},
                          "scheduler": {"name": "uniform"}})
    with tempfile.TemporaryDirectory() as tmp:
        result = simulate(scenario, Path(tmp) / "run", progress=False)
        assert result.summary["rounds"] == aggregations, result.summary["rounds"]
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
""")


def peak_kib(aggregations: int) -> int:
    out = subprocess.run([sys.executable, "-c", RUN, str(aggregations)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


@pytest.mark.slow
def test_a_million_aggregations_take_the_memory_of_a_hundred_thousand():
    small, large = peak_kib(100_000), peak_kib(1_000_000)
    # ten times the rows: were a row of about 1 KB kept per aggregation, 900 MB more
    assert large - small < 20 * 1024, (small, large)


def test_a_buffer_larger_than_the_devices_in_flight_is_refused():
    base = {"run": {"rounds": 3, "timing_only": True}, "scheduler": {"name": "uniform"}}
    from_dict({**base, "protocol": {"name": "fedbuff", "concurrency": 5, "buffer": 5}})
    with pytest.raises(ConfigError, match=r"^protocol.buffer = 6: at most protocol.concurrency = 5"):
        from_dict({**base, "protocol": {"name": "fedbuff", "concurrency": 5, "buffer": 6}})


def test_a_run_without_a_folder_stops_in_one_line_before_its_rows_fill_the_memory(monkeypatch):
    import wirelessfl.sim.records.recorder as records
    from wirelessfl.experiments.run import simulate

    monkeypatch.setattr(records, "physical_memory", lambda: 2 * records.PER_ROUND_BYTES * 500)  # room for 500 rows
    monkeypatch.setattr(records.Recorder, "PILOT_ROWS", 10 ** 9)  # no estimate: the guard as rows come
    scenario = from_dict({"run": {"time_budget_s": 1e12, "timing_only": True}, "scheduler": {"name": "uniform"},
                          "protocol": {"name": "fedbuff", "concurrency": 4, "buffer": 1}})
    with pytest.raises(ConfigError, match=r"^run.time_budget_s: this run keeps its records in memory \(it has no "
                                          r"folder\) and has made 500 rows"):
        simulate(scenario, progress=False)


def test_a_time_budget_without_a_folder_is_estimated_from_its_first_rows(monkeypatch):
    """A time budget cannot say up front how many rows it makes: the first 64 do (their pace), and a
    budget that would fill half the memory at that pace stops there, in one line, long before it
    would; one that fits runs to its end."""
    import wirelessfl.sim.records.recorder as records
    from wirelessfl.experiments.run import simulate

    monkeypatch.setattr(records, "physical_memory", lambda: 2 * records.PER_ROUND_BYTES * 5000)  # room for 5000 rows
    data = {"run": {"time_budget_s": 1e12, "timing_only": True}, "scheduler": {"name": "uniform"},
            "protocol": {"name": "fedbuff", "concurrency": 4, "buffer": 1}}
    with pytest.raises(ConfigError, match=r"^run.time_budget_s = 1e\+12: this run keeps its records in memory \(it "
                                          r"has no folder\), and at the pace of its first 64 rows \([0-9.e-]+ simulated "
                                          r"s each\) it would make about [0-9,]+, more than half"):
        simulate(from_dict(data), progress=False)
    pace = simulate(from_dict({**data, "run": {"rounds": 64, "timing_only": True}}), progress=False).rounds["t_end"]
    fits = float(pace.iloc[-1]) / 64 * 1000  # about 1000 rows at that pace
    done = simulate(from_dict({**data, "run": {"time_budget_s": fits, "timing_only": True}}), progress=False)
    assert done.summary["status"] == "complete" and 500 < len(done.rounds) < 5000
