"""What a new user met on the command line (issue 61, item 6): a --set of a variant that does not
exist, --set with --resume, --set checked against the variants --variant keeps, a --set that makes two
variants one run, --overwrite and the folders of a previous scenario, a folder of other files, an
empty or unusable --out, a diverged run's line, and a part's check() of each variant as resolved."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from fakes import cli
from wirelessfl.config import ConfigError, from_dict, load_scenario
from wirelessfl.experiments.run import run_variants
from wirelessfl.experiments.summary_line import summary_line

FAMILY = """\
    name = "{name}"
    seed = 1
    [run]
    rounds = 2
    timing_only = true
    [devices]
    count = 4
    [scheduler]
    name = "uniform"
    m = 2
    [variants.{first}]
    scheduler.m = 1
    [variants.{second}]
    scheduler.m = 3
    devices.count = 3
    """


def write_family(folder: Path, name: str = "fam", first: str = "one", second: str = "three") -> Path:
    path = folder / f"{name}.toml"
    path.write_text(textwrap.dedent(FAMILY.format(name=name, first=first, second=second)))
    return path


def one_line_error(proc, *words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr, proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr


def test_a_set_of_a_variant_that_is_not_one_is_refused_naming_the_variants(tmp_path):
    path = write_family(tmp_path)
    proc = cli("run", path, "--set", "variants.thre.scheduler.m=2", "--out", "out", "--no-progress", cwd=tmp_path)
    one_line_error(proc, "variants.thre.scheduler.m", "'thre' is not a variant", "one, three")
    assert not (tmp_path / "out").exists()
    # an existing variant's field is set; a scenario without variants may still be given some
    assert dict(load_scenario(path, ["variants.three.scheduler.m=4"]).variant_scenarios())["three"].scheduler.options.m == 4
    plain = from_dict({"run": {"rounds": 2, "timing_only": True}}, ["variants.a.scheduler.m=1", "variants.b.scheduler.m=2"])
    assert [name for name, _ in plain.variants] == ["a", "b"]


@pytest.mark.parametrize("flag", [("--set", "scheduler.m=1"), ("--seed", "3"), ("--timing-only",), ("--out", "x")])
def test_resume_refuses_what_would_change_the_run(tmp_path, flag):
    proc = cli("run", "--resume", "out", *flag, "--no-progress", cwd=tmp_path)
    one_line_error(proc, "run --resume", f"{flag[0]} goes with a SCENARIO")


def test_set_is_checked_against_the_variants_that_variant_keeps(tmp_path):
    """Four computation times fit `one` (4 devices), not `three` (3 devices): refused for the whole
    family naming `three`, run for `one` alone."""
    path = write_family(tmp_path)
    times = "devices.compute_s_per_device=[0.1, 0.2, 0.3, 0.4]"
    proc = cli("run", path, "--set", times, "--out", "all", "--no-progress", cwd=tmp_path)
    one_line_error(proc, "variants.three:", "devices.compute_s_per_device has 4 values")
    proc = cli("run", path, "--variant", "one", "--set", times, "--out", "kept", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "kept" / "one" / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["num_devices"] == 4
    assert not (tmp_path / "kept" / "three").exists()
    # the kept variant's own error names it
    proc = cli("run", path, "--variant", "three", "--set", times, "--out", "other", "--no-progress", cwd=tmp_path)
    one_line_error(proc, "variants.three:", "devices.compute_s_per_device has 4 values")
    # trace --variant as well
    proc = cli("trace", path, "--variant", "one", "--set", times, "--rounds", 2, "--out", "traces", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len((tmp_path / "traces" / "compute_s.csv").read_text().splitlines()[0].split(",")) == 4


def test_a_set_that_makes_two_variants_one_run_is_warned_of(tmp_path):
    path = write_family(tmp_path)
    proc = cli("run", path, "--set", "variants.one.scheduler.m=3", "--set", "variants.one.devices.count=3",
               "--out", "out", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "warning: --set variants.one.scheduler.m=3 --set variants.one.devices.count=3 makes the variants one " \
           "and three one run" in proc.stderr
    records = [(tmp_path / "out" / name / "updates.csv").read_text() for name in ("one", "three")]
    assert records[0] == records[1]  # the warning was right: the same records
    proc = cli("run", path, "--set", "variants.one.scheduler.m=2", "--out", "out2", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr


def test_overwrite_removes_the_previous_scenarios_variant_folders(tmp_path):
    first = write_family(tmp_path, "first", "a", "b")
    second = write_family(tmp_path, "second", "c", "b")
    assert cli("run", first, "--out", "out", "--no-progress", cwd=tmp_path).returncode == 0
    one_line_error(cli("run", second, "--out", "out", "--no-progress", cwd=tmp_path), "holds the runs of another")
    assert (tmp_path / "out" / "a" / "summary.json").exists()  # refused: nothing removed
    proc = cli("run", second, "--out", "out", "--overwrite", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if p.is_dir()) == ["b", "c"]
    proc = cli("plot", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    from wirelessfl.experiments.plots import find_runs

    assert list(find_runs([tmp_path / "out"])) == ["c", "b"]  # plot draws the new scenario's runs only


def test_overwrite_refuses_a_previous_variant_folder_holding_other_files_before_removing_anything(tmp_path):
    first = write_family(tmp_path, "first", "a", "b")
    second = write_family(tmp_path, "second", "c", "d")
    assert cli("run", first, "--out", "out", "--no-progress", cwd=tmp_path).returncode == 0
    (tmp_path / "out" / "b" / "notes.txt").write_text("mine")
    proc = cli("run", second, "--out", "out", "--overwrite", "--no-progress", cwd=tmp_path)
    one_line_error(proc, str(Path("out") / "b"), "notes.txt")
    for name in ("a", "b"):  # neither removed, nothing of the new scenario written
        assert (tmp_path / "out" / name / "summary.json").exists()
    assert load_scenario(tmp_path / "out" / "scenario.toml").name == "first"


def test_a_folder_of_other_files_is_refused_without_overwrite(tmp_path):
    path = write_family(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    one_line_error(cli("run", path, "--out", "out", "--no-progress", cwd=tmp_path), "out", "notes.txt",
                   "not this scenario's runs")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["notes.txt"]
    assert cli("run", path, "--out", "out", "--overwrite", "--no-progress", cwd=tmp_path).returncode == 0
    assert (tmp_path / "out" / "notes.txt").read_text() == "mine"  # kept: not a run
    assert (tmp_path / "out" / "three" / "summary.json").exists()


@pytest.mark.parametrize("command", [("run", "fam.toml"), ("sweep", "fam.toml"), ("trace", "fam.toml", "--rounds", "1"),
                                     ("reproduce", "fig2")])
def test_an_empty_out_is_refused(tmp_path, command):
    write_family(tmp_path)
    one_line_error(cli(*command, "--out", "", cwd=tmp_path), "--out ''", "an empty path")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fam.toml"]  # nothing written, not in runs/ either


@pytest.mark.parametrize("out", ["/proc/wirelessfl-out", "fam.toml/out"])
def test_an_out_that_cannot_be_a_folder_is_named_in_one_line(tmp_path, out):
    write_family(tmp_path)
    one_line_error(cli("run", "fam.toml", "--out", out, "--no-progress", cwd=tmp_path), out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fam.toml"]


def test_a_diverged_runs_line_does_not_contradict_itself(tmp_path):
    """An MLP at a learning rate of 1e30 diverges in its first round: the line says it failed, that
    its accuracy is the one before, and claims nothing of a power budget no round spent."""
    scenario = from_dict({"name": "div", "seed": 1, "run": {"rounds": 4, "eval_every_rounds": 1},
                          "devices": {"count": 6}, "scheduler": {"name": "uniform", "m": 3},
                          "learning": {"dataset": "synthetic", "model": "mlp", "samples_per_device": 20,
                                       "local_steps": 2, "lr": 1e30}})
    result = run_variants(scenario, tmp_path / "out", progress=False)["div"]
    s = result.summary
    assert s["status"] == "failed" and "TrainingDiverged" in s["error"] and s["rounds"] == 0
    line = summary_line("div", s)
    assert line.startswith("div: 0 rounds") and "failed: TrainingDiverged" in line
    assert f"accuracy {s['final_accuracy']:.3f} before it failed" in line
    assert "above it" not in line and "transient" not in line


def test_a_parts_check_runs_against_each_variant_as_resolved_not_the_base():
    """The base gives 3 computation times for 4 devices; both variants have 3 devices: valid. A
    variant with 4 devices is refused, naming it."""
    base = {"run": {"rounds": 2, "timing_only": True}, "devices": {"count": 4, "compute_s_per_device": [0.1, 0.2, 0.3]}}
    family = from_dict({**base, "variants": {"a": {"devices": {"count": 3}},
                                             "b": {"devices": {"count": 3}, "scheduler": {"m": 2}}}})
    assert [m.devices.count for _, m in family.variant_scenarios()] == [3, 3]
    with pytest.raises(ConfigError, match=r"^variants\.c: devices\.compute_s_per_device has 3 values"):
        from_dict({**base, "variants": {"a": {"devices": {"count": 3}}, "c": {"scheduler": {"m": 2}}}})
    with pytest.raises(ConfigError, match="compute_s_per_device has 3 values"):  # no variants: the scenario runs
        from_dict(base)


PLUGIN = """\
    from dataclasses import dataclass

    from wirelessfl.config import option
    from wirelessfl.scheduling.schedulers import UniformOptions, UniformScheduler


    @dataclass(frozen=True)
    class WeightedOptions(UniformOptions):
        weights: {annotation} = option(())


    class Weighted(UniformScheduler):
        Options = WeightedOptions
    """


@pytest.mark.parametrize("annotation, ok", [("tuple", False), ("list[float]", False), ("tuple[float, ...]", True)])
def test_a_plug_in_option_of_a_type_that_cannot_be_checked_is_one_line_listing_the_types(tmp_path, annotation, ok):
    (tmp_path / "weighted.py").write_text(textwrap.dedent(PLUGIN.format(annotation=annotation)))
    path = write_family(tmp_path)
    proc = cli("run", path, "--set", 'scheduler.name="weighted:Weighted"', "--set", "scheduler.weights=[1.0, 2.0]",
               "--out", "out", "--no-progress", cwd=tmp_path)
    if ok:
        assert proc.returncode == 0, proc.stderr
        return
    one_line_error(proc, "scheduler.name = 'weighted:Weighted': WeightedOptions.weights: annotation "
                   f"{annotation} is not an option type; allowed: bool, int, float, str", "tuple[X, ...]")
    from wirelessfl.fields import OPTION_TYPES

    docs = (Path(__file__).resolve().parents[1] / "docs" / "extending.md").read_text(encoding="utf-8")
    for name in ("bool", "int", "float", "str", "Power", "FilePath", "X | None", "tuple[X, ...]"):
        assert f"`{name}`" in docs and name in OPTION_TYPES, name  # the guide lists what the error allows
