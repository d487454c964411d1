"""benchmarks/validation.py as a script: its figures go to the committed figures/validation only at
the page's size; a run at another --scale (smaller samples, other curves) draws them in a folder of
runs/ unless --figures names one."""
from __future__ import annotations

from pathlib import Path

import pytest

from fakes import benchmark

validation = benchmark("validation")
COMMITTED = Path(__file__).resolve().parents[1] / "figures" / "validation"


@pytest.fixture
def probe(monkeypatch, tmp_path):
    """A case of no cost whose figure function records the folder it was given; run from tmp_path."""
    folders = []

    def figure(result, folder):
        folders.append(Path(folder))
        return Path(folder) / "probe.png"

    monkeypatch.setitem(validation.CASES, "probe", lambda scale: validation.Result("probe", []))
    monkeypatch.setitem(validation.FIGURES, "probe", figure)
    monkeypatch.chdir(tmp_path)
    return folders


@pytest.mark.parametrize("argv, folder", [
    (["probe"], COMMITTED),
    (["probe", "--scale", "0.1"], Path("runs") / "validation-scale-0.1"),
    (["probe", "--scale", "0.1", "--figures", "figures/validation"], Path("figures") / "validation"),
])
def test_the_figures_go_to_the_committed_folder_only_at_the_page_s_size_or_when_asked(probe, argv, folder):
    validation.main(argv)
    assert probe == [folder]


def test_the_page_s_quick_commands_leave_the_slow_suite_out():
    """docs/validation.md's pytest commands other than the one for the page's sizes (-m slow) skip
    the slow tests: ``-k queue`` alone would also run the page-size case (minutes)."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "validation.md").read_text(encoding="utf-8")
    commands = [line[line.index("python -m pytest"):].split("`")[0].split("#")[0].strip()
                for line in page.splitlines() if "python -m pytest tests/test_validation.py" in line]
    assert len(commands) > 10
    for command in commands:
        assert ('-m "not slow"' in command) != command.endswith("-m slow"), command
