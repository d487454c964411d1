"""Byte-for-byte comparison of two runs' records: every CSV and summary.json under one output folder
against the same file under another (a refactor's check that no record moved).

    python benchmarks/compare_records.py BASE NEW

BASE and NEW are folders written by ``wirelessfl run ... --out``, or folders of such folders. Prints
each file that differs or is missing on either side, and exits 1 if any does (0: all identical).
summary.json's lines of wall-clock time (``"wall_...``) are left out: they measure the machine.
"""
from __future__ import annotations

import sys
from pathlib import Path


def records(root: Path) -> set[Path]:
    """The record files under ``root``, relative to it: every CSV and summary.json."""
    return {p.relative_to(root) for p in root.rglob("*") if p.is_file() and (p.suffix == ".csv"
                                                                              or p.name == "summary.json")}


def content(path: Path) -> bytes:
    """The file's bytes, less a summary's wall-clock lines (the one thing in a record that is not
    the simulation's)."""
    data = path.read_bytes()
    if path.name != "summary.json":
        return data
    return b"".join(line for line in data.splitlines(keepends=True) if not line.lstrip().startswith(b'"wall_'))


def compare(base: Path, new: Path) -> list[str]:
    """One line per record that is missing on a side or differs in a byte."""
    a, b = records(base), records(new)
    problems = [f"only in {base}: {p}" for p in sorted(a - b)] + [f"only in {new}: {p}" for p in sorted(b - a)]
    problems += [f"differs: {p}" for p in sorted(a & b) if content(base / p) != content(new / p)]
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python benchmarks/compare_records.py BASE NEW", file=sys.stderr)
        return 2
    base, new = Path(argv[0]), Path(argv[1])
    problems = compare(base, new)
    for line in problems:
        print(line)
    count = len(records(base))
    print(f"{count} records in {base}: " + ("all identical" if not problems else f"{len(problems)} problems"))
    return 1 if problems or count == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
