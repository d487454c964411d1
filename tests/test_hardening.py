"""Hostile input: names that would escape --out, resumes from bad checkpoints or tampered folders,
runs that could loop forever, absurd sizes, non-finite energies, unwritable outputs. Each is one
line on stderr, exit status 2, and nothing written anywhere (or, for a resume, nothing changed)."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fakes import cli  # the wirelessfl command, in this process
from wirelessfl import load_scenario, simulate
from wirelessfl.config import ConfigError, from_dict

BASE = textwrap.dedent('''
    seed = 1
    [run]
    rounds = 12
    timing_only = true
    checkpoint_every = 4
    [devices]
    count = 6
    [link]
    model_bits = 10000
    [scheduler]
    m = 3
''')


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` with the sha256 of its bytes (links by their target)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            out[str(path.relative_to(root))] = f"link -> {os.readlink(path)}"
        elif path.is_file():
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


HOSTILE_NAMES = ["../../escape", "/tmp/absolute-escape", "..", ".", "", "a/b", "a\\b", "x\x00y", "x" * 300,
                 "-rf", ".hidden", "name with space"]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_names_write_nothing_anywhere(tmp_path, name):
    sandbox = tmp_path / "sandbox"
    work = sandbox / "deep" / "er" / "work"
    work.mkdir(parents=True)
    quoted = name.replace("\\", "\\\\").replace("\x00", "\\u0000")
    (work / "s.toml").write_text(BASE + f'\n[variants."{quoted}"]\nseed = 2\n[variants.ok]\nseed = 3\n')
    (work / "n.toml").write_text(f'name = "{quoted}"\n' + BASE)
    before = tree(sandbox)
    for args in (("run", "s.toml", "--out", "out"), ("run", "n.toml"), ("sweep", "n.toml", "--timing-only")):
        proc = cli(*args, cwd=work)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert tree(sandbox) == before  # not a file more, anywhere in the sandbox
    assert not Path("/tmp/absolute-escape").exists()


def test_variant_names_that_name_one_folder_are_refused():
    with pytest.raises(ConfigError, match="names the same folder as variants.Fast"):
        from_dict({"run": {"rounds": 1}, "variants": {"Fast": {}, "fast": {}}})


def make_run(tmp_path) -> Path:
    (tmp_path / "s.toml").write_text(BASE)
    proc = cli("run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "fam"), "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "fam" / "s"
    return run


def interrupted(tmp_path) -> Path:
    """A run with a checkpoint at round 8 and records of 10 rounds on disk (killed after round 10)."""
    from wirelessfl.sim.records import recorder as records_module

    real = records_module.Recorder.on_round
    calls = {"n": 0}

    def stop(self, rec):
        calls["n"] += 1
        if calls["n"] == 11:
            raise KeyboardInterrupt
        return real(self, rec)

    records_module.Recorder.on_round = stop
    try:
        with pytest.raises(KeyboardInterrupt):
            simulate(load_scenario_text(tmp_path), tmp_path / "run", progress=False)
    finally:
        records_module.Recorder.on_round = real
    (tmp_path / "run" / "summary.json").unlink()  # as after kill -9
    return tmp_path / "run"


def load_scenario_text(tmp_path):
    (tmp_path / "s.toml").write_text(BASE)
    return load_scenario(tmp_path / "s.toml")


def damage_truncated(run):
    data = (run / "checkpoint.pt").read_bytes()
    (run / "checkpoint.pt").write_bytes(data[: len(data) // 2])


def damage_empty(run):
    (run / "checkpoint.pt").write_bytes(b"")


def damage_garbage(run):
    (run / "checkpoint.pt").write_bytes(os.urandom(4096))


def damage_pickle(run):
    import pickle

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {run / 'PWNED'}",))

    (run / "checkpoint.pt").write_bytes(pickle.dumps({"engine": Evil()}))


def damage_counters(run):
    import torch

    state = torch.load(run / "checkpoint.pt", weights_only=True)
    state["engine"]["rounds_done"] = 10  # 8 rounds of records, counters at 10
    torch.save(state, run / "checkpoint.pt")


def damage_records(run):
    rows = (run / "rounds.csv").read_text().splitlines()
    (run / "rounds.csv").write_text("\n".join(rows[:4]) + "\n")  # 3 rounds left: fewer than the checkpoint's 8


def damage_symlink(run):
    victim = run.parent / "victim.txt"
    victim.write_text("precious\n")
    (run / "rounds.csv").unlink()
    (run / "rounds.csv").symlink_to(victim)


def damage_arrays(run):
    (run / "decisions.h5").write_bytes(b"")


@pytest.mark.parametrize("damage", [damage_truncated, damage_empty, damage_garbage, damage_pickle, damage_counters,
                                    damage_records, damage_symlink, damage_arrays])
def test_a_failed_resume_leaves_the_folder_as_it_was(tmp_path, damage):
    run = interrupted(tmp_path)
    damage(run)
    before = tree(tmp_path)
    proc = cli("run", "--resume", str(run), "--no-progress", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr and str(run) in lines[0], proc.stderr
    assert tree(tmp_path) == before
    assert not (run / "PWNED").exists()
    if damage is damage_symlink:
        assert (tmp_path / "victim.txt").read_text() == "precious\n"


def test_a_sound_resume_drops_the_rounds_after_the_checkpoint(tmp_path):
    run = interrupted(tmp_path)
    assert len(pd.read_csv(run / "rounds.csv")) == 10  # two rounds past the checkpoint of round 8
    proc = cli("run", "--resume", str(run), "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    simulate(load_scenario_text(tmp_path), tmp_path / "full", progress=False)
    pd.testing.assert_frame_equal(pd.read_csv(run / "rounds.csv"), pd.read_csv(tmp_path / "full" / "rounds.csv"))
    from wirelessfl import load_decisions

    assert load_decisions(run)["gains"].shape == (12, 6)


def test_a_run_in_which_nobody_can_ever_be_scheduled_ends(tmp_path):
    # availability near zero: almost every round schedules nobody, and still the time budget ends it
    sc = from_dict({"run": {"time_budget_s": 2.0, "timing_only": True}, "devices": {"count": 4,
                    "p_on_to_off": 1.0, "p_off_to_on": 1e-9}, "link": {"model_bits": 1000}})
    res = simulate(sc, progress=False)
    idle = res.rounds[res.rounds["num_selected"] == 0]
    assert len(idle) > 0 and (idle["idle_s"] == sc.run.idle_round_s).all()
    assert res.summary["sim_time_s"] >= 2.0 and len(res.rounds) < 2.0 / sc.run.idle_round_s + 10
    with pytest.raises(ConfigError, match="no device of devices.count = 4 could ever take part"):
        from_dict({"run": {"rounds": 2}, "devices": {"count": 4, "excluded": [0, 1], "excluded_count": 2}})


@pytest.mark.parametrize("setting, words", [
    ({"devices": {"count": 10 ** 9}}, "devices.count = 1000000000: a run with 1000000000 devices needs about"),
    ({"scheduler": {"m": 10 ** 12}}, "scheduler.m = 1000000000000: drawing"),
    ({"run": {"rounds": 10 ** 12}}, "run.rounds = 1000000000000: keeping the records"),
    ({"devices": {"compute": "cpu", "cpu_hz": 1e200}}, "computation energy kappa f^2 c S of a round is not a finite"),
    ({"devices": {"compute": "cpu", "kappa": 1e300}}, "computation energy kappa f^2 c S of a round is not a finite"),
    ({"channel": {"path_loss": True, "reference_gain_db": -4000.0}}, "leaves the range of numbers"),
    ({"name": "x" * 300}, "becomes a folder name"),
    ({"learning": {"samples_per_device": 10 ** 12}}, "learning.samples_per_device = 1000000000000: 100 devices x"),
    ({"run": {"rounds": 3, "threads": 5000}}, "run.threads = 5000: more than 4 x this machine's"),
    ({"run": {"rounds": 3, "device": "gpu"}}, "run.device = 'gpu': not a torch device such as cpu, cuda or cuda:0"),
    ({"run": {"rounds": 3, "device": "meta"}}, "run.device = 'meta': allowed device types are cpu, cuda and mps"),
])
def test_absurd_inputs_are_one_line_errors_before_anything_runs(tmp_path, setting, words):
    data = {"run": {"rounds": 3}}
    for key, value in setting.items():
        if isinstance(value, dict):
            data.setdefault(key, {}).update(value)
        else:
            data[key] = value
    with pytest.raises(ConfigError) as err:
        from_dict(data)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_rounds_a_time_budget_and_a_deadline_imply_are_bounded():
    """No round outlasts its deadline: 1 s in rounds of 1e-12 s is 1e12 rounds of records at least."""
    with pytest.raises(ConfigError, match=r"^run.round_deadline_s = 1e-12: a time budget of 1 s in rounds of at most "
                                          r"1e-12 s \(1,000,000,000,000 rounds or more\), keeping their records, needs"):
        from_dict({"run": {"time_budget_s": 1.0, "round_deadline_s": 1e-12}})
    assert from_dict({"run": {"time_budget_s": 1.0, "round_deadline_s": 1e-12, "rounds": 10}})  # rounds bound it


def test_a_cuda_device_is_checked_at_load_against_the_machine(monkeypatch):
    import torch

    for count in (0, 2):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
        expected = "this machine has no CUDA device" if count == 0 else r"this machine has 2 CUDA device\(s\): cuda:0 to cuda:1"
        with pytest.raises(ConfigError, match=r"^run.device = 'cuda:99': " + expected):
            from_dict({"run": {"rounds": 3, "device": "cuda:99"}})
    assert from_dict({"run": {"rounds": 3, "device": "cuda:1"}}).run.device == "cuda:1"  # two devices here
    assert from_dict({"run": {"rounds": 3, "device": "cuda:99", "timing_only": True}})  # no training: no device


def test_out_must_be_a_writable_folder(tmp_path):
    (tmp_path / "s.toml").write_text(BASE)
    (tmp_path / "a-file").write_text("x")
    proc = cli("run", "s.toml", "--out", "a-file", cwd=tmp_path)
    assert proc.returncode == 2 and "is a file, not a folder" in proc.stderr
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        proc = cli("run", "s.toml", "--out", "locked/out", cwd=tmp_path)
        assert proc.returncode == 2 and "not writable" in proc.stderr


def test_summary_with_non_finite_numbers_is_strict_json(tmp_path):
    import json

    res = simulate(from_dict({"run": {"rounds": 2, "timing_only": True}, "devices": {"count": 3},
                              "link": {"model_bits": 1000}}), tmp_path / "r", progress=False)
    text = (tmp_path / "r" / "summary.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text)["non_finite"]["label_coverage"] == "nan"
    assert np.isnan(res.summary["label_coverage"])


def test_the_run_command_s_ambiguous_forms_are_one_line_errors(tmp_path):
    (tmp_path / "s.toml").write_text("[run]\nrounds = 2\ntiming_only = true\n[devices]\ncount = 4\n")
    assert cli("run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"), "--no-progress").returncode == 0
    run_dir = tmp_path / "out"
    # SCENARIO and --resume together: which one? say so, do not ignore one
    both = cli("run", str(tmp_path / "s.toml"), "--resume", str(run_dir))
    assert both.returncode == 2 and "not both" in both.stderr and both.stderr.strip().count("\n") == 0
    # a run folder given as the scenario: point to --resume
    folder = cli("run", str(run_dir))
    assert folder.returncode == 2 and f"wirelessfl run --resume {run_dir}" in folder.stderr
    assert folder.stderr.strip().count("\n") == 0


def test_a_grid_key_given_twice_is_refused(tmp_path):
    from wirelessfl.experiments.sweep import parse_grid

    with pytest.raises(ConfigError, match="grid scheduler.V: given twice"):
        parse_grid(["scheduler.V=1,10", "scheduler.lam=1", "scheduler.V=100"])
    assert parse_grid(["scheduler.V=1,10", "scheduler.lam=1"]) == [("scheduler.V", (1, 10)), ("scheduler.lam", (1,))]


def test_absurd_sweep_seeds_and_trace_rounds_are_refused_before_allocating(tmp_path):
    from wirelessfl.experiments.sweep import expand
    from wirelessfl.experiments.recording import record_traces

    sc = from_dict({"run": {"rounds": 2, "timing_only": True}, "devices": {"count": 4}})
    with pytest.raises(ConfigError, match=r"seeds = 100000000000: a sweep of 100,000,000,000 runs needs about"):
        expand(sc, ["scheduler.V=1"], seeds=10 ** 11)
    with pytest.raises(ConfigError, match=r"--rounds = 1000000000000: recording 1,000,000,000,000 rounds of 4 devices"):
        record_traces(sc, 10 ** 12, tmp_path / "t")
    assert not (tmp_path / "t").exists()


@pytest.mark.filterwarnings("ignore:overflow encountered")  # 1e308 + 1e308, on purpose
@pytest.mark.parametrize("protocol", ["sync", "fedbuff"])
def test_a_clock_that_leaves_the_floats_stops_the_run_instead_of_completing_it(tmp_path, protocol):
    from wirelessfl.sim.round.parts import NonFiniteTime

    sc = from_dict({"run": {"rounds": 5, "timing_only": True}, "devices": {"count": 4, "compute_s": 1e308},
                    "link": {"model_bits": 1000}, "scheduler": {"name": "uniform", "m": 2},
                    "protocol": {"name": protocol, **({"concurrency": 2, "buffer": 1} if protocol == "fedbuff" else {})}})
    with pytest.raises(NonFiniteTime, match="the simulated clock became inf"):
        simulate(sc, tmp_path / "run", progress=False)
    summary = __import__("json").loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "failed"


FULL_DISK = textwrap.dedent('''
    seed = 2
    [run]
    rounds = 3000
    timing_only = true
    [devices]
    count = 100
    [link]
    model_bits = 10000
    [scheduler]
    name = "uniform"
    m = 10
''')


@pytest.mark.skipif(sys.platform != "linux", reason="a file-size limit stands in for a full disk")
@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_full_disk_is_one_line_and_keeps_what_was_written(tmp_path, command):
    """Writes fail mid-run (RLIMIT_FSIZE: a file may not grow past 150 kB, as on a disk that fills up).
    Before, a sweep died in libhdf5 with a segmentation fault and a run printed a traceback."""
    (tmp_path / "s.toml").write_text(FULL_DISK)
    extra = ["--grid", "scheduler.m=5,10"] if command == "sweep" else []
    limited = ("import resource, runpy, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
               "resource.setrlimit(resource.RLIMIT_FSIZE, (150_000, 150_000)); "
               "sys.argv = ['wirelessfl', *sys.argv[1:]]; runpy.run_module('wirelessfl.cli', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", limited, command, "s.toml", "--out", "out", "--no-progress", *extra],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "File too large" in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2  # one line (a run: one per variant, here one)
    assert not [p for p in (tmp_path / "out").rglob("*") if ".tmp" in p.name]  # no temporary files left
    if command == "run":  # the rounds written before the disk filled are kept, and readable
        rounds = pd.read_csv(tmp_path / "out" / "s" / "rounds.csv")
        assert len(rounds) > 50 and list(rounds["round"]) == list(range(len(rounds)))  # updates.csv fills first


DAMAGE = {
    "rounds.csv": 'round,t_start\n1,"never closed\n',
    "evals.csv": 'time_s,accuracy\n"x\n',
    "summary.json": '{"status": "compl',
}


@pytest.mark.parametrize("name", [*DAMAGE, "summary.json as a list"])
def test_damaged_run_files_are_one_line_errors_for_every_reader(tmp_path, name):
    from wirelessfl import load_run
    from wirelessfl.files import DamagedFile

    (tmp_path / "s.toml").write_text("[run]\nrounds = 3\ntiming_only = true\n[devices]\ncount = 4\n")
    assert cli("run", "s.toml", "--out", "r", "--no-progress", cwd=tmp_path).returncode == 0
    file = name.split()[0]
    (tmp_path / "r" / "s" / file).write_text("[1, 2]" if "list" in name else DAMAGE[name])
    with pytest.raises(DamagedFile, match=f"r/s/{file}: damaged"):
        load_run(tmp_path / "r" / "s")
    for command in (["plot", "r"], ["run", "s.toml", "--out", "r", "--no-progress"]):
        done = cli(*command, cwd=tmp_path)
        if file == "summary.json" and command[0] == "run":  # an unreadable summary: the run is not complete
            assert done.returncode == 2 and "interrupted run" in done.stderr
        else:
            assert done.returncode == 2 and f"r/s/{file}: damaged" in done.stderr and "--overwrite" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert cli("run", "s.toml", "--out", "r", "--no-progress", "--overwrite", cwd=tmp_path).returncode == 0
    assert load_run(tmp_path / "r" / "s").summary["status"] == "complete"


def test_a_damaged_sweep_table_is_one_line(tmp_path):
    (tmp_path / "s.toml").write_text("[run]\nrounds = 2\ntiming_only = true\n[devices]\ncount = 4\n")
    assert cli("sweep", "s.toml", "--grid", "scheduler.m=1,2", "--out", "sw", "--no-progress",
                cwd=tmp_path).returncode == 0
    (tmp_path / "sw" / "table.csv").write_text("key,seed\nabc,0\n")  # no status column
    done = cli("table", "sw", cwd=tmp_path)
    assert done.returncode == 2 and "sw/table.csv: damaged: it has no column 'status'" in done.stderr
    (tmp_path / "sw" / "table.csv").write_text('key,"open\n')
    done = cli("plot", "sw", "--x", "scheduler.m", "--y", "time_to_target_s", cwd=tmp_path)
    assert done.returncode == 2 and "sw/table.csv: damaged" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_reproduce_data_that_is_not_a_recipe_s_is_one_line(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "fair_selection_table1.csv").write_text("variant,seed\nrandom,0\n")
    done = cli("reproduce", "fair_selection:table1", "--no-run", "--data", "d", "--out", "o", cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "d/fair_selection_table1.csv is not the data of recipe fair_selection:table1 (no column" in done.stderr
    (tmp_path / "d" / "fair_selection_table1.csv").write_bytes(bytes(range(256)) * 8)
    done = cli("reproduce", "fair_selection:table1", "--no-run", "--data", "d", "--out", "o", cwd=tmp_path)
    assert done.returncode == 2 and "cannot be read as a CSV" in done.stderr and "Traceback" not in done.stderr


def test_a_scheduler_address_is_checked_before_anything_is_written(tmp_path, monkeypatch):
    """An address that does not parse, a port where nothing listens, a service that never speaks (an
    HTTP server: Client() waited forever) and one that speaks another protocol (Client() tried to
    allocate 2.82 EiB) are one-line errors, and the sweep folder is not created."""
    import socket
    import threading

    from wirelessfl.experiments import executors
    from wirelessfl.experiments.sweep import sweep

    monkeypatch.setattr(executors, "PROBE_TIMEOUT_S", 0.5)
    servers = []

    def serve(greeting: bytes | None) -> str:
        listener = socket.create_server(("127.0.0.1", 0))
        servers.append(listener)

        def answer():
            conn, _ = listener.accept()
            if greeting is not None:
                conn.sendall(greeting)
            threading.Event().wait(2)  # keep the line open, silent
            conn.close()

        threading.Thread(target=answer, daemon=True).start()
        return f"tcp://127.0.0.1:{listener.getsockname()[1]}"

    sc = from_dict({"run": {"rounds": 2, "timing_only": True}, "devices": {"count": 4}})
    cases = [("not a url", "not a scheduler address such as tcp://HOST:8786"),
             (serve(None), "no Dask scheduler answered there"),
             (serve(b"SSH-2.0-OpenSSH_9.6\r\n"), "something answers there, but not a Dask scheduler")]
    for address, words in cases:
        with pytest.raises(ConfigError, match=words):
            sweep(sc, ["scheduler.m=1,2"], executor="dask", address=address, out_dir=tmp_path / "sw", progress=False)
        assert not (tmp_path / "sw").exists()
    for listener in servers:
        listener.close()


def test_sweep_out_naming_a_file_is_one_line(tmp_path):
    (tmp_path / "s.toml").write_text("[run]\nrounds = 2\ntiming_only = true\n[devices]\ncount = 4\n")
    (tmp_path / "afile").write_text("keep")
    done = cli("sweep", "s.toml", "--grid", "scheduler.m=1,2", "--out", "afile", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip() == "wirelessfl: error: --out afile: is a file, not a folder"
    assert (tmp_path / "afile").read_text() == "keep"


def test_a_figure_is_never_written_through_a_link_planted_in_the_output_folder(tmp_path):
    (tmp_path / "s.toml").write_text("[run]\nrounds = 3\ntiming_only = true\n[devices]\ncount = 4\n")
    (tmp_path / "victim.png").write_text("keep")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "timing.png").symlink_to(tmp_path / "victim.png")
    done = cli("run", "s.toml", "--out", "out", "--no-progress", cwd=tmp_path)
    assert done.returncode == 2 and "out/timing.png: is a symbolic link" in done.stderr
    assert (tmp_path / "victim.png").read_text() == "keep"
    (tmp_path / "out" / "timing.png").unlink()
    assert cli("plot", "out", cwd=tmp_path).returncode == 0
    assert (tmp_path / "out" / "timing.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # written whole, as a PNG
    assert not [p for p in (tmp_path / "out").iterdir() if ".tmp" in p.name]
