"""Every paper's recipes: names, the list, end to end at the tiny scale, and the committed data.

The committed figures/ folder holds each recipe's data CSV beside its report; the report drawn again
from that data must be the committed one, so every number in it can be checked without running
anything. The core paper's recipes are also tested one by one in test_papers_lyapunov.py.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from wirelessfl.cli import main
from wirelessfl.config import ConfigError
from wirelessfl.papers import ALIASES, PAPERS, all_recipes, find_recipes, list_recipes, reproduce

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "figures"
COMMITTED = [r for r in all_recipes() if (FIGURES / r.data_file).exists()]


def test_names_resolve_to_recipes():
    assert [r.key for r in find_recipes("fig3")] == ["lyapunov:fig3"]
    assert [r.key for r in find_recipes(["lyapunov:table1", "table1"])] == ["lyapunov:table1"]  # no repeats
    for paper in PAPERS:
        mine = find_recipes(paper)
        assert mine and {r.paper for r in mine} == {paper} and find_recipes(f"{paper}:all") == mine
    assert len(find_recipes("all")) == len(all_recipes()) == len({r.key for r in all_recipes()})
    assert set(ALIASES.values()) <= {r.key for r in all_recipes()}
    with pytest.raises(ConfigError, match="safari:nope.*known: .*lyapunov:fig2"):
        find_recipes("safari:nope")
    with pytest.raises(ConfigError, match="paper 'nope'|'nope:x'"):
        find_recipes("nope:x")


def test_list_gives_every_recipe_its_runs_and_costs():
    lines = list_recipes().splitlines()
    for recipe in all_recipes():
        (line,) = [ln for ln in lines if ln.startswith(recipe.key + " ")]
        assert int(line.split()[1]) == recipe.runs("cpu")
        assert all(name in line for name in recipe.makes)


def test_every_recipe_has_a_distinct_data_file_and_report():
    recipes = all_recipes()
    assert len({r.data_file for r in recipes}) == len(recipes) == len({r.report_file for r in recipes})
    made = [name for r in recipes for name in r.makes]
    assert len(made) == len(set(made)), "two recipes write the same figure"


def test_data_needs_no_run_and_must_exist(tmp_path, capsys):
    assert main(["reproduce", "fig2", "--data", str(tmp_path)]) == 2
    assert "--no-run" in capsys.readouterr().err
    assert main(["reproduce", "fig2", "--no-run", "--data", str(tmp_path), "--figures", str(tmp_path / "f")]) == 2
    assert "lyapunov_fig2.csv does not exist" in capsys.readouterr().err
    assert not (tmp_path / "f").exists()  # a failed command leaves no folder behind


@pytest.mark.parametrize("recipe", COMMITTED, ids=lambda r: r.key)
def test_committed_data_redraws_the_committed_report(recipe, tmp_path):
    (report,) = reproduce(recipe.key, scale="cpu", run=False, data=FIGURES, figures=tmp_path)
    assert not report.failed
    assert (tmp_path / recipe.report_file).read_text() == (FIGURES / recipe.report_file).read_text()
    for name in recipe.makes:  # every file the recipe makes is committed beside its data
        assert (FIGURES / name).exists() and (tmp_path / name).exists()
        if name.endswith((".md", ".csv")):
            assert (tmp_path / name).read_text() == (FIGURES / name).read_text(), name


def test_committed_data_is_small():
    total = sum((FIGURES / r.data_file).stat().st_size for r in COMMITTED)
    assert total < 5e6, f"{total / 1e6:.1f} MB of data CSVs"


@pytest.mark.slow
@pytest.mark.parametrize("paper", [p for p in PAPERS if p != "lyapunov"])  # lyapunov: test_papers_lyapunov.py
def test_every_recipe_runs_at_tiny_scale(paper, tmp_path, one_torch_thread):
    reports = reproduce(paper, scale="tiny", seeds=1, out=tmp_path, progress=False)
    assert [r.name for r in reports] == [r.name for r in find_recipes(paper)]
    for recipe, report in zip(find_recipes(paper), reports):
        assert not report.failed, report.failed
        data = pd.read_csv(tmp_path / "figures" / recipe.data_file)
        assert len(data) > 0
        for name in recipe.makes:
            assert (tmp_path / "figures" / name).stat().st_size > 0, name
        # the tiny report redraws from its own data
        (again,) = reproduce(recipe.key, scale="tiny", run=False, data=tmp_path / "figures", figures=tmp_path / "again")
        assert (tmp_path / "again" / recipe.report_file).read_text() == \
            (tmp_path / "figures" / recipe.report_file).read_text()


@pytest.mark.slow
def test_a_plain_install_finds_its_scenarios_from_any_folder(tmp_path):
    """pip install . (not editable) into a folder; run the commands from an empty folder."""
    wheels, target, empty = tmp_path / "wheels", tmp_path / "site", tmp_path / "empty"
    empty.mkdir()
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(ROOT)], check=True,
                   capture_output=True)
    (wheel,) = wheels.glob("wirelessfl-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)], check=True,
                   capture_output=True)
    env = {**os.environ, "PYTHONPATH": str(target)}

    def cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "wirelessfl.cli", *args], cwd=empty, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    where = subprocess.run([sys.executable, "-c", "import wirelessfl; print(wirelessfl.__file__)"], cwd=empty,
                           env=env, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(target))  # the installed copy, not the source tree
    listed = cli("scenarios")
    assert "quickstart" in listed and "paper/training" in listed and str(target) in listed
    assert "lyapunov:fig3" in cli("reproduce", "--list")
    out = cli("run", "quickstart", "--set", "run.time_budget_s=5", "--no-progress")
    assert "accuracy" in out
    assert (empty / "runs" / "quickstart" / "lyapunov" / "summary.json").exists()
