"""Strict JSON for every file the project writes: numbers that JSON cannot hold (NaN, +-Infinity)
are written as null, and a top-level ``"non_finite"`` table says which they were, so strict
parsers read the files and ``read_json`` gives the numbers back.

    {"time_to_target_s": null, ..., "non_finite": {"time_to_target_s": "nan"}}

Numpy numbers and arrays are written as plain numbers and lists. Writes are atomic (a temporary
file, then a rename): a reader sees the old file or the whole new one.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from .files import DamagedFile, open_regular, write_atomic

__all__ = ["NON_FINITE", "dumps_strict", "read_json", "write_json_atomic"]

NON_FINITE = "non_finite"
_NAMES = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _plain(value: Any, path: str, found: dict[str, str]) -> Any:
    if isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        found[path] = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        return None
    if isinstance(value, dict):
        return {str(k): _plain(v, f"{path}.{k}" if path else str(k), found) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{path}[{i}]", found) for i, v in enumerate(value)]
    return value


def dumps_strict(data: dict, indent: int | None = 2) -> str:
    """``data`` as strict JSON (see the module docstring)."""
    found: dict[str, str] = {}
    plain = _plain(data, "", found)
    if found:
        plain[NON_FINITE] = found
    return json.dumps(plain, indent=indent, allow_nan=False, default=str)  # paths and the like as text


def write_json_atomic(path: Path, data: dict) -> None:
    """Write ``data`` as strict JSON so that a reader sees the old file or the whole new one."""
    write_atomic(Path(path), dumps_strict(data))


def read_json(path: Path) -> dict:
    """A JSON object written by ``write_json_atomic``, with its non-finite numbers put back.
    DamagedFile (one line naming the file) for a file that is not one: truncated, edited, empty;
    UnsafeOutput for a FIFO, a device or a folder (refused, not read: it would never end)."""
    try:
        with open_regular(Path(path), follow=True) as fh:  # a FIFO or a device is refused, not read
            data = json.loads(fh.read().decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DamagedFile(f"{path}: damaged, not the JSON that wirelessfl wrote ({exc})") from None
    except RecursionError:
        raise DamagedFile(f"{path}: damaged, not the JSON that wirelessfl wrote (nested too deeply)") from None
    if not isinstance(data, dict):
        raise DamagedFile(f"{path}: damaged: holds a JSON {type(data).__name__}, where wirelessfl writes an object")
    if not isinstance(data.get(NON_FINITE), dict):
        return data
    for where, name in data.pop(NON_FINITE).items():
        _put(data, where, _NAMES.get(name, math.nan))
    return data


def _put(data: Any, where: str, value: float) -> None:
    keys = [k for part in where.split(".") for k in _split_index(part)]
    node = data
    try:
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value
    except (KeyError, IndexError, TypeError):  # a file edited by hand: leave it as it is
        pass


def _split_index(part: str) -> list:
    """'a[2][0]' -> ['a', 2, 0]."""
    name, _, rest = part.partition("[")
    out: list = [name] if name else []
    if rest:
        out += [int(i) for i in ("[" + rest).strip("[]").split("][")]
    return out
