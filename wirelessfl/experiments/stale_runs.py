"""What a scenario's output folder holds besides this scenario's runs, before ``run_variants`` writes
there: files that are not a run are refused unless overwrite is asked, and with overwrite the runs
that are not this scenario's variants (a previous scenario's, whose folders ``plot`` would draw with
the new ones) are removed, or the whole call is refused before anything is removed."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from ..files import FolderLock, UnsafeOutput

__all__ = ["foreign_entries", "remove_stale_runs", "stale_runs"]

LOCK = ".lock"
"""FolderLock's file, in a scenario's folder and in each run folder."""


def foreign_entries(out: Path, variants: Iterable[str], run_files: Iterable[str]) -> list[str]:
    """Names in ``out`` that are neither a variant's folder, the scenario's own files (scenario.toml,
    index.json, its lock) nor the figures a run draws there (*.png): what a folder that does not hold
    this scenario's runs has in it. Empty for a folder that does not exist."""
    if not out.is_dir():
        return []
    own = {"scenario.toml", "index.json", LOCK, *variants}
    return sorted(p.name for p in out.iterdir() if p.name not in own and not (p.suffix == ".png" and p.is_file()))


def stale_runs(out: Path, variants: Iterable[str], run_files: Iterable[str]) -> list[Path]:
    """The runs in ``out`` that are not this scenario's variants: ``out`` itself when it is a run's
    folder (run files of its own besides scenario.toml), and each sub-folder holding run files. A
    link is never one (never followed, never removed: check_folder refuses it where it matters)."""
    if not out.is_dir():
        return []
    run_files, keep = tuple(run_files), set(variants)
    found = [out] if any((out / n).exists() for n in run_files if n != "scenario.toml") else []
    for sub in sorted(out.iterdir()):
        if sub.name not in keep and sub.is_dir() and not sub.is_symlink() \
                and any((sub / n).exists() or (sub / n).is_symlink() for n in run_files):
            found.append(sub)
    return found


def remove_stale_runs(out: Path, stale: list[Path], run_files: Iterable[str],
                      notice: Callable[[str], None] | None = None) -> None:
    """Remove the runs ``stale`` (from stale_runs): their run files, and each sub-folder once empty.
    A sub-folder that holds anything else (a file that is not a run's, a link) is refused for all of
    them (UnsafeOutput naming it) before anything is removed."""
    run_files = tuple(run_files)
    removable = set(run_files) | {LOCK}
    for folder in stale:
        if folder == out:
            continue  # the scenario's folder itself: only its run files go, its other files stay
        other = sorted(p.name for p in folder.iterdir() if p.name not in removable or p.is_symlink()
                       or not p.is_file())
        if other:
            raise UnsafeOutput(f"{folder}: a run that is not a variant of this scenario, with files that are not a "
                               f"run's ({', '.join(other[:5])}); it is not removed: move it away, or choose another "
                               "output folder (--out, out_dir=)")
    for folder in stale:
        with FolderLock(folder):  # a run another process is writing there is refused (FolderBusy), not cut
            for name in run_files:
                if folder == out and name == "scenario.toml":
                    continue  # the new scenario's replaces it
                path = folder / name
                if path.is_file() and not path.is_symlink():
                    path.unlink()
        if folder != out:
            (folder / LOCK).unlink(missing_ok=True)
            folder.rmdir()
        if notice is not None:
            notice(f"{folder}: removed (a run that is not a variant of this scenario; --overwrite)")
