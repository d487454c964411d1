"""A finished run's manifest: what its folder held when it completed, checked on every read-back.

A run that completes writes ``manifest.json`` last (after summary.json, one write-then-rename): the
digest of its resolved scenario, the SHA-256 of the source file of every plug-in the scenario names,
and the SHA-256 of each record file. A folder is complete only when that manifest is there and
every digest still holds (:func:`complete_problem`, the one check that every read-back, resume and
sweep calls): records copied in from another run, cut short or replaced, a summary copied into an
interrupted run, or a plug-in edited since the run, are never taken for a finished run.
The records themselves are untouched: the manifest is a file of its own.
"""
from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

from ...config import Scenario, dumps
from ...files import DamagedFile, UnsafeOutput, open_regular
from ...jsonio import read_json, write_json_atomic
from ...plugins import KINDS, registry, source_file

__all__ = ["MANIFEST", "RECORD_FILES", "complete_problem", "file_sha256", "origin_problem", "plugin_digests",
           "records_problem", "scenario_sha256", "write_manifest"]

MANIFEST = "manifest.json"

RECORD_FILES = ("scenario.toml", "rounds.csv", "evals.csv", "updates.csv", "handovers.csv", "devices.csv",
                "decisions.h5", "decisions.npz", "passes.csv", "summary.json")
"""The files of a finished run whose digests the manifest keeps (those the run wrote)."""


def scenario_sha256(scenario: Scenario) -> str:
    """The digest of the resolved scenario in its canonical form (fields at their defaults and where
    the plug-ins live left out: a new field with a default, or a moved plug-in, is the same run)."""
    return hashlib.sha256(dumps(dataclasses.replace(scenario, plugin_path=()), only_changed=True).encode()).hexdigest()


def plugin_digests(scenario: Scenario) -> dict[str, str]:
    """``{"FIELD = NAME": sha256 of its source file}`` for every part the scenario names that is not
    built in, the parts named by a part's options (protocol.staleness) included, in a fixed order."""
    out = {}
    for kind in KINDS.values():
        name = scenario.part_name(kind.name)
        if name not in registry(kind.name).builtins:
            out[f"{kind.field} = {name}"] = _source_sha256(scenario.part(kind.name))
    for kind in KINDS.values():
        options = scenario.options(kind.name)
        for f in dataclasses.fields(options) if dataclasses.is_dataclass(options) else ():
            named, name = f.metadata.get("kind"), getattr(options, f.name)
            if named is None or name in registry(named).builtins:
                continue
            out[f"{kind.table}.{f.name} = {name}"] = _source_sha256(registry(named).load(name, scenario.plugin_path))
    return out


def _source_sha256(part: type) -> str:
    source = source_file(part)
    if source is None:
        return "no source"
    try:
        return hashlib.sha256(source.read_bytes()).hexdigest()
    except OSError:  # moved or removed since it was imported: no digest matches it
        return "unreadable"


def file_sha256(path: Path) -> str:
    """The SHA-256 of the regular file ``path`` (never read through a link, nor from a FIFO)."""
    digest = hashlib.sha256()
    with open_regular(path) as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(run_dir: Path, scenario: Scenario) -> None:
    """Write ``run_dir/manifest.json`` for the run that has just completed there (its summary written)."""
    run_dir = Path(run_dir)
    files = {name: file_sha256(run_dir / name) for name in RECORD_FILES if (run_dir / name).exists()}
    write_json_atomic(run_dir / MANIFEST, {"scenario_sha256": scenario_sha256(scenario),
                                           "plugins": plugin_digests(scenario), "files": files})


def complete_problem(run_dir: Path, scenario: Scenario | None = None) -> str | None:
    """Why ``run_dir`` is not a finished run (of ``scenario``, where given) whose records are the ones
    it completed with; None: it is one. The one check of every read-back and resume: reads the
    files once, touches nothing."""
    return records_problem(run_dir) or (origin_problem(run_dir, scenario) if scenario is not None else None)


def _manifest(run_dir: Path) -> tuple[dict | None, str | None]:
    """The folder's manifest, or why there is none to trust."""
    path = Path(run_dir) / MANIFEST
    if not path.exists() and not path.is_symlink():
        return None, (f"{run_dir}: its summary says complete, but it has no {MANIFEST}, which a run writes as it "
                      "completes (the summary was copied in, or the records are not a finished run's)")
    try:
        manifest = read_json(path)
    except (DamagedFile, UnsafeOutput, OSError) as exc:
        return None, str(exc) if isinstance(exc, (DamagedFile, UnsafeOutput)) else f"{path}: cannot be read ({exc})"
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict) \
            or not isinstance(manifest.get("plugins"), dict) or "summary.json" not in manifest["files"]:
        return None, f"{path}: damaged: not the manifest that wirelessfl writes"
    return manifest, None


def records_problem(run_dir: Path) -> str | None:
    """Why the record files of ``run_dir`` are not those its manifest lists (None: they are)."""
    run_dir = Path(run_dir)
    manifest, problem = _manifest(run_dir)
    if problem is not None:
        return problem
    files = manifest["files"]
    for name in RECORD_FILES:
        path = run_dir / name
        there = path.exists() or path.is_symlink()
        if name not in files:
            if there:
                return f"{path}: not a file of the run that completed in {run_dir} ({MANIFEST} does not list it)"
            continue
        if not there:
            return f"{path}: missing; the run that completed in {run_dir} wrote it"
        try:
            same = file_sha256(path) == files[name]
        except (UnsafeOutput, OSError) as exc:
            return f"{path}: cannot be read ({getattr(exc, 'problem', None) or exc})"
        if not same:
            return f"{path}: damaged: not the file the run completed with (its digest is not the one {MANIFEST} holds)"
    return None


def origin_problem(run_dir: Path, scenario: Scenario) -> str | None:
    """Why the finished run in ``run_dir`` is not a run of ``scenario`` with the plug-ins' sources as
    they are now (None: it is one)."""
    manifest, problem = _manifest(run_dir)
    if problem is not None:
        return problem
    if manifest.get("scenario_sha256") != scenario_sha256(scenario):
        return f"{run_dir}: holds the records of another scenario (by its {MANIFEST})"
    now, then = plugin_digests(scenario), manifest["plugins"]
    for part in sorted(set(now) | set(then)):
        if now.get(part) != then.get(part):
            return (f"{run_dir}: its run was made with another version of the plug-in {part} (the source file's "
                    "digest has changed since)")
    return None
