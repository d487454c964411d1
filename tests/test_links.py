"""Nothing is written, or read back, through a symbolic link planted where the program writes: a
link at each path that a run, a resume and a sweep write (files, folders, journals, the per-device
state's memory-mapped array, locks, figures) is refused in one line naming the path, with exit
status 2, and nothing outside --out changes. FIFOs where a resume reads are refused, not waited on."""
from __future__ import annotations

import hashlib
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from wirelessfl import cli
from wirelessfl.config import from_dict
from wirelessfl.experiments.sweep import expand

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TRAINING = textwrap.dedent('''
    seed = 4
    [run]
    rounds = 4
    eval_every_rounds = 2
    checkpoint_every = 2
    [devices]
    count = 8
    [scheduler]
    name = "uniform"
    m = 3
    [learning]
    algorithm = "scaffold"
    model = "logreg"
    samples_per_device = 20
    local_steps = 1
    eval_train_samples = 80
''')
TIMING = "seed = 4\n[run]\nrounds = 3\ntiming_only = true\n[devices]\ncount = 5\n[link]\nmodel_bits = 10000\n"

RUN = "out/s"
RUN_PATHS = ["out/scenario.toml", "out/index.json", RUN, f"{RUN}/.lock", f"{RUN}/scenario.toml", f"{RUN}/rounds.csv",
             f"{RUN}/evals.csv", f"{RUN}/updates.csv", f"{RUN}/devices.csv", f"{RUN}/decisions.h5",
             f"{RUN}/summary.json", f"{RUN}/checkpoint.pt", f"{RUN}/error.log", f"{RUN}/device_state",
             f"{RUN}/device_state/scaffold_c.g0.journal",
             "out/accuracy_vs_time.png", "out/train_loss_vs_time.png"]
"""What `wirelessfl run s.toml --out out` writes (SCAFFOLD: a journal of its devices' control
variates; their array is memory-mapped in a scratch file of device_state/ that has no name)."""
RESUME_PATHS = [RUN, f"{RUN}/.lock", f"{RUN}/scenario.toml", f"{RUN}/rounds.csv", f"{RUN}/evals.csv",
                f"{RUN}/updates.csv", f"{RUN}/devices.csv", f"{RUN}/decisions.h5", f"{RUN}/summary.json",
                f"{RUN}/checkpoint.pt", f"{RUN}/error.log", f"{RUN}/device_state",
                f"{RUN}/device_state/scaffold_c.g0.journal",
                "out/scenario.toml", "out/index.json"]
"""What `wirelessfl run --resume out` reads back and writes (the files of an interrupted run)."""


def tree(root: Path, skip: Path | None = None) -> dict[str, str]:
    """Every file and link under ``root`` (not under ``skip``): the sha256 of its bytes, or its target."""
    out = {}
    for path in sorted(root.rglob("*")):
        if skip is not None and (path == skip or skip in path.parents):
            continue
        if path.is_symlink():
            out[str(path.relative_to(root))] = f"link -> {os.readlink(path)}"
        elif path.is_file():
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
        elif path.is_dir():
            out[str(path.relative_to(root))] = "folder"
    return out


def wirelessfl(*args) -> tuple[int, str]:
    """The command line, in this process: its exit status and what it wrote on stderr."""
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main([*map(str, args), "--no-progress"])
    return code, err.getvalue()


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """work/ (the current folder: the scenarios and --out) beside outside/ (where links point)."""
    import wirelessfl.learning.device_state as device_state

    monkeypatch.setattr(device_state, "MEMMAP_BYTES", 0)  # every per-device state memory-mapped
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (work / "s.toml").write_text(TRAINING)
    (work / "t.toml").write_text(TIMING)
    monkeypatch.chdir(work)
    return tmp_path


def plant(sandbox: Path, relative: str, like: Path | None = None) -> Path:
    """A link at work/RELATIVE to a target in outside/ (a folder for a folder, else a file holding
    ``like``'s bytes, or a few bytes of its own); whatever was there is moved away first."""
    at = sandbox / "work" / relative
    target = sandbox / "outside" / relative.replace("/", "_")
    folder = relative in (RUN, f"{RUN}/device_state", "sw/runs", "sw/failed") or relative.startswith("sw/runs/")
    if folder:
        target.mkdir()
        (target / "keep.txt").write_text("precious\n")
    elif like is not None and like.is_file():
        target.write_bytes(like.read_bytes())
    else:
        target.write_text("precious\n")
    if at.is_dir() and not at.is_symlink():
        shutil.rmtree(at)
    elif os.path.lexists(at):
        at.unlink()
    at.parent.mkdir(parents=True, exist_ok=True)
    at.symlink_to(target, target_is_directory=folder)
    return target


def assert_refused(code: int, err: str, relative: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert relative in lines[0], err


@pytest.mark.parametrize("relative", RUN_PATHS)
def test_a_run_writes_nothing_through_a_link_planted_where_it_writes(sandbox, relative):
    plant(sandbox, relative)
    before = tree(sandbox, skip=sandbox / "work" / "out")
    assert_refused(*wirelessfl("run", "s.toml", "--out", "out"), relative)
    assert tree(sandbox, skip=sandbox / "work" / "out") == before


def test_the_paths_tested_are_the_ones_a_run_writes(sandbox, monkeypatch):
    """RUN_PATHS: every path a run writes (kept from the end: the checkpoint, the journals and the
    mapped array go when a run completes; the error log is written when one fails)."""
    from fakes import interrupted

    interrupted(from_dict(__import__("tomllib").loads(TRAINING) | {"name": "s"}), Path("out/s"), monkeypatch, after=3)
    written = {str(p) for p in Path("out").rglob("*")} | {"out/scenario.toml", "out/index.json",
                                                           f"{RUN}/error.log", "out/accuracy_vs_time.png",
                                                           "out/train_loss_vs_time.png", RUN, f"{RUN}/.lock"}
    assert written == set(RUN_PATHS)


@pytest.fixture
def interrupted_run(sandbox, monkeypatch):
    """out/s: the run of s.toml stopped with Ctrl-C in its 4th round (a checkpoint of round 2)."""
    from fakes import interrupted
    from wirelessfl.experiments.run import run_variants
    from wirelessfl.sim.records import recorder as records_module

    real, calls = records_module.Recorder.on_round, {"n": 0}

    def stop(self, rec):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return real(self, rec)

    from wirelessfl.config import load_scenario

    monkeypatch.setattr(records_module.Recorder, "on_round", stop)
    with pytest.raises(KeyboardInterrupt):
        run_variants(load_scenario(Path("s.toml")), Path("out"), progress=False)
    monkeypatch.setattr(records_module.Recorder, "on_round", real)
    assert (Path(RUN) / "checkpoint.pt").exists() and (Path(RUN) / "device_state" / "scaffold_c.g0.journal").exists()
    return sandbox


@pytest.mark.parametrize("relative", RESUME_PATHS)
def test_a_resume_reads_and_writes_nothing_through_a_link_planted_where_it_does(interrupted_run, relative):
    sandbox = interrupted_run
    if relative == f"{RUN}/error.log":  # an interrupted run has none: the link is planted fresh
        assert not (sandbox / "work" / relative).exists()
    plant(sandbox, relative, like=sandbox / "work" / relative)  # a copy of the file it replaces
    before = tree(sandbox, skip=sandbox / "work" / "out")
    resumes = [("run", "--resume", "out")] + ([("run", "--resume", RUN)] if relative == RUN or relative.startswith(RUN + "/") else [])
    for args in resumes:  # the scenario's folder, and the run's own (which reads nothing of the scenario's)
        code, err = wirelessfl(*args)
        assert_refused(code, err, relative)
        assert tree(sandbox, skip=sandbox / "work" / "out") == before


@pytest.mark.parametrize("relative", [f"{RUN}/rounds.csv", f"{RUN}/updates.csv", f"{RUN}/evals.csv",
                                      f"{RUN}/summary.json", f"{RUN}/checkpoint.pt", f"{RUN}/decisions.h5",
                                      f"{RUN}/device_state/scaffold_c.g0.journal", f"{RUN}/scenario.toml"])
def test_a_fifo_where_a_resume_reads_is_refused_in_one_line_not_waited_on(interrupted_run, relative):
    at = interrupted_run / "work" / relative
    at.unlink()
    os.mkfifo(at)
    before = tree(interrupted_run)
    code, err = wirelessfl("run", "--resume", RUN)
    assert_refused(code, err, relative)
    assert "FIFO" in err
    assert tree(interrupted_run) == before


def sweep_keys() -> list[str]:
    _, members = expand(from_dict(__import__("tomllib").loads(TIMING) | {"name": "t"}), ["scheduler.m=2,3"], 1)
    return [m.key for m in members]


SWEEP_PATHS = ["sw/.lock", "sw/runs", "sw/failed", "sw/scenario.toml", "sw/sweep.json", "sw/table.csv",
               "sw/runs/KEY", "sw/failed/KEY.json"]
"""What `wirelessfl sweep t.toml --grid scheduler.m=2,3 --out sw` writes (failed/ when a run fails)."""


@pytest.mark.parametrize("relative", SWEEP_PATHS)
def test_a_sweep_writes_nothing_through_a_link_planted_where_it_writes(sandbox, relative):
    relative = relative.replace("KEY", sweep_keys()[0])
    if relative.startswith("sw/failed/"):
        (sandbox / "work" / "sw" / "failed").mkdir(parents=True)
    plant(sandbox, relative)
    before = tree(sandbox, skip=sandbox / "work" / "sw")
    assert_refused(*wirelessfl("sweep", "t.toml", "--grid", "scheduler.m=2,3", "--out", "sw"), relative)
    assert tree(sandbox, skip=sandbox / "work" / "sw") == before


def test_a_sweep_s_temporary_run_folder_is_never_one_a_link_points_to(sandbox):
    """The run folder a sweep writes before renaming it into runs/ has a predictable name: a link
    there is removed, and the run is written into a folder of its own."""
    from wirelessfl.experiments.executors import run_task

    key = sweep_keys()[0]
    (sandbox / "work" / "sw" / "runs").mkdir(parents=True)
    target = plant(sandbox, f"sw/runs/.{key}.tmp-{os.getpid()}")
    before = tree(sandbox / "outside")
    from wirelessfl.config import dumps

    result = run_task(dumps(from_dict(__import__("tomllib").loads(TIMING) | {"name": "t"})), "sw/runs", key)
    assert result["status"] == "complete", result
    assert tree(sandbox / "outside") == before and (target / "keep.txt").read_text() == "precious\n"
    assert (sandbox / "work" / "sw" / "runs" / key / "summary.json").is_file()


def test_a_resume_of_the_run_folders_under_a_folder_refuses_one_that_is_a_link(interrupted_run):
    """`run --resume FOLDER` without a scenario's index.json resumes every run folder in it: one
    that is a link planted there is refused, not continued wherever it points."""
    sandbox = interrupted_run
    for name in ("index.json", "scenario.toml"):  # a folder of run folders, not a scenario's
        (sandbox / "work" / "out" / name).unlink()
    shutil.move(sandbox / "work" / RUN, sandbox / "outside" / "s")
    (sandbox / "work" / RUN).symlink_to(sandbox / "outside" / "s", target_is_directory=True)
    before = tree(sandbox, skip=sandbox / "work" / "out")
    assert_refused(*wirelessfl("run", "--resume", "out"), RUN)
    assert tree(sandbox, skip=sandbox / "work" / "out") == before


@pytest.mark.parametrize("planted", ["datasets", "entry", "array"])
def test_the_dataset_cache_is_never_written_or_read_through_a_link_planted_in_it(tmp_path, monkeypatch, planted):
    """A link at the cache's datasets/ folder (to an empty folder: an entry would be written there),
    at an entry or at one of its arrays (to other arrays of the same shape): the cache is passed over,
    the data are decoded as without one, and nothing is written where the link points."""
    import numpy as np
    import torch

    from test_datasets import entries, write_mnist_folder
    from wirelessfl.learning import load_dataset

    write_mnist_folder(tmp_path / "mnist", np.random.default_rng(5), n_train=9, n_test=5)
    cache, outside = tmp_path / "cache", tmp_path / "outside"
    outside.mkdir()
    monkeypatch.setenv("WIRELESSFL_CACHE", str(cache))
    decoded = load_dataset("mnist", data_dir=tmp_path)  # makes the entry
    (name,) = entries(cache)
    entry = cache / "datasets" / name
    if planted == "datasets":
        shutil.rmtree(cache / "datasets")
        (outside / "datasets").mkdir()
        (cache / "datasets").symlink_to(outside / "datasets", target_is_directory=True)
    elif planted == "entry":
        shutil.move(entry, outside / "entry")
        np.save(outside / "entry" / "x_train.npy", np.zeros_like(np.load(outside / "entry" / "x_train.npy")))
        entry.symlink_to(outside / "entry", target_is_directory=True)
    else:
        np.save(outside / "x_train.npy", np.zeros_like(np.load(entry / "x_train.npy")))
        (entry / "x_train.npy").unlink()
        (entry / "x_train.npy").symlink_to(outside / "x_train.npy")
    before = tree(outside)
    again = load_dataset("mnist", data_dir=tmp_path)
    assert torch.equal(again.x_train, decoded.x_train)  # not the arrays a link points to
    assert tree(outside) == before
