"""Runs from the Python API: one scenario, every variant of one, resume, and reading a run back.

Nothing finished is overwritten unasked: a run folder that already holds a run is reused when it is
the same scenario and complete, and otherwise refused (``OutputExists``) unless ``overwrite=True``.
Complete means checked, not trusted: the folder's manifest (wirelessfl.sim.records.manifest, written as the
run completed) must still match its records, its scenario and the sources of its plug-ins.
A scenario's folder (``run_variants``) holds one run folder per variant, the scenario itself
(``scenario.toml``) and ``index.json`` with each variant's status, so that ``resume_variants``
finishes whatever was left: interrupted variants from their checkpoints, the others from round 0.
"""
from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..config import ConfigError, Scenario, dumps, load_scenario
from ..files import (DamagedFile, FolderLock, UnsafeOutput, check_folder, check_output_folder, make_folder,
                     refuse_links, write_atomic)
from ..jsonio import read_json, write_json_atomic
from ..learning import DatasetError
from ..learning.learner import TrainingDiverged
from ..sim.run.checkpoint import CHECKPOINT_NAME, ResumeError, load_checkpoint
from ..sim.records.manifest import MANIFEST, origin_problem, records_problem
from ..sim.run.result import RunResult, read_run_file
from ..sim.run.runner import ERROR_LOG, Run
from .stale_runs import foreign_entries, remove_stale_runs, stale_runs

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["INPUT_ERRORS", "OutputExists", "RunResult", "TrainingDiverged", "load_run", "resume", "resume_recorded", "resume_variants", "run_variants",
           "simulate"]

RUN_FILES = ("scenario.toml", "rounds.csv", "evals.csv", "updates.csv", "handovers.csv", "devices.csv", "decisions.h5",
             "decisions.npz", "passes.csv", "summary.json", MANIFEST, CHECKPOINT_NAME, ERROR_LOG)
"""The files a run writes into its folder (and the only ones ``overwrite`` removes)."""


class OutputExists(FileExistsError):
    """The output folder holds a run this call would overwrite; nothing was written."""


INPUT_ERRORS = (ConfigError, OutputExists, ResumeError, UnsafeOutput, FileNotFoundError, DatasetError, DamagedFile)
"""Errors of a run's input (scenario, folder, checkpoint, data, records), which every run of the same
input would meet: raised, where a failure of the run itself is recorded as its result."""


def run_state(run_dir: Path, scenario: Scenario) -> str:
    """What ``run_dir`` holds for ``scenario``: "absent", "complete" or "partial" (a run of this
    scenario), "unverified" (its summary says complete, but its records are not those its manifest
    lists), or "other" (a run of another scenario or of plug-ins changed since, or files that cannot
    be read as one). UnsafeOutput, naming it, for a run file that is a link, a FIFO or a device:
    never read nor written."""
    return read_back(run_dir, scenario)[0]


def read_back(run_dir: Path, scenario: Scenario) -> tuple[str, str | None]:
    """run_state, and why where the folder is "other" or "unverified" (for the refusal's one line)."""
    run_dir = Path(run_dir)
    if run_dir.is_dir():
        refuse_links(run_dir, RUN_FILES)
    if not any((run_dir / name).exists() for name in RUN_FILES):
        return "absent", None
    try:
        same = load_scenario(run_dir / "scenario.toml") == scenario
    except ConfigError:  # missing, unreadable, or written by another version of the simulator
        same = False
    if not same:
        return "other", None
    if not _says_complete(run_dir):
        return "partial", None
    why = records_problem(run_dir)
    if why is not None:
        return "unverified", why
    why = origin_problem(run_dir, scenario)
    return ("other", why) if why is not None else ("complete", None)


def _says_complete(run_dir: Path) -> bool:
    """Whether the folder's summary says "complete" (what it says; complete_problem checks it)."""
    summary = run_dir / "summary.json"
    try:
        return summary.exists() and read_json(summary).get("status") == "complete"
    except DamagedFile:  # a damaged summary: the run has to be written again
        return False


def _locked_state(run_dir: Path, scenario: Scenario) -> tuple[str, str | None]:
    """read_back, under the folder's lock when the folder exists: a folder another process is
    writing to is FolderBusy, said before anything about what it holds (an interrupted run to resume)."""
    if not run_dir.is_dir() or run_dir.is_symlink():
        return read_back(run_dir, scenario)
    with FolderLock(run_dir):
        return read_back(run_dir, scenario)


def _refuse(run_dir: Path, state: str, why: str | None = None) -> OutputExists:
    if why is not None:  # it names the file or the folder, and what is wrong with it
        what = why
    elif state == "other":
        what = f"{run_dir}: holds a run of another scenario"
    else:
        what = f"{run_dir}: holds an interrupted run of this scenario (continue it with: wirelessfl run --resume {run_dir})"
    again = "run it again" if state == "unverified" else "overwrite it"
    return OutputExists(f"{what}; choose another output folder (--out, out_dir=), or {again} "
                        "(--overwrite, overwrite=True)")


def _allowed_state(run_dir: Path, scenario: Scenario, overwrite: bool) -> str:
    """run_state, refusing (OutputExists) a folder this run may only replace with ``overwrite``."""
    state, why = read_back(run_dir, scenario)
    if state not in ("absent", "complete") and not overwrite:
        raise _refuse(run_dir, state, why)
    return state


def _clear(run_dir: Path) -> None:
    for name in RUN_FILES:
        (run_dir / name).unlink(missing_ok=True)


def simulate(scenario: Scenario, out_dir: str | Path | None = None, progress: bool = True,
             timing_only: bool | None = None, overwrite: bool = False) -> RunResult:
    """Run one scenario (no variants) and return its records; with ``out_dir``, also write them there.

    The run directory holds scenario.toml (the resolved scenario), rounds.csv and evals.csv (streamed
    while the run goes), devices.csv, decisions.h5 (per-round arrays of every device, streamed) and
    summary.json (written last; its "status" is
    "complete" only for a run that finished). With ``run.checkpoint_every = k`` a checkpoint is
    written every k rounds, from which ``resume(out_dir)`` continues an interrupted run. A folder
    that already holds this scenario's complete run is read back instead of run again; one that holds
    anything else raises OutputExists, unless ``overwrite``.
    """
    if scenario.variants:
        raise ValueError("simulate() runs one scenario; use run_variants() for a scenario with [variants]")
    if timing_only is not None and timing_only != scenario.run.timing_only:
        scenario = scenario.replace(f"run.timing_only={'true' if timing_only else 'false'}")
    run_dir = Path(out_dir) if out_dir is not None else None
    if run_dir is None:
        return Run(scenario, None, progress).execute()
    check_output_folder(run_dir)
    if run_dir.exists():  # refuse early, before loading data, what the locked check below would refuse
        with FolderLock(run_dir):
            state = _allowed_state(run_dir, scenario, overwrite)
        if state == "complete" and not overwrite:
            return _read_run(run_dir)
    run = Run(scenario, run_dir, progress)  # loads the data: a missing dataset writes nothing
    if not run_dir.is_dir():  # made here (a link the user chose as the folder is theirs)
        make_folder(run_dir)
    with FolderLock(run_dir):  # one writer: a second run, resume or overwrite of this folder is refused
        state = _allowed_state(run_dir, scenario, overwrite)  # again: another writer may have finished
        if state == "complete" and not overwrite:
            return _read_run(run_dir)
        if state != "absent":
            _clear(run_dir)
        write_atomic(run_dir / "scenario.toml", dumps(scenario))  # whole or absent, never empty
        return run.execute()


def resume(run_dir: str | Path, progress: bool = True) -> RunResult:
    """Continue an interrupted run from its last checkpoint; the records equal an uninterrupted run's.

    A complete run (its manifest checked) is returned as it is; a run without a checkpoint starts
    again from round 0. A folder whose summary says complete while its records, scenario or plug-ins
    are not those the run completed with continues from its checkpoint where it has one (a summary
    copied into an interrupted run), and is otherwise refused (ResumeError): only --overwrite runs
    it again.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: no run folder to resume")
    check_output_folder(run_dir, "resume")  # a read-only folder: one line before its lock is taken
    with FolderLock(run_dir):  # one writer: a second resume, or a run into this folder, is refused
        refuse_links(run_dir, RUN_FILES)
        done = _read_run(run_dir)  # a damaged summary is a one-line error, not a run to start over
        scenario = load_scenario(run_dir / "scenario.toml")
        if done.summary.get("status") == "complete":
            why = records_problem(run_dir) or origin_problem(run_dir, scenario)
            if why is None:
                return done
            if not (run_dir / CHECKPOINT_NAME).exists():
                raise ResumeError(f"{why}; nothing to resume (no checkpoint): run it again into {run_dir} with "
                                  "--overwrite (overwrite=True)")
        run = Run(scenario, run_dir, progress)
        if (run_dir / CHECKPOINT_NAME).exists():
            run.load_state(load_checkpoint(run_dir / CHECKPOINT_NAME))
        return run.execute()


def load_run(run_dir: str | Path) -> RunResult:
    """Read a run directory back (also an incomplete one: its summary then says so or is missing).

    A summary that says "complete" is checked against the folder's manifest: where the records are
    not those the run completed with (copied from another run, cut, replaced, or a summary copied
    in), the result's summary says "unverified", with the reason as its "error"."""
    result = _read_run(run_dir)
    if result.summary.get("status") == "complete":
        why = records_problem(result.run_dir)
        if why is not None:
            result.summary = {**result.summary, "status": "unverified", "error": why}
    return result


def _read_run(run_dir: str | Path) -> RunResult:
    """A run directory read back as it is (its manifest already checked, or not to be)."""
    run_dir = Path(run_dir)
    summary_path = run_dir / "summary.json"
    summary = read_json(summary_path) if summary_path.exists() else {"status": "incomplete"}

    return RunResult(rounds=read_run_file(run_dir, "rounds.csv"), evals=read_run_file(run_dir, "evals.csv"),
                     devices=read_run_file(run_dir, "devices.csv"), summary=summary, run_dir=run_dir)


def _write_index(out: Path, scenario: Scenario, results: dict[str, RunResult]) -> None:
    """index.json: the scenario's variants and each one's status: a variant that did not run in this
    call has the status its folder holds ("complete", "incomplete": interrupted, or "pending": never
    started)."""
    members = scenario.variant_scenarios()
    status = {}
    for name, member in members:
        if name in results:
            status[name] = results[name].summary.get("status", "incomplete")
        else:
            state = run_state(out / name, member)
            status[name] = {"complete": "complete", "partial": "incomplete",
                            "unverified": "incomplete"}.get(state, "pending")
    write_json_atomic(out / "index.json", {"scenario": scenario.name, "runs": [n for n, _ in members],
                                           "status": status})


def pick_variants(scenario: Scenario, names) -> list[tuple[str, Scenario]]:
    """The members of ``scenario`` called ``names`` (all of them when ``names`` is empty or None), in
    the scenario's order; an unknown name is a ConfigError listing the variants."""
    members = scenario.variant_scenarios()
    if not names:
        return members
    known = [name for name, _ in members]
    if not scenario.variants:
        raise ConfigError(f"--variant {names[0]}: scenario {scenario.name!r} has no variants")
    for name in names:
        if name not in known:
            raise ConfigError(f"--variant {name}: scenario {scenario.name!r} has the variants {', '.join(known)}")
    return [(name, member) for name, member in members if name in set(names)]


def _run_member(member: Scenario, run_dir: Path | None, progress: bool, overwrite: bool = False) -> RunResult:
    """simulate(), with the failure of the run itself (not of its input) recorded as its result."""
    try:
        return simulate(member, run_dir, progress=progress, overwrite=overwrite)
    except INPUT_ERRORS:  # wrong input: all would fail
        raise
    except Exception as exc:  # the run failed: keep going with the other variants
        return failed_result(run_dir, member.name, exc)


def failed_result(run_dir: Path | None, name: str, exc: BaseException) -> RunResult:
    """The result of a run that failed with ``exc``: its folder read back when its summary.json
    records this failure; else (the summary could not be written, a full disk; or it is an earlier
    attempt's) the folder's records with ``exc`` as the failure, in one line naming the file and the cause."""
    import pandas as pd

    recorded = load_run(run_dir) if run_dir is not None and (run_dir / "summary.json").exists() else None
    if recorded is not None and recorded.summary.get("error") == f"{type(exc).__name__}: {exc}":
        return recorded  # what Run.execute wrote of this failure (and its error.log)
    summary = {k: v for k, v in (recorded.summary if recorded is not None else {"name": name}).items()
               if k != "error_log"}  # an earlier attempt's traceback is not this failure's
    summary.update(status="failed", error=failure_line(exc))
    if recorded is not None:
        return RunResult(recorded.rounds, recorded.evals, recorded.devices, summary, run_dir)
    return RunResult(pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), summary, run_dir)


def failure_line(exc: BaseException) -> str:
    """A failure in one line; a file the system refused (a full disk) as "OSError: PATH: cause"."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{type(exc).__name__}: {exc.filename}: {exc.strerror}"
    return f"{type(exc).__name__}: {exc}"


def run_variants(scenario: Scenario, out_dir: str | Path | None = None, progress: bool = True,
                 timing_only: bool | None = None, overwrite: bool = False,
                 notice: Callable[[str], None] | None = None, variants=None) -> dict[str, RunResult]:
    """Run every variant of a scenario (or the scenario itself) into ``out_dir/VARIANT``.

    A variant whose run fails (diverges, raises) is recorded as failed (its summary's "status" and
    "error") and the others still run. ``out_dir`` gets the scenario (scenario.toml) first and
    index.json with every variant's status last (also after an interruption). Every variant's folder
    is checked before anything runs: the same scenario's complete runs are reused (``notice`` hears of
    it), other runs raise OutputExists unless ``overwrite``, and so does a folder without a scenario
    holding files that are not this scenario's runs. With ``overwrite``, the runs in ``out_dir`` of
    another scenario (its variants' folders, which plot would draw with the new ones) are removed
    first, or, if one holds files that are not a run's, nothing is (UnsafeOutput). ``variants``: names of the variants to run
    (default all); the others are left as they are, for a later run or ``resume_variants``.
    """
    if timing_only is not None and timing_only != scenario.run.timing_only:
        scenario = scenario.replace(f"run.timing_only={'true' if timing_only else 'false'}")
    members = pick_variants(scenario, variants)
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        check_output_folder(out)
        if out.is_dir():  # the scenario's own files: never read nor written through a link
            refuse_links(out, ("scenario.toml", "index.json"))
        family = out / "scenario.toml"
        same = family.exists() and _same_family(family, scenario)
        if family.exists() and not overwrite and not same:
            raise OutputExists(f"{out}: holds the runs of another scenario; choose another output folder (--out, "
                               "out_dir=), or overwrite it (--overwrite, overwrite=True)")
        names = [name for name, _ in scenario.variants] or [scenario.name]
        foreign = [] if family.exists() or overwrite else foreign_entries(out, names, RUN_FILES)
        if foreign:
            raise OutputExists(f"{out}: holds files that are not this scenario's runs ({', '.join(foreign[:5])}"
                               f"{', ...' if len(foreign) > 5 else ''}); choose another output folder (--out, "
                               "out_dir=), or overwrite it (--overwrite, overwrite=True: the runs in it that are not "
                               "this scenario's are removed, other files are kept)")
        stale = stale_runs(out, names, RUN_FILES) if overwrite and not same else []
        for name, member in members:
            check_folder(out / name)  # never a run written through a link planted there
            state, why = _locked_state(out / name, member)
            if state in ("other", "partial", "unverified") and not overwrite:
                raise _refuse(out / name, state, why)
            if state == "complete" and not overwrite and notice is not None:
                notice(f"{name}: complete already in {out / name}, read back (--overwrite runs it again)")
        remove_stale_runs(out, stale, RUN_FILES, notice)  # all or none: refused before any is removed
        created = not out.exists()
        make_folder(out, theirs=True)
        write_atomic(family, dumps(scenario))
        _write_index(out, scenario, {})  # marks the folder as a scenario's, for --resume
    results = {}
    try:
        for name, member in members:
            results[name] = _run_member(member, None if out is None else out / name, progress, overwrite)
    except INPUT_ERRORS:  # wrong input: no trace
        if out is not None and not results:
            family.unlink(missing_ok=True)
            (out / "index.json").unlink(missing_ok=True)
            if created and not any(out.iterdir()):
                out.rmdir()
        raise
    except BaseException:  # interrupted (Ctrl-C): index.json says which variants are complete, which not
        if out is not None:
            with contextlib.suppress(Exception):
                _write_index(out, scenario, results)
        raise
    if out is not None:
        _write_index(out, scenario, results)
    return results


def _same_family(path: Path, scenario: Scenario) -> bool:
    try:
        return load_scenario(path) == scenario
    except ConfigError:
        return False


def resume_variants(out_dir: str | Path, progress: bool = True,
                    notice: Callable[[str], None] | None = None) -> dict[str, RunResult]:
    """Finish a scenario's folder written by run_variants: complete variants are read back,
    interrupted ones continue from their checkpoints (or start over without one, with a notice),
    the ones never started run; index.json is written again. ``notice`` receives the notices
    (default: warnings.warn)."""
    out = Path(out_dir)
    refuse_links(out, ("scenario.toml", "index.json"))  # read, and index.json written again
    try:
        scenario = load_scenario(out / "scenario.toml")
    except ConfigError as exc:
        raise ConfigError(f"{out}: not a scenario folder written by wirelessfl run ({exc})") from None
    say = notice or (lambda text: warnings.warn(text, stacklevel=3))
    results = {}
    check_output_folder(out, "resume")  # index.json is written again; a read-only folder: one line first
    for name, _ in scenario.variant_scenarios():  # before any variant runs
        check_folder(out / name)
        if (out / name).is_dir():
            check_output_folder(out / name, "resume")
    for name, member in scenario.variant_scenarios():
        run_dir = out / name
        state, why = _locked_state(run_dir, member)
        if state == "other" or state == "unverified" and not (run_dir / CHECKPOINT_NAME).exists():
            raise _refuse(run_dir, state, why)
        if state == "complete":
            results[name] = _read_run(run_dir)
        elif state in ("partial", "unverified") and (run_dir / CHECKPOINT_NAME).exists():
            say(f"{name}: continuing from its checkpoint")
            results[name] = resume_recorded(run_dir, progress)
        else:
            say(f"{name}: no checkpoint, starting over" if state == "partial" else f"{name}: not started, running it")
            results[name] = _run_member(member, run_dir, progress, overwrite=True)
    _write_index(out, scenario, results)
    return results


def resume_recorded(run_dir: Path, progress: bool = True) -> RunResult:
    """resume(), with the failure of the run itself (not of its input) read back from its folder."""
    try:
        return resume(run_dir, progress=progress)
    except INPUT_ERRORS:
        raise
    except Exception as exc:  # the run failed again: its folder says how, or (unwritten) the error does
        return failed_result(run_dir, run_dir.name, exc)
