"""Shared test helpers."""
import json
import os

import pytest
import torch

from wirelessfl.sim import records as records_module
from wirelessfl.experiments.run import resume, simulate


@pytest.fixture(scope="session", autouse=True)
def dataset_cache_of_the_session(tmp_path_factory):
    """Decoded datasets are cached in a folder of the test session (subprocesses inherit it), not
    in the user's cache: the first load decodes and stores, the others map the stored arrays."""
    before = os.environ.get("WIRELESSFL_CACHE")
    os.environ["WIRELESSFL_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if before is None:
        os.environ.pop("WIRELESSFL_CACHE", None)
    else:
        os.environ["WIRELESSFL_CACHE"] = before


@pytest.fixture(scope="module")
def one_torch_thread():
    """One intra-op thread for a module's tests: the test machine's cores are shared, and threads
    spinning against other processes run several times slower than one. Restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def interrupted_and_resumed(tmp_path, monkeypatch):
    """Run a scenario whole, then again with Ctrl-C after ``after`` rounds, then resume the second.

    Returns (uninterrupted result, resumed result); checks the interrupted run says so on disk.
    """
    def run(scenario, after=12):
        full = simulate(scenario, tmp_path / "full", progress=False)
        calls = {"n": 0}
        real = records_module.Recorder.on_round

        def stop_after(self, rec):
            calls["n"] += 1
            if calls["n"] == after + 1:
                raise KeyboardInterrupt
            return real(self, rec)

        monkeypatch.setattr(records_module.Recorder, "on_round", stop_after)
        with pytest.raises(KeyboardInterrupt):
            simulate(scenario, tmp_path / "cut", progress=False)
        assert json.loads((tmp_path / "cut" / "summary.json").read_text())["status"] == "interrupted"
        monkeypatch.setattr(records_module.Recorder, "on_round", real)
        return full, resume(tmp_path / "cut", progress=False)

    return run
