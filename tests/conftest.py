"""Shared test helpers."""
import json
import os
import platform


def _pin_float_kernels() -> None:
    """The same float32 kernels on every x86 host, so records compare across machines.

    torch (its vectorised kernels), MKL (matrix products) and oneDNN each pick code by the CPU's
    instruction set, and a sum taken in another order differs in its last bits. Per-FedAvg's
    Hessian-free step divides such differences by 2 delta, so an AVX-512 host drifts past the
    reference records' tolerance in four rounds. Pinned to the AVX2 code they were written with;
    set before torch loads, kept where the caller chose otherwise."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return
    try:
        with open("/proc/cpuinfo") as f:
            has_avx2 = " avx2" in f.read()
    except OSError:
        return
    if has_avx2:
        for name, value in (("ATEN_CPU_CAPABILITY", "avx2"), ("MKL_CBWR", "AVX2"), ("ONEDNN_MAX_CPU_ISA", "AVX2")):
            os.environ.setdefault(name, value)


_pin_float_kernels()

import pytest  # noqa: E402
import torch  # noqa: E402

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
        from fakes import interrupted

        full = simulate(scenario, tmp_path / "full", progress=False)
        interrupted(scenario, tmp_path / "cut", monkeypatch, after)
        assert json.loads((tmp_path / "cut" / "summary.json").read_text())["status"] == "interrupted"
        return full, resume(tmp_path / "cut", progress=False)

    return run
