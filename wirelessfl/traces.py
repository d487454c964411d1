"""Traces: per-round, per-device measurements replayed in place of a model (channel gains,
computation times, availability); ``experiments.recording`` records them from a scenario's models.

A trace file holds one row per round and one column per device: ``.npy`` (a 2-D array, read
without pickles) or ``.csv`` (numbers separated by commas; an optional header line of column names
and ``#`` comment lines are skipped). When the rounds run out, a trace either stops the run with a
one-line error or starts over ("cycle"), as its scenario says.
"""
from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .fields import ConfigError, FilePath, option
from .files import replacing, unreadable_file

__all__ = ["Trace", "TraceExhausted", "TraceOptions", "read_table", "write_trace"]

_CACHE: dict[tuple, np.ndarray] = {}


class TraceExhausted(ConfigError):
    """A run needs more rounds than its trace has (and the trace does not cycle)."""


@dataclass(frozen=True)
class TraceOptions:
    """Options of a replayed trace."""

    trace: FilePath = option(doc="CSV or .npy file of rounds x devices (relative paths: from the scenario's folder)")
    trace_end: str = option("stop", choices=("stop", "cycle"),
                            doc="when the rounds run out: stop the run with an error, or start over")


class Trace:
    """A rounds x devices array with what to do when it runs out."""

    def __init__(self, values: np.ndarray, path: str, field: str, end: str = "stop"):
        self.values, self.path, self.field, self.end = values, path, field, end

    @classmethod
    def read(cls, path: str, num_devices: int, field: str, end: str = "stop", *, positive: bool = False,
             nonnegative: bool = False, boolean: bool = False) -> "Trace":
        """Read and check a trace; ConfigError naming ``field`` (e.g. channel.trace) if it does not fit."""
        values = _load(Path(path), field)
        where = f"{field} = {str(path)!r}"
        if values.ndim != 2 or values.shape[0] == 0:
            raise ConfigError(f"{where}: must hold a table of rounds x devices, got shape {values.shape}")
        if values.shape[1] != num_devices:
            raise ConfigError(f"{where}: has {values.shape[1]} columns: must have one per device "
                              f"(devices.count = {num_devices})")
        if not np.isfinite(values).all():
            raise ConfigError(f"{where}: holds values that are not finite numbers")
        if positive and not (values > 0).all():
            raise ConfigError(f"{where}: every value must be > 0")
        if nonnegative and not (values >= 0).all():
            raise ConfigError(f"{where}: every value must be >= 0")
        if boolean:
            if not np.isin(values, (0.0, 1.0)).all():
                raise ConfigError(f"{where}: every value must be 0 or 1")
            values = values.astype(bool)
        return cls(values, str(path), field, end)

    @property
    def rounds(self) -> int:
        """Rows in the trace."""
        return self.values.shape[0]

    def row(self, round_idx: int) -> np.ndarray:
        """The row of ``round_idx`` (a copy); TraceExhausted past the end unless the trace cycles."""
        if round_idx >= self.rounds:
            if self.end != "cycle":
                raise TraceExhausted(f"{self.field} = {self.path!r} has {self.rounds} rounds and the run needs "
                                     f"more; make it longer, or set {self.field}_end = 'cycle' to start over")
            round_idx %= self.rounds
        return self.values[round_idx].copy()


def read_table(path, field: str) -> np.ndarray:
    """A table of numbers from a CSV or .npy file (read as a trace's, checked the same way: a regular
    file, no pickles, plain numbers; ConfigError naming ``field``), read-only."""
    return _load(Path(path), field)


def _load(path: Path, field: str) -> np.ndarray:
    where = f"{field} = {str(path)!r}"
    problem = unreadable_file(path)
    if problem is not None:
        raise ConfigError(f"{where}: {problem}")
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key in _CACHE:
        return _CACHE[key]
    try:
        if path.suffix == ".npy":
            _check_npy_size(path, stat.st_size, where)
            values = np.load(path, allow_pickle=False)
            if values.dtype.kind not in "biuf":  # complex, strings: asarray(float) would drop or fail
                raise ConfigError(f"{where}: holds {values.dtype} values; a trace holds real numbers")
        else:
            values = _read_csv(path, where)
        values = np.asarray(values, dtype=float)
    except ConfigError:
        raise
    except (OSError, ValueError, TypeError) as exc:
        raise ConfigError(f"{where}: cannot be read as a trace: {exc}".replace("\n", " ")) from None
    values.setflags(write=False)
    _CACHE.clear()  # keep one trace: sweeps read the same file for every member
    _CACHE[key] = values
    return values


def _check_npy_size(path: Path, file_bytes: int, where: str) -> None:
    """ConfigError when the .npy header declares more data than the file holds (a header claiming
    7 TiB would otherwise be allocated before the short read is noticed)."""
    with open(path, "rb") as fh:
        fmt = np.lib.format
        version = fmt.read_magic(fh)
        read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, _, dtype = read_header(fh, max_header_size=10_000)
        declared = math.prod(shape) * dtype.itemsize
        if declared > file_bytes - fh.tell():
            raise ConfigError(f"{where}: its header declares {shape} {dtype} values ({declared:,} bytes) and "
                              f"the file holds {file_bytes - fh.tell():,}")


def _read_csv(path: Path, where: str) -> np.ndarray:
    """Strict: blank and '#' lines aside, one optional header line (the first, of names only), then
    numbers only,
    written as plain decimals ("1e-3", "nan" and "inf" are numbers; "1_000" and "0x10" are not)."""
    rows, header_seen = [], False
    with open(path, newline="") as fh:
        for lineno, cells in enumerate(csv.reader(fh), start=1):
            if not cells or cells[0].lstrip().startswith("#"):
                continue
            numbers = [_number(c) for c in cells]
            if None in numbers:
                # a header: the first line, and names only (a row with a bad number is a bad row)
                if rows or header_seen or any(n is not None for n in numbers):
                    col = numbers.index(None)
                    raise ConfigError(f"{where}: line {lineno}, column {col + 1}: {cells[col]!r} is not a number")
                header_seen = True
                continue
            if rows and len(numbers) != len(rows[0]):
                raise ConfigError(f"{where}: line {lineno} has {len(numbers)} columns, the rows before it "
                                  f"{len(rows[0])}")
            rows.append(numbers)
    return np.array(rows, dtype=float).reshape(len(rows), -1 if rows else 0)


_DECIMAL = re.compile(r"\s*[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|nan|inf|infinity)\s*", re.IGNORECASE)


def _number(cell: str) -> float | None:
    """The cell as a float when it is a plain decimal number, else None (Python's float() would also
    take "1_000")."""
    return float(cell) if _DECIMAL.fullmatch(cell) else None


def write_trace(path: str | Path, values: np.ndarray, header: str = "device") -> Path:
    """Write a rounds x devices array as .npy or as CSV (columns named ``{header}_{n}``), atomically."""
    path = Path(path)
    values = np.asarray(values)
    with replacing(path, binary=path.suffix == ".npy") as fh:  # a fresh temporary file, then one rename
        if path.suffix == ".npy":
            np.save(fh, values)
        else:
            writer = csv.writer(fh)
            writer.writerow([f"{header}_{n}" for n in range(values.shape[1])])
            fmt = (lambda v: str(int(v))) if values.dtype == bool else (lambda v: repr(float(v)))
            writer.writerows([fmt(v) for v in row] for row in values)
    return path
