"""The README as a new user reads it: every command and code block, in order, copied as written,
in an empty folder that has the repository's scenarios and examples. The only addition is
$WIRELESSFL_SET (a documented hook that loads every scenario with extra overrides), which makes the
runs short."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SMALL = "run.time_budget_s=3;run.eval_every_s=1"


def blocks(lang: str) -> list[str]:
    return [code for kind, code in re.findall(r"```(\w+)\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
            if kind == lang]


def commands(block: str) -> list[str]:
    """The wirelessfl commands of a bash block: comments dropped; of a chain of installs, the part
    from the first wirelessfl command (the installs are what .ci/run does)."""
    out = []
    for line in block.splitlines():
        line = line.split("  #")[0].strip()
        if not line:
            continue
        parts = [p.strip() for p in line.split("&&")]
        keep = [p for i, p in enumerate(parts) if p.startswith("wirelessfl") or
                any(q.startswith("wirelessfl") for q in parts[:i])]
        out += [p for p in keep if p.startswith("wirelessfl")]
    return out


@pytest.fixture
def user_folder(tmp_path):
    for name in ("scenarios", "examples"):
        shutil.copytree(ROOT / name, tmp_path / name)
    return tmp_path


def run(cmd: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "WIRELESSFL_SET": SMALL}
    args = cmd.split()
    proc = subprocess.run([sys.executable, "-m", "wirelessfl.cli", *args[1:]], capture_output=True, text=True,
                          cwd=cwd, env=env)
    assert proc.returncode == 0, f"{cmd}\n{proc.stderr}"
    return proc


@pytest.mark.slow
def test_every_readme_command_and_code_block_runs_as_written(user_folder):
    bash = blocks("bash")
    quick, session = bash[0], bash[1]
    events = next(b for b in bash if "scenarios/async.toml" in b)  # the asynchronous protocols' section
    radio = next(b for b in bash if "scenarios/radio.toml" in b)  # a real radio
    first = commands(quick)
    assert first == ["wirelessfl run scenarios/quickstart.toml"]  # the quick start's run
    for cmd in first + commands(session) + commands(events) + commands(radio):
        run(cmd, user_folder)
    runs = user_folder / "runs"
    assert (runs / "quickstart" / "accuracy_vs_time.png").exists()
    assert (runs / "quickstart-timing" / "timing.png").exists()  # its own folder: the training runs are intact
    assert (runs / "quickstart" / "lyapunov" / "evals.csv").read_text().count("\n") > 2
    assert (runs / "quickstart" / "accuracy_vs_round.png").exists()
    assert (runs / "v_sweep" / "table.csv").exists() and (runs / "traces" / "gains.csv").exists()
    for figure in ("accuracy_vs_time.png", "staleness.png", "gantt.png"):  # the asynchronous protocols' section
        assert (runs / "async" / figure).exists(), figure
    assert {"sync", "semi_sync", "fedbuff", "fedasync"} <= {p.name for p in (runs / "async").iterdir()}
    assert "mcs" in (runs / "radio" / "nr" / "updates.csv").read_text().splitlines()[0]  # the NR link's columns
    (python,) = blocks("python")
    (user_folder / "api.py").write_text(python)
    proc = subprocess.run([sys.executable, "api.py"], capture_output=True, text=True, cwd=user_folder,
                          env={**os.environ, "WIRELESSFL_SET": SMALL})
    assert proc.returncode == 0, proc.stderr
    assert "exact" in proc.stdout or "bracket" in proc.stdout or "convex" in proc.stdout  # the route line
    assert (runs / "v_study" / "table.csv").read_text().count("complete") == 9
