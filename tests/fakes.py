"""Fakes for driving the engine directly: a fixed channel, a scheduler that selects everyone, a
learner that records what it was asked, and ``make_engine`` that wires them like the runner; and
``interrupted``, a run stopped with Ctrl-C at a given record; ``killed_and_resumed``, a run killed with
SIGKILL after its first checkpoint and resumed from the command line."""
import numpy as np
import pytest

from wirelessfl.learning.algorithms import Algorithm
from wirelessfl.scheduling.base import Decision, Scheduler
from wirelessfl.sim.sync.engine import Engine
from wirelessfl.sim.round.parts import STREAMS, Parts
from wirelessfl.wireless import TDMA, Channel


class FixedChannel(Channel):
    """The same gains every round."""

    def __init__(self, gains):
        self.gains = np.asarray(gains, dtype=float)

    def draw(self, rng):
        return self.gains.copy()


class SelectAll(Scheduler):
    """Selects every device with certainty for practical purposes (m large, omega uniform);
    remembers the availability mask of each round."""

    def __init__(self, n, power=1.0):
        self.n, self.power = n, power
        self.seen_available = []

    def decide(self, state):
        self.seen_available.append(state.available)
        omega = np.full(self.n, 1 / self.n)
        return Decision(omega=omega, q=np.ones(self.n), power=np.full(self.n, self.power),
                        m=400)


class ClientRoundsOnly(Algorithm):
    """An algorithm with no server rounds, no extra work and no extra vectors (the engine's view of FedAvg)."""


class RecordingLearner:
    """Remembers the devices trained each round; evaluates to the given accuracies (default 0)."""

    def __init__(self, accuracies=None):
        self.accuracies = list(accuracies) if accuracies is not None else None
        self.trained = []
        self.server_rounds = []

    def train_round(self, selected, decision, round_idx):
        self.trained.append(list(selected))
        return {}

    def server_round(self, round_idx):
        self.server_rounds.append(round_idx)
        return {}

    def reports(self, request, round_idx):  # pragma: no cover - no probing scheduler here
        raise AssertionError("no reports expected")

    def evaluate(self):
        acc = self.accuracies.pop(0) if self.accuracies is not None else 0.0
        return {"accuracy": acc, "test_loss": 0.0, "train_loss": 0.0}


def make_engine(*, channel, link, compute, scheduler, model_bits, num_devices, streams=None, downlink_s=0.0,
                learner=None, stop, evaluate, on_round=lambda r: None, on_eval=lambda e: None, access=None,
                availability=None, round_deadline_s=None, algorithm=None):
    """An Engine over the given parts; streams not given are seeded generators of their own."""
    streams = dict(streams or {})
    for i, name in enumerate(STREAMS):
        streams.setdefault(name, np.random.default_rng(1000 + i))
    parts = Parts(channel=channel, compute=compute, scheduler=scheduler,
                  algorithm=algorithm if algorithm is not None else ClientRoundsOnly(),
                  access=access if access is not None else TDMA(link), num_devices=num_devices,
                  upload_bits=model_bits, downlink_s=downlink_s, availability=availability,
                  round_deadline_s=round_deadline_s)
    return Engine(parts, streams=streams, stop=stop, evaluate=evaluate, learner=learner, on_round=on_round,
                  on_eval=on_eval)


def changed(data: dict, changes: dict) -> dict:
    """``data`` (a scenario as tables) with ``changes`` merged into its tables; an option set to None
    is taken out (so that another part's options can replace it)."""
    for table, values in changes.items():
        merged = {**data.get(table, {}), **values}
        data[table] = {k: v for k, v in merged.items() if v is not None}
    return data


def interrupted(scenario, out, monkeypatch, after: int) -> None:
    """Run ``scenario`` into ``out`` with Ctrl-C as its record number ``after`` + 1 comes (the
    recorder's ``on_round`` is restored afterwards)."""
    from wirelessfl.experiments.run import simulate
    from wirelessfl.sim.records import recorder as records_module

    real = records_module.Recorder.on_round
    calls = {"n": 0}

    def stop(self, rec):
        calls["n"] += 1
        if calls["n"] == after + 1:
            raise KeyboardInterrupt
        return real(self, rec)

    monkeypatch.setattr(records_module.Recorder, "on_round", stop)
    with pytest.raises(KeyboardInterrupt):
        simulate(scenario, out, progress=False)
    monkeypatch.setattr(records_module.Recorder, "on_round", real)


def killed_and_resumed(tmp_path, scenario_text: str, name: str):
    """Run the scenario (TOML text, named ``name``, checkpointing) whole into tmp_path/full, and again
    into tmp_path/cut killed with SIGKILL just after its first checkpoint (0.3 s after it, or, where the
    run ended first on a busy machine, again at once), then ``run --resume`` that; returns the two run
    folders. Asserts the kill came before the end and the resume succeeded."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import shutil

    (tmp_path / "k.toml").write_text(scenario_text)
    cmd = [sys.executable, "-m", "wirelessfl.cli", "run", str(tmp_path / "k.toml"), "--no-progress", "--out"]
    assert subprocess.run(cmd + [str(tmp_path / "full")], capture_output=True).returncode == 0
    for after_s in (0.3, 0.0):  # rows past the checkpoint; on a busy machine a fast run may end first: at once
        shutil.rmtree(tmp_path / "cut", ignore_errors=True)
        proc = subprocess.Popen(cmd + [str(tmp_path / "cut")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while time.time() < deadline and not (tmp_path / "cut" / name / "checkpoint.pt").exists():
            time.sleep(0.02)
        time.sleep(after_s)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if not (tmp_path / "cut" / name / "summary.json").exists():
            break
    assert not (tmp_path / "cut" / name / "summary.json").exists(), "the run ended before it could be killed"
    done = subprocess.run([sys.executable, "-m", "wirelessfl.cli", "run", "--resume", str(tmp_path / "cut"),
                           "--no-progress"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return tmp_path / "full" / name, tmp_path / "cut" / name



def resumed_from_checkpoints(tmp_path, monkeypatch, scenario, name: str, which=(1, 3)):
    """Run ``scenario`` whole into tmp_path/full, keeping copies of its folder as a kill -9 leaves
    it just after checkpoint k and just before checkpoint k + 1 is written (rows flushed past k) for
    each k in ``which``; resume every copy in this process. Deterministic where a real SIGKILL of a
    fast run may land after its end. Returns the full run's folder and the resumed copies."""
    import shutil

    from wirelessfl.experiments.run import resume, simulate
    from wirelessfl.sim.run import runner as runner_module

    real, saved, copies = runner_module.save_checkpoint, [], []

    def save(path, state):
        if len(saved) - 1 in which:
            copies.append(shutil.copytree(path.parent, tmp_path / f"before{len(saved)}"))
        real(path, state)
        saved.append(path)
        if len(saved) in which:
            copies.append(shutil.copytree(path.parent, tmp_path / f"after{len(saved)}"))

    monkeypatch.setattr(runner_module, "save_checkpoint", save)
    simulate(scenario, tmp_path / "full" / name, progress=False)
    monkeypatch.setattr(runner_module, "save_checkpoint", real)
    assert len(copies) == 2 * len(which), f"the run wrote {len(saved)} checkpoints"
    for copy in copies:
        assert resume(copy, progress=False).summary["status"] == "complete"
    return tmp_path / "full" / name, copies


def cli(*args, cwd=None):
    """The ``wirelessfl`` command run in this process: what ``python -m wirelessfl.cli ARGS`` in
    ``cwd`` gives (exit code, standard output, standard error), without a new interpreter's start-up
    (about 0.7 s). An exception that escapes the command is printed as the interpreter would, exit
    code 1, so a test that wants no traceback sees it."""
    import contextlib
    import io
    import subprocess
    import sys
    import traceback

    from wirelessfl.cli import main

    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd or "."), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
        except Exception:
            traceback.print_exc()
            code = 1
    return subprocess.CompletedProcess(["wirelessfl", *argv], code, out.getvalue(), err.getvalue())


def benchmark(name: str):
    """benchmarks/NAME.py as a module, loaded once by path (the benchmarks are scripts, not a package)."""
    import importlib.util
    import sys
    from pathlib import Path

    if name not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
