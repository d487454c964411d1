"""Where a sweep's runs execute: serially, in a local process pool, or on Dask; and the task each
executor runs (one member into its folder, published by an atomic rename).

Every executor yields (member index, task result) as runs finish; a task's exceptions come back as
results, so one failing run does not stop the others.
"""
from __future__ import annotations

import os
import shutil
import time
import traceback
from pathlib import Path
from typing import Callable, Protocol

from ..config import from_dict
from ..jsonio import read_json
from ..sim.records.manifest import complete_problem
from .run import simulate

class Task(Protocol):
    """What an executor needs of a sweep's run (a sweep.Member): its resolved scenario as TOML and
    the key of its folder."""

    toml: str
    key: str

try:
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def read_summary(run_dir: Path, scenario=None) -> dict | None:
    """The summary of the finished run in ``run_dir`` (of ``scenario``, where given), None where there
    is none: a summary is trusted only where the folder's manifest still matches its records (and the
    scenario and its plug-ins), so another grid point's records or a summary copied in run again."""
    try:
        summary = read_json(run_dir / "summary.json")
    except (OSError, ValueError):
        return None
    if summary.get("status") != "complete" or complete_problem(run_dir, scenario) is not None:
        return None
    return summary


def run_task(toml_text: str, runs_dir: str, key: str, torch_threads: int | None = None) -> dict:
    """Run one resolved scenario into ``runs_dir/key`` and return ``{"status", "summary"|"error"}``.

    Exceptions of the run are caught and returned (the sweep records them and goes on); the run
    directory appears only once complete, through one atomic rename.
    """
    runs = Path(runs_dir)
    final = runs / key
    try:
        scenario = from_dict(tomllib.loads(toml_text))
    except Exception:  # said as the run's failure below
        scenario = None
    done = read_summary(final, scenario) if scenario is not None else None
    if done is not None:  # finished meanwhile (e.g. by a worker of an earlier, killed sweep)
        return {"status": "complete", "summary": done}
    if torch_threads is not None:
        import torch

        torch.set_num_threads(torch_threads)
    tmp = runs / f".{key}.tmp-{os.getpid()}"
    _remove(tmp)
    try:
        os.mkdir(tmp)  # a folder of its own: never one a link planted there points to
        scenario = from_dict(tomllib.loads(toml_text))
        result = simulate(scenario, tmp, progress=False)
    except Exception as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        return {"status": "failed", "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()}
    _publish(tmp, final)
    return {"status": "complete", "summary": result.summary}


def _remove(path: Path) -> None:
    """Remove a leftover folder of the sweep's own; a link there goes, not what it points to."""
    if path.is_symlink():
        path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def _publish(tmp: Path, final: Path) -> None:
    """Move a finished run into place; an incomplete leftover at ``final`` is replaced (a link there
    is removed, never followed)."""
    if final.is_symlink():
        final.unlink()
    try:
        os.rename(tmp, final)
        return
    except OSError:
        if read_summary(final) is not None:  # the same run finished elsewhere: identical records
            shutil.rmtree(tmp, ignore_errors=True)
            return
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)


def _exit_with(sweep_pid: int) -> None:
    """End this pool worker as soon as the sweep process is gone (killed, even by SIGKILL).

    Without this, workers of a killed sweep finish the runs already queued to them and then wait
    forever: the pool's pipes stay open in the workers themselves, and under forkserver their
    parent is the forkserver, which in turn waits for them. A daemon thread waits on a pidfd of
    the sweep (Linux >= 5.3; elsewhere it polls the pid once a second) and exits the process.
    """
    import select
    import threading

    def watch() -> None:
        try:
            fd = os.pidfd_open(sweep_pid)
        except (AttributeError, OSError):
            fd = None
        if fd is not None:
            select.select([fd], [], [])  # readable once the process has exited
        else:
            while True:
                try:
                    os.kill(sweep_pid, 0)
                except ProcessLookupError:
                    break
                except PermissionError:
                    pass
                time.sleep(1.0)
        os._exit(1)

    try:
        os.kill(sweep_pid, 0)
    except ProcessLookupError:  # the sweep died while this worker was starting
        os._exit(1)
    threading.Thread(target=watch, name="wirelessfl-sweep-watchdog", daemon=True).start()


def _init_worker(torch_threads: int, sweep_pid: int) -> None:
    import torch

    torch.set_num_threads(torch_threads)  # cores // workers: workers must not oversubscribe
    _exit_with(sweep_pid)


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _failed(exc: BaseException) -> dict:
    error = f"{type(exc).__name__}: {exc}"
    if type(exc).__name__ == "BrokenProcessPool":  # the usual cause: a script without a main guard
        error += (" (the worker processes died; in a script, call sweep() under if __name__ == '__main__': "
                  "the workers import the script again)")
    return {"status": "failed", "error": error,
            # not the traceback: a pool re-raises one exception object for many futures
            "traceback": "".join(traceback.format_exception_only(exc))}


def _serial(todo: list[tuple[int, Task]], runs_dir: Path, workers, address):
    for i, m in todo:
        yield i, run_task(m.toml, str(runs_dir), m.key)


def _process(todo: list[tuple[int, Task]], runs_dir: Path, workers, address):
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    workers = workers or cores()
    # forkserver (Linux) starts workers from a clean process that has imported the simulator (and
    # torch, for training runs) once; fork is avoided because the driver may hold torch or Dask threads.
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        training = any(not m.scenario.run.timing_only for _, m in todo)
        ctx.set_forkserver_preload(["wirelessfl.experiments.executors"] + (["torch"] if training else []))
    else:  # pragma: no cover
        ctx = mp.get_context("spawn")
    threads = max(1, cores() // workers)
    pool = ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=ctx,
                               initializer=_init_worker, initargs=(threads, os.getpid()))
    finished = False
    try:
        futures = {pool.submit(run_task, m.toml, str(runs_dir), m.key): i for i, m in todo}
        for fut in as_completed(futures):
            try:
                res = fut.result()
            except Exception as exc:  # a worker died (BrokenProcessPool) or the task could not be sent
                res = _failed(exc)
            yield futures[fut], res
        finished = True
    finally:
        # interrupted: do not wait for the runs in flight (the workers exit with this process)
        pool.shutdown(wait=finished, cancel_futures=True)


PROBE_TIMEOUT_S = 10.0


def check_scheduler(address: str) -> None:
    """ConfigError unless ``address`` parses and, for tcp, what listens there speaks first as a Dask
    scheduler does: its handshake's 8-byte length. Client() alone waits forever on a service that
    never speaks (an HTTP server), and tries to allocate whatever a stranger's first bytes claim
    (2.82 EiB from one service)."""
    import socket
    import struct

    from distributed.comm.addressing import parse_address, parse_host_port

    from ..config import ConfigError

    try:
        scheme, location = parse_address(address)
        host, port = parse_host_port(location) if scheme == "tcp" else (None, None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"--address {address!r}: not a scheduler address such as tcp://HOST:8786 ({exc})") from None
    if scheme != "tcp":  # tls://, ucx://, inproc://: Client checks those itself
        return
    head = b""
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S) as conn:
            while len(head) < 8:
                chunk = conn.recv(8 - len(head))
                if not chunk:
                    break
                head += chunk
    except OSError as exc:  # refused, unreachable, silent (socket.timeout is an OSError)
        raise ConfigError(f"--address {address}: no Dask scheduler answered there ({exc or 'timed out'})") from None
    if len(head) < 8 or not 0 < struct.unpack("<Q", head)[0] < 2 ** 26:
        raise ConfigError(f"--address {address}: something answers there, but not a Dask scheduler")


def _dask(todo: list[tuple[int, Task]], runs_dir: Path, workers, address):
    """Connects (or starts a LocalCluster) now, so that an unreachable address fails at once."""
    import logging

    from distributed import Client, LocalCluster

    cluster = threads = None
    if address:
        try:
            client = Client(address, timeout="10s")
        except (OSError, TimeoutError, ValueError, MemoryError) as exc:
            from ..config import ConfigError

            raise ConfigError(f"--address {address}: no Dask scheduler answered there ({exc})") from None
    else:
        workers = workers or cores()
        threads = max(1, cores() // workers)
        # the workers' scratch space inside the sweep folder, not /tmp/dask-scratch-space: a sweep
        # writes nothing outside the folder the user named (the dataset cache aside)
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.ERROR,
                               local_directory=str(runs_dir.parent / ".dask-scratch"))
        client = Client(cluster)
    return _dask_results(client, cluster, threads, todo, runs_dir)


def _dask_results(client, cluster, threads, todo, runs_dir: Path):
    from distributed import as_completed

    try:
        # key by run key: resubmitting the same run (same sweep, same client) is one task
        futures = {client.submit(run_task, m.toml, str(runs_dir), m.key, threads, pure=False,
                                 key=f"wirelessfl-run-{m.key}"): i for i, m in todo}
        for fut in as_completed(list(futures)):
            try:
                res = fut.result()
            except Exception as exc:  # the worker died or the task could not be deserialised
                res = _failed(exc)
            yield futures[fut], res
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


EXECUTE: dict[str, Callable] = {"serial": _serial, "process": _process, "dask": _dask}
