"""Parameter studies: grid expansion, executors giving identical tables, crash safety and resume,
failure records, the results table and the study plots. Timing-only runs with tiny N only."""
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest


from wirelessfl import cli
from wirelessfl.config import ConfigError, dumps, from_dict
from wirelessfl.experiments import executors
from wirelessfl.experiments import sweep as sw
from wirelessfl.experiments.study_plots import plot_study

BASE = {"run": {"rounds": 20, "timing_only": True}, "devices": {"count": 10},
        "link": {"model_bits": 1000000}, "scheduler": {"name": "lyapunov", "m": 3}}
GRID = ["scheduler.V=1,100", "scheduler.lam=1,10"]
# wall_time_s is the only column allowed to differ between two sweeps of the same runs
COMPARED = [c for c in sw.METRICS if c != "wall_time_s"]


def scenario(**extra):
    data = json.loads(json.dumps(BASE))
    for key, value in extra.items():
        if isinstance(value, dict):
            data.setdefault(key, {}).update(value)
        else:
            data[key] = value
    return from_dict(data)


def same_results(a: pd.DataFrame, b: pd.DataFrame) -> None:
    cols = ["scheduler.V", "scheduler.lam", "seed", "status", "key"] + COMPARED
    pd.testing.assert_frame_equal(a[cols].reset_index(drop=True), b[cols].reset_index(drop=True),
                                  check_exact=True)


# --- grid -----------------------------------------------------------------------------------


def test_parse_grid_forms():
    assert sw.parse_grid(["scheduler.V=1,1e3, 10", "learning.dataset=mnist"]) == [
        ("scheduler.V", (1, 1000.0, 10)), ("learning.dataset", ("mnist",))]
    assert sw.parse_grid({"scheduler.lam": [1, 2]}) == [("scheduler.lam", (1, 2))]
    assert sw.parse_grid([("scheduler.m", 3)]) == [("scheduler.m", (3,))]
    # a list value keeps its commas
    assert sw.parse_grid(["devices.compute_s_per_device=[1, 2],[3, 4]"]) == [
        ("devices.compute_s_per_device", ([1, 2], [3, 4]))]
    for bad in (["scheduler.V"], ["scheduler.V="], ["scheduler.V=1,,2"], ["seed=1,2"], ["1x=2"]):
        with pytest.raises(ConfigError):
            sw.parse_grid(bad)


def test_expand_merges_scenario_grid_and_numbers_seeds():
    base = scenario(seed=7, sweep={"scheduler": {"V": [1, 10, 100]}, "scheduler.m": [2]})
    grid, members = sw.expand(base, ["scheduler.V=5,50", "scheduler.lam=1,10,100"], seeds=2)
    # --grid replaced the file's values of scheduler.V and added scheduler.lam
    assert dict(grid) == {"scheduler.V": (5, 50), "scheduler.m": (2,), "scheduler.lam": (1, 10, 100)}
    assert len(members) == 2 * 1 * 3 * 2
    assert {m.seed for m in members} == {7, 8}
    assert len({m.key for m in members}) == len(members)
    m = members[-1]
    assert (m.scenario.scheduler.options.V, m.scenario.scheduler.options.lam, m.scenario.seed) == (50.0, 100.0, 8)
    assert m.params == {"scheduler.V": 50, "scheduler.m": 2, "scheduler.lam": 100}
    assert m.key == sw.member_key(m.scenario) == sw.run_key(dumps(m.scenario, only_changed=True))
    assert not m.scenario.sweep
    # the key is the resolved scenario: forcing timing_only on a training scenario changes it
    training = scenario(run={"timing_only": False})
    k1 = sw.expand(training, ["scheduler.V=1"])[1][0].key
    k2 = sw.expand(training, ["scheduler.V=1"], timing_only=True)[1][0].key
    assert k1 != k2
    # explicit seeds
    assert [m.seed for m in sw.expand(base, seeds=[3, 11])[1]][:2] == [3, 11]


@pytest.mark.parametrize("grid, named", [
    (["scheduler.VV=1,2"], "scheduler.VV"),
    (["scheduler.m=3,0"], "scheduler.m"),
    (["scheduler.V=abc"], "scheduler.V"),
    (["scheduler.V=1,1.0"], "scheduler.V"),
    (["link.p_bar=1,1e9"], "link.p_bar"),
])
def test_bad_grid_raises_config_error_naming_the_key(grid, named, tmp_path):
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        sw.sweep(scenario(), grid=grid, out_dir=tmp_path / "s", progress=False)
    assert not (tmp_path / "s").exists()  # nothing ran, nothing was written


def test_cli_sweep(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text(textwrap.dedent("""
        [run]
        rounds = 5
        timing_only = true
        [devices]
        count = 4
        [link]
        model_bits = 1000
    """))
    assert cli.main(["sweep", str(path), "--grid", "scheduler.nope=1", "--out", str(tmp_path / "o")]) == 2
    assert "scheduler.nope" in capsys.readouterr().err
    # the file's [sweep] table plus --grid, seeds from the file's seed, --set on the base scenario
    path.write_text("seed = 5\n" + path.read_text() + "[sweep]\nscheduler.V = [1, 10]\n")
    args = ["sweep", str(path), "--grid", "scheduler.lam=2,3", "--seeds", "2", "--set", "scheduler.m=2",
            "--out", str(tmp_path / "o"), "--no-progress"]
    assert cli.main(args) == 0
    assert "8 runs: 8 ran" in capsys.readouterr().out
    table = sw.load_table(tmp_path / "o")
    assert list(table.columns[:3]) == ["scheduler.V", "scheduler.lam", "seed"] and len(table) == 8
    assert set(table["seed"]) == {5, 6} and set(table["scheduler.V"]) == {1, 10}
    summary = json.loads((tmp_path / "o/runs" / table["key"][0] / "summary.json").read_text())
    assert summary["m"] == 2
    assert cli.main(args) == 0
    assert "0 ran, 8 already finished" in capsys.readouterr().out


# --- executors ------------------------------------------------------------------------------


def test_serial_sweep_table_resume_and_cli(tmp_path, capsys):
    out = tmp_path / "sweep"
    res = sw.sweep(scenario(), grid=GRID, seeds=2, out_dir=out, progress=False)
    assert (res.ran, res.skipped, res.failed) == (8, 0, 0)
    table = sw.load_table(out)
    expected_cols = ["scheduler.V", "scheduler.lam", "seed", "status", *sw.METRICS, "key", "error"]
    assert list(table.columns) == expected_cols
    assert len(table) == 8 and (table["status"] == "complete").all()
    assert sorted(set(zip(table["scheduler.V"], table["scheduler.lam"], table["seed"]))) == [
        (v, lam, s) for v in (1, 100) for lam in (1, 10) for s in (0, 1)]
    assert (table["rounds"] == 20).all()
    assert (table["mean_round_s"] - table["sim_time_s"] / 20).abs().max() < 1e-12
    # every row points at a complete run folder holding that scenario
    for _, row in table.iterrows():
        summary = json.loads((out / "runs" / row["key"] / "summary.json").read_text())
        assert summary["status"] == "complete" and summary["seed"] == row["seed"]
    same_results(table, res.table)
    info = json.loads((out / "sweep.json").read_text())
    assert info["grid"] == [["scheduler.V", [1, 100]], ["scheduler.lam", [1, 10]]] and info["seeds"] == [0, 1]

    # same call again: nothing runs, the table is the same
    again = sw.sweep(scenario(), grid=GRID, seeds=2, out_dir=out, progress=False)
    assert (again.ran, again.skipped) == (0, 8)
    same_results(again.table, table)
    # a bigger grid in the same folder reuses the 8 finished runs
    more = sw.sweep(scenario(), grid=["scheduler.V=1,100,1000", "scheduler.lam=1,10"], seeds=2,
                    out_dir=out, progress=False)
    assert (more.ran, more.skipped) == (4, 8)

    # the table command prints it, as text and as CSV
    capsys.readouterr()
    assert cli.main(["table", str(out), "--csv"]) == 0
    from io import StringIO
    printed = pd.read_csv(StringIO(capsys.readouterr().out), keep_default_na=False, na_values=[""])
    assert len(printed) == 12
    assert cli.main(["table", str(out), "--mean"]) == 0
    text = capsys.readouterr().out
    assert "mean_time_avg_power" in text and "±" in text and len(text.strip().splitlines()) == 1 + 6


def test_aggregate_gives_the_mean_and_population_std_over_seeds():
    table = pd.DataFrame({"scheduler.V": [1.0, 1.0, 10.0, 10.0], "seed": [0, 1, 0, 1],
                          "status": ["complete", "complete", "complete", "failed"],
                          "mean_round_s": [1.0, 3.0, 5.0, 99.0]})
    out = sw.aggregate(table, ["scheduler.V"]).set_index("scheduler.V")
    assert out.loc[1.0, "mean_round_s_mean"] == 2.0
    assert out.loc[1.0, "mean_round_s_std"] == 1.0  # population std of 1 and 3 (the sample std is 1.41)
    # the failed run is left out, and one seed has no spread (not a spread of 0)
    assert out.loc[10.0, "seeds"] == 1 and math.isnan(out.loc[10.0, "mean_round_s_std"])


def test_process_pool_matches_serial(tmp_path):
    serial = sw.sweep(scenario(), grid=GRID, seeds=2, out_dir=tmp_path / "a", progress=False)
    pool = sw.sweep(scenario(), grid=GRID, seeds=2, out_dir=tmp_path / "b", executor="process",
                    workers=2, progress=False)
    assert pool.failed == 0
    same_results(serial.table, pool.table)
    same_results(sw.load_table(tmp_path / "a"), sw.load_table(tmp_path / "b"))
    # the records themselves, not only the summaries, are identical
    key = serial.table["key"].iloc[-1]
    for name in ("rounds.csv", "devices.csv"):
        assert (tmp_path / "a/runs" / key / name).read_bytes() == (tmp_path / "b/runs" / key / name).read_bytes()


@pytest.mark.slow
def test_dask_local_cluster_matches_serial(tmp_path):
    pytest.importorskip("distributed")
    serial = sw.sweep(scenario(), grid=GRID, seeds=2, out_dir=tmp_path / "a", progress=False)
    dask = sw.sweep(scenario(), grid=GRID, seeds=2, out_dir=tmp_path / "b", executor="dask",
                    workers=2, progress=False)
    assert dask.failed == 0, dask.table["error"].tolist()
    same_results(serial.table, dask.table)
    same_results(serial.table, sw.load_table(tmp_path / "b"))
    assert (tmp_path / "b" / ".dask-scratch").is_dir()  # the workers' scratch space, inside the sweep folder


# --- failures and crashes -------------------------------------------------------------------


def test_failing_run_is_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch):
    real = executors.simulate

    def flaky(member, out_dir, **kw):
        if member.scheduler.options.V == 100.0 and member.scheduler.options.lam == 10.0:
            raise RuntimeError("solver diverged")
        return real(member, out_dir, **kw)

    monkeypatch.setattr(executors, "simulate", flaky)
    out = tmp_path / "s"
    with pytest.warns(UserWarning, match="2 of 8 runs failed; the errors are in"):
        res = sw.sweep(scenario(), grid=GRID, seeds=2, out_dir=out, progress=False)
    assert (res.ran, res.failed) == (6, 2)
    table = sw.load_table(out)
    bad = table[table["status"] == "failed"]
    assert set(zip(bad["scheduler.V"], bad["scheduler.lam"])) == {(100, 10)}
    assert bad["error"].str.contains("RuntimeError: solver diverged").all()
    assert bad["final_accuracy"].isna().all() and bad["sim_time_s"].isna().all()
    assert (table["status"] == "complete").sum() == 6
    for key in bad["key"]:
        record = json.loads((out / "failed" / f"{key}.json").read_text())
        assert record["params"] == {"scheduler.V": 100, "scheduler.lam": 10}
        assert "solver diverged" in record["traceback"] and "[scheduler]" in record["scenario"]
        assert not (out / "runs" / key).exists()
    assert not [p for p in (out / "runs").iterdir() if p.name.startswith(".")]  # no temporary folders

    # once the cause is gone, running the sweep again redoes only the failed runs
    monkeypatch.setattr(executors, "simulate", real)
    again = sw.sweep(scenario(), grid=GRID, seeds=2, out_dir=out, progress=False)
    assert (again.ran, again.skipped, again.failed) == (2, 6, 0)
    assert not list((out / "failed").iterdir())


KILL_SCRIPT = """
import sys
from wirelessfl.config import from_dict
from wirelessfl.experiments.sweep import sweep
base = {base!r}
sweep(from_dict(base), grid={grid!r}, seeds=2, out_dir=sys.argv[1], executor=sys.argv[2],
      workers=2, progress=False)
"""


def descendants(pid: int) -> set[int]:
    """Processes below ``pid`` (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def finished_runs(runs: Path) -> list[Path]:
    return [p for p in runs.iterdir() if not p.name.startswith(".")] if runs.exists() else []


@pytest.mark.parametrize("executor", ["serial", pytest.param("process", marks=[
    pytest.mark.slow, pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")])])
def test_sigkill_then_resume_equals_uninterrupted(tmp_path, executor):
    # 16 runs of 150 rounds (~0.1 s each): killed with some, not all, finished
    base = json.loads(json.dumps(BASE))
    base["run"]["rounds"] = 150
    grid = ["scheduler.V=1,10,100,1000", "scheduler.lam=1,10"]
    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT.format(base=base, grid=grid), str(out), executor],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while len(finished_runs(out / "runs")) < 3:
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "the sweep did not finish 3 runs in time"
        time.sleep(0.02)
    workers = descendants(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    if executor == "process":  # the pool's workers (and the forkserver) go with the sweep
        assert workers
        deadline = time.monotonic() + 15
        while any(alive(pid) for pid in workers):
            assert time.monotonic() < deadline, f"orphans left running: {[p for p in workers if alive(p)]}"
            time.sleep(0.1)
    done = finished_runs(out / "runs")
    assert 3 <= len(done) < 16, "killed too late to test anything"
    # what is there is whole: every published run is complete and the table parses
    for run in done:
        assert json.loads((run / "summary.json").read_text())["status"] == "complete"
    partial = sw.load_table(out)
    assert len(partial) == 16 and (partial["status"] == "pending").any()

    resumed = sw.sweep(from_dict(base), grid=grid, seeds=2, out_dir=out, progress=False)
    assert resumed.skipped >= 3 and resumed.ran + resumed.skipped == 16 and resumed.failed == 0
    assert not [p for p in (out / "runs").iterdir() if p.name.startswith(".")]
    clean = sw.sweep(from_dict(base), grid=grid, seeds=2, out_dir=tmp_path / "clean", progress=False)
    same_results(sw.load_table(out), clean.table)


# --- plots ----------------------------------------------------------------------------------


def test_study_plots(tmp_path, capsys):
    out = tmp_path / "s"
    sw.sweep(scenario(), grid=GRID, seeds=2, out_dir=out, progress=False)
    path = plot_study(out, x="scheduler.V", y=["mean_time_avg_power", "mean_round_s"], hue="scheduler.lam")
    assert path.exists() and path.stat().st_size > 10000 and path.parent == out
    heat = plot_study(out, x="scheduler.V", y="mean_round_s", hue="scheduler.lam", kind="heatmap",
                      out=tmp_path / "h.png")
    assert heat == tmp_path / "h.png" and heat.exists()
    with pytest.raises(ValueError, match="scheduler.lam also varies"):
        plot_study(out, x="scheduler.V", y="mean_round_s")
    assert plot_study(out, x="scheduler.V", y="mean_round_s", where={"scheduler.lam": 10}).exists()
    with pytest.raises(ValueError, match="not a column"):
        plot_study(out, x="scheduler.V", y="nope", hue="scheduler.lam")
    with pytest.raises(ValueError, match="no values"):  # timing-only runs have no accuracy
        plot_study(out, x="scheduler.V", y="final_accuracy", hue="scheduler.lam")
    # through the CLI: a sweep folder with --x/--y goes to the study plot
    target = tmp_path / "cli.png"
    assert cli.main(["plot", str(out), "--x", "scheduler.V", "--y", "mean_distinct_per_round",
                     "--hue", "scheduler.lam", "--out", str(target)]) == 0
    assert target.exists()
    assert cli.main(["plot", str(out), "--x", "scheduler.V", "--y", "rounds", "--hue", "scheduler.lam",
                     "--heatmap", "--out", str(tmp_path / "cli_h.png")]) == 0
    assert cli.main(["plot", str(out), "--x", "scheduler.V"]) == 2
    assert "--y" in capsys.readouterr().err


def test_variants_are_a_parameter(tmp_path):
    base = scenario(variants={"lyap": {"scheduler.name": "lyapunov"}, "unif": {"scheduler.name": "uniform"}})
    res = sw.sweep(base, grid=["scheduler.V=1,100"], out_dir=tmp_path / "s", progress=False)
    table = sw.load_table(tmp_path / "s")
    assert list(table.columns[:3]) == ["variant", "scheduler.V", "seed"]
    # uniform takes no V: one run, with V left empty, not a copy per value
    assert table["variant"].tolist() == ["lyap", "lyap", "unif"]
    assert table["scheduler.V"].tolist()[:2] == [1, 100] and pd.isna(table["scheduler.V"].iloc[2])
    assert res.failed == 0 and json.loads((tmp_path / "s/sweep.json").read_text())["variants"] == ["lyap", "unif"]
    names = {json.loads((tmp_path / "s/runs" / k / "summary.json").read_text())["scheduler"] for k in table["key"]}
    assert names == {"lyapunov", "uniform"}


def test_a_finished_sweep_is_not_replaced_by_another_unasked(tmp_path, capsys):
    from wirelessfl.experiments.run import OutputExists

    out = tmp_path / "sw"
    first = sw.sweep(scenario(), grid=GRID, out_dir=out, progress=False)
    kept = {name: (out / name).read_text() for name in ("table.csv", "sweep.json", "scenario.toml")}
    # the same sweep again, with more seeds: it continues (the finished runs are reused; a grid that
    # extends it too: test_serial_sweep_table_resume_and_cli)
    more = sw.sweep(scenario(), grid=GRID, seeds=2, out_dir=out, progress=False)
    assert more.skipped == len(first.table) and len(more.table) == 2 * len(first.table)
    kept["table.csv"] = (out / "table.csv").read_text()
    kept["sweep.json"] = (out / "sweep.json").read_text()
    # another grid, another scenario: refused, nothing touched
    for other in (lambda: sw.sweep(scenario(), grid=["scheduler.V=5"], out_dir=out, progress=False),
                  lambda: sw.sweep(scenario(seed=7), grid=GRID, out_dir=out, progress=False),
                  lambda: sw.sweep(scenario(run={"rounds": 21}), grid=GRID, out_dir=out, progress=False)):
        with pytest.raises(OutputExists, match="another scenario or grid.*--overwrite"):
            other()
        assert {name: (out / name).read_text() for name in kept} == kept
    # the CLI says so in one line, exit 2; --overwrite replaces the table
    (tmp_path / "s.toml").write_text(dumps(scenario()))
    assert cli.main(["sweep", str(tmp_path / "s.toml"), "--grid", "scheduler.V=5", "--out", str(out),
                     "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--overwrite" in err[0]
    assert cli.main(["sweep", str(tmp_path / "s.toml"), "--grid", "scheduler.V=5", "--out", str(out),
                     "--no-progress", "--overwrite"]) == 0
    assert pd.read_csv(out / "table.csv")["scheduler.V"].tolist() == [5]


def test_a_heatmap_leaves_out_variants_that_do_not_take_its_parameters_and_says_so():
    """uniform takes neither V nor lam: its runs had a column labelled "nan" of their own."""
    import matplotlib.pyplot as plt

    from wirelessfl.experiments.study_plots import _heatmap

    rows = [{"variant": "lyap", "scheduler.V": v, "scheduler.lam": lam, "rounds": v + lam}
            for v in (1.0, 100.0) for lam in (1.0, 10.0)]
    rows += [{"variant": "unif", "scheduler.V": np.nan, "scheduler.lam": np.nan, "rounds": 7.0}]
    fig, ax = plt.subplots()
    _heatmap(fig, ax, pd.DataFrame(rows), "scheduler.V", "rounds", "scheduler.lam", False)
    labels = [t.get_text() for t in ax.get_xticklabels()] + [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["1", "100", "1", "10"]
    cells = sorted(float(t.get_text()) for t in ax.texts if t.get_text()[0].isdigit())
    assert cells == [2.0, 11.0, 101.0, 110.0]  # the four lyap cells, no uniform cell
    assert any("left out, not taking scheduler.V or scheduler.lam: unif" in t.get_text() for t in ax.texts)
    plt.close(fig)
