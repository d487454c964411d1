"""Read-backs are checked, not trusted (issue 61, item 5 and item 7's record and write-outside cases).

A run that completes writes manifest.json (wirelessfl.sim.records.manifest): its scenario's digest, its
plug-ins' source digests and each record file's digest. Every read-back, resume and sweep checks it:
another run's records copied in, a record replaced or cut, a summary copied into an interrupted run,
a plug-in edited since, are never reported complete. And nothing is written outside the output
folder: not through a link planted at reproduce's cache, not into a run folder swapped for a link
mid-run, not into a file outside that shares a record's inode (hard link).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from fakes import cli, interrupted
from wirelessfl.config import from_dict, load_scenario
from wirelessfl.experiments.run import OutputExists, load_run, run_state, run_variants, simulate
from wirelessfl.experiments.sweep import expand, sweep
from wirelessfl.files import UnsafeOutput, open_append
from wirelessfl.sim.records.manifest import MANIFEST, scenario_sha256

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def timing(seed: int = 4, **run) -> dict:
    return {"name": "s", "seed": seed, "run": {"rounds": 4, "timing_only": True, **run}, "devices": {"count": 6},
            "scheduler": {"name": "uniform", "m": 2}, "link": {"model_bits": 100000}}


def training(seed: int = 4, **run):
    """SCAFFOLD keeps per-device state: its checkpoints write journals."""
    return from_dict({
        "name": "s", "seed": seed, "run": {"rounds": 6, "eval_every_rounds": 2, "checkpoint_every": 2, **run},
        "devices": {"count": 8}, "scheduler": {"name": "uniform", "m": 3},
        "learning": {"algorithm": "scaffold", "model": "logreg", "samples_per_device": 20, "local_steps": 1,
                     "eval_train_samples": 80}})


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): sha(p) if p.is_file() and not p.is_symlink() else "other"
            for p in sorted(root.rglob("*"))}


def one_line(proc, *words: str) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def test_the_manifest_holds_the_digests_of_the_scenario_and_of_every_record_file(tmp_path):
    sc = from_dict(timing())
    simulate(sc, tmp_path / "a", progress=False)
    manifest = json.loads((tmp_path / "a" / MANIFEST).read_text())
    records = ["scenario.toml", "rounds.csv", "evals.csv", "updates.csv", "devices.csv", "decisions.h5", "summary.json"]
    assert manifest["files"] == {name: sha(tmp_path / "a" / name) for name in records}  # hashed here, independently
    assert manifest["plugins"] == {}  # built-in parts only
    assert manifest["scenario_sha256"] == scenario_sha256(sc) != scenario_sha256(from_dict(timing(seed=5)))
    assert run_state(tmp_path / "a", sc) == "complete"
    assert simulate(sc, tmp_path / "a", progress=False).summary["status"] == "complete"  # read back, not rerun
    assert manifest == json.loads((tmp_path / "a" / MANIFEST).read_text())


# --- item 7: records trusted without a check ---------------------------------------------------


@pytest.mark.parametrize("change", ["replaced", "cut"])
def test_a_complete_run_whose_rounds_csv_was_changed_is_not_read_back_complete(tmp_path, change):
    sc = from_dict(timing())
    run = tmp_path / "out" / "s"
    (tmp_path / "s.toml").write_text(textwrap.dedent('''
        name = "s"
        seed = 4
        [run]
        rounds = 4
        timing_only = true
        [devices]
        count = 6
        [scheduler]
        name = "uniform"
        m = 2
        [link]
        model_bits = 100000
    '''))
    assert cli("run", tmp_path / "s.toml", "--out", tmp_path / "out", "--no-progress").returncode == 0
    assert load_scenario(run / "scenario.toml") == sc
    rows = (run / "rounds.csv").read_text().splitlines(keepends=True)
    if change == "replaced":  # the same length, one digit other
        rows[1] = rows[1].replace("0", "1", 1)
    (run / "rounds.csv").write_text("".join(rows if change == "replaced" else rows[:-1]))
    assert run_state(run, sc) == "unverified"
    result = load_run(run)
    assert result.summary["status"] == "unverified" and "rounds.csv" in result.summary["error"]
    with pytest.raises(OutputExists, match="rounds.csv: damaged: not the file the run completed with"):
        simulate(sc, run, progress=False)
    before = tree(tmp_path / "out")
    one_line(cli("run", tmp_path / "s.toml", "--out", tmp_path / "out", "--no-progress"), "rounds.csv", "--overwrite")
    one_line(cli("run", "--resume", tmp_path / "out", "--no-progress"), "rounds.csv", "--overwrite")
    assert tree(tmp_path / "out") == before  # refused: nothing changed
    again = simulate(sc, run, progress=False, overwrite=True)  # asked: run again, and complete
    assert again.summary["status"] == "complete" and run_state(run, sc) == "complete"
    assert len(again.rounds) == 4


@pytest.mark.parametrize("where", ["complete", "interrupted"])
def test_another_run_s_records_copied_into_a_run_folder_are_never_resumed_as_complete(tmp_path, monkeypatch, where):
    other = tmp_path / "other"
    simulate(training(seed=9), other, progress=False)
    run = tmp_path / "run"
    if where == "complete":
        simulate(training(), run, progress=False)
    else:  # stopped in its 4th round: a checkpoint of round 2
        interrupted(training(), run, monkeypatch, after=3)
    for name in ("rounds.csv", "updates.csv", "devices.csv", "evals.csv", "summary.json"):
        shutil.copy(other / name, run / name)
    before = tree(tmp_path)
    line = one_line(cli("run", "--resume", run, "--no-progress"), "rounds.csv")
    assert ("no checkpoint" in line) == (where == "complete")  # else the checkpoint's digests refuse it
    assert tree(tmp_path) == before
    assert load_run(run).summary["status"] != "complete"
    assert run_state(run, training()) != "complete"


def test_a_summary_copied_into_an_interrupted_run_does_not_make_resume_report_it_complete(tmp_path, monkeypatch):
    full = tmp_path / "full"
    simulate(training(), full, progress=False)
    cut = tmp_path / "cut"
    interrupted(training(), cut, monkeypatch, after=3)
    shutil.copy(full / "summary.json", cut / "summary.json")  # says "complete", 6 rounds
    assert len(load_run(cut).rounds) < 6 and load_run(cut).summary["status"] == "unverified"
    assert run_state(cut, training()) == "unverified"
    proc = cli("run", "--resume", cut, "--no-progress")
    assert proc.returncode == 0, proc.stderr
    for name in ("rounds.csv", "updates.csv", "evals.csv", "devices.csv"):  # continued from the checkpoint
        assert (cut / name).read_bytes() == (full / name).read_bytes(), name
    assert load_run(cut).summary["status"] == "complete" and len(load_run(cut).rounds) == 6


def test_a_sweep_reruns_a_grid_point_whose_folder_holds_another_point_s_records(tmp_path):
    sc = from_dict(timing())
    first = sweep(sc, grid={"scheduler.m": [2, 3]}, out_dir=tmp_path / "sw", progress=False)
    rows = first.table.set_index("scheduler.m")
    two, three = tmp_path / "sw" / "runs" / rows.loc[2, "key"], tmp_path / "sw" / "runs" / rows.loc[3, "key"]
    kept = (three / "rounds.csv").read_bytes()
    for path in two.iterdir():  # m = 2's records where m = 3's should be
        shutil.copy(path, three / path.name)
    again = sweep(sc, grid={"scheduler.m": [2, 3]}, out_dir=tmp_path / "sw", progress=False)
    assert (again.ran, again.skipped) == (1, 1)
    assert (three / "rounds.csv").read_bytes() == kept
    table = again.table.set_index("scheduler.m")
    assert table.loc[3, "mean_round_s"] == rows.loc[3, "mean_round_s"] != rows.loc[2, "mean_round_s"]


# --- item 5: a plug-in edited since the run -----------------------------------------------------

BEST = textwrap.dedent('''
    """The k devices with the largest gains, at full power."""
    from dataclasses import dataclass

    import numpy as np

    from wirelessfl.config import option
    from wirelessfl.scheduling import Decision, Scheduler


    @dataclass(frozen=True)
    class Options:
        k: int = option(2, ge=1, doc="devices per round")


    class Best(Scheduler):
        Options = Options
        inclusion_probabilities = False

        def __init__(self, n, k, p_max):
            self.n, self.k, self.p_max = n, k, p_max

        @classmethod
        def from_scenario(cls, scenario, options):
            return cls(scenario.devices.count, options.k, scenario.link.p_max)

        def decide(self, state):
            chosen = np.sort(np.argsort(-state.gains, kind="stable")[: self.k])
            q = np.zeros(self.n)
            q[chosen] = 1.0
            return Decision(omega=q / q.sum(), q=q, power=np.full(self.n, self.p_max), m=self.k, selected=chosen)
''')


def test_a_finished_run_is_not_read_back_after_its_plug_in_was_edited(tmp_path):
    (tmp_path / "best_mod.py").write_text(BEST)
    (tmp_path / "s.toml").write_text(textwrap.dedent('''
        name = "s"
        seed = 1
        [run]
        rounds = 3
        timing_only = true
        [devices]
        count = 6
        [link]
        model_bits = 100000
        [scheduler]
        name = "best_mod:Best"
    '''))
    sc = load_scenario(tmp_path / "s.toml")
    run = tmp_path / "out" / "s"
    assert cli("run", tmp_path / "s.toml", "--out", tmp_path / "out", "--no-progress").returncode == 0
    manifest = json.loads((run / MANIFEST).read_text())
    assert manifest["plugins"] == {"scheduler.name = best_mod:Best": sha(tmp_path / "best_mod.py")}
    assert run_state(run, sc) == "complete"
    (tmp_path / "best_mod.py").write_text(BEST + "\n# edited\n")
    assert run_state(run, sc) == "other"
    with pytest.raises(OutputExists, match="another version of the plug-in scheduler.name = best_mod:Best"):
        simulate(sc, run, progress=False)
    before = tree(tmp_path / "out")
    one_line(cli("run", tmp_path / "s.toml", "--out", tmp_path / "out", "--no-progress"), "best_mod:Best",
             "--overwrite")
    one_line(cli("run", "--resume", tmp_path / "out", "--no-progress"), "best_mod:Best")
    assert tree(tmp_path / "out") == before
    proc = cli("run", tmp_path / "s.toml", "--out", tmp_path / "out", "--no-progress", "--overwrite")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((run / MANIFEST).read_text())["plugins"] == {
        "scheduler.name = best_mod:Best": sha(tmp_path / "best_mod.py")}
    assert run_state(run, sc) == "complete"


def test_a_sweep_does_not_reuse_a_folder_whose_run_had_another_version_of_its_plug_in(tmp_path):
    (tmp_path / "best_mod.py").write_text(BEST)
    (tmp_path / "s.toml").write_text('seed = 1\n[run]\nrounds = 3\ntiming_only = true\n[devices]\ncount = 6\n'
                                     '[link]\nmodel_bits = 100000\n[scheduler]\nname = "best_mod:Best"\n')
    sc = load_scenario(tmp_path / "s.toml")
    first = sweep(sc, out_dir=tmp_path / "sw", progress=False)
    (tmp_path / "best_mod.py").write_text(BEST + "\n# edited\n")
    key = expand(sc)[1][0].key
    assert key != first.table["key"][0]  # an edited plug-in is another run ...
    os.rename(tmp_path / "sw" / "runs" / first.table["key"][0], tmp_path / "sw" / "runs" / key)
    again = sweep(sc, out_dir=tmp_path / "sw", progress=False)  # ... even where its folder holds the old one's
    assert (again.ran, again.skipped) == (1, 0)
    manifest = json.loads((tmp_path / "sw" / "runs" / key / MANIFEST).read_text())
    assert manifest["plugins"] == {"scheduler.name = best_mod:Best": sha(tmp_path / "best_mod.py")}


# --- item 7: writes outside --out ---------------------------------------------------------------


def test_reproduce_refuses_a_link_planted_at_its_cache(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "papers").mkdir()
    (tmp_path / "papers" / "cache").symlink_to(outside)
    proc = cli("reproduce", "lyapunov:fig4", "--scale", "tiny", "--seeds", "1", "--out", tmp_path / "papers",
               "--no-progress")
    one_line(proc, str(tmp_path / "papers" / "cache"), "symbolic link")
    assert list(outside.iterdir()) == []


def test_a_run_folder_swapped_for_a_link_mid_run_writes_nothing_outside(tmp_path, monkeypatch):
    from wirelessfl.sim.records import recorder as records_module

    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "out"
    real, calls = records_module.Recorder.on_round, {"n": 0}

    def swap(self, rec):
        calls["n"] += 1
        if calls["n"] == 3:  # after the first checkpoint (round 2): the variant's folder becomes a link
            os.rename(out / "s", out / "s.moved")
            (out / "s").symlink_to(outside)
        return real(self, rec)

    monkeypatch.setattr(records_module.Recorder, "on_round", swap)
    with pytest.raises(UnsafeOutput, match="was replaced while the run was going"):
        run_variants(training(), out, progress=False)
    assert calls["n"] >= 3
    assert list(outside.iterdir()) == []  # no journal, checkpoint, summary or device table there
    assert list((out / "s.moved" / "device_state").glob("*.journal"))  # they stayed in the run's folder


def test_hard_linked_records_and_journals_are_not_changed_in_place(tmp_path, monkeypatch):
    full = tmp_path / "full"
    simulate(training(), full, progress=False)
    cut = tmp_path / "cut"
    interrupted(training(), cut, monkeypatch, after=3)
    (cut / "summary.json").unlink()  # as after kill -9
    shared = tmp_path / "shared"
    shared.mkdir()
    records = ["rounds.csv", "updates.csv", "evals.csv",
               *(str(p.relative_to(cut)) for p in (cut / "device_state").glob("*.journal"))]
    assert any(name.endswith(".journal") for name in records)
    for i, name in enumerate(records):
        os.link(cut / name, shared / f"{i}")
    before = tree(shared)
    proc = cli("run", "--resume", cut, "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert tree(shared) == before  # the files outside kept their bytes
    for name in ("rounds.csv", "updates.csv", "evals.csv", "devices.csv"):
        assert (cut / name).read_bytes() == (full / name).read_bytes(), name
        assert os.stat(cut / name).st_nlink == 1


def test_decisions_started_again_leave_a_hard_link_elsewhere_as_it_was(tmp_path):
    from wirelessfl.sim.records.device_arrays import DeviceArrays

    (tmp_path / "decisions.h5").write_bytes(b"kept")
    os.link(tmp_path / "decisions.h5", tmp_path / "elsewhere")
    arrays = DeviceArrays(tmp_path / "decisions.h5", 3)
    arrays.start()
    arrays.close()
    assert (tmp_path / "elsewhere").read_bytes() == b"kept"
    assert (tmp_path / "decisions.h5").read_bytes()[:8] == b"\x89HDF\r\n\x1a\n"  # an HDF5 file of its own


def test_appending_to_a_hard_linked_file_gives_it_a_file_of_its_own(tmp_path):
    (tmp_path / "a.csv").write_text("x\n1\n")
    os.link(tmp_path / "a.csv", tmp_path / "elsewhere")
    with open_append(tmp_path / "a.csv") as fh:
        fh.write("2\n")
    assert (tmp_path / "a.csv").read_text() == "x\n1\n2\n"
    assert (tmp_path / "elsewhere").read_text() == "x\n1\n"
    assert os.stat(tmp_path / "a.csv").st_nlink == 1 == os.stat(tmp_path / "elsewhere").st_nlink
