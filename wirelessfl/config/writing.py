"""Writing a scenario back: a nested dict and TOML text that load to an equal scenario."""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

from .tables import PluginOptions


def to_dict(scenario, only_changed: bool = False) -> dict:
    """The scenario as a nested dict that from_dict reads back to an equal scenario.

    A part's options go in the table's ``options`` sub-table (the model's, dataset's and partition's
    in ``learning.model_options``, ``learning.dataset_options``, ``learning.partition_options``). With ``only_changed``, fields and
    options at their default value are left out: the canonical form used to key cached runs, which
    stays the same when a later version adds fields with defaults.
    """
    out: dict[str, Any] = {}
    for f in dataclasses.fields(scenario):
        value = getattr(scenario, f.name)
        if f.name == "variants":
            if value:
                out[f.name] = {vname: dict(ov) for vname, ov in value}
        elif f.name == "sweep":
            if value:
                out[f.name] = {k: list(v) for k, v in value}
        elif dataclasses.is_dataclass(value):
            table = _plain_table(value, only_changed)
            if table or not only_changed:
                out[f.name] = table
        elif value is not None and not (only_changed and f.name == "plugin_path" and not value):
            out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


def _plain_table(value, only_changed: bool) -> dict:
    """A dataclass (a table or a part's Options) as a dict: tuples as lists, None left out."""
    defaults = {f.name: f.default for f in dataclasses.fields(value)}
    derived = value.derived_fields() if hasattr(value, "derived_fields") else ()
    table = {}
    for f in dataclasses.fields(value):
        if f.name in derived:  # computed from the physical fields written beside it
            continue
        v = getattr(value, f.name)
        if ("options" in f.metadata or "options_of" in f.metadata) and v is not None:
            opts = v.to_dict() if isinstance(v, PluginOptions) else _plain_table(v, only_changed)
            if opts:
                table[f.name] = opts
        elif f.name == "held" and "held" in f.metadata:
            table.update(v.to_dict())
        elif v is not None and not (only_changed and defaults[f.name] == v):
            table[f.name] = _plain(v)
    return table


def _plain(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    return v


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if math.isnan(value):
            return "nan"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + "".join(_ESCAPES.get(c) or (f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c)
                             for c in value) + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_quote_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {value!r} as TOML")


def dumps(scenario, only_changed: bool = False) -> str:
    """The scenario as TOML text (read back by load_scenario to an equal scenario).

    ``only_changed`` leaves out fields at their defaults (see to_dict).
    """
    data = to_dict(scenario, only_changed)
    lines = [f"{k} = {toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    held = {f.name: getattr(scenario, f.name).held for f in dataclasses.fields(scenario)
            if isinstance(getattr(getattr(scenario, f.name), "held", None), PluginOptions)}

    def table(name: str, body: dict) -> None:
        scalars = {k: v for k, v in body.items() if not isinstance(v, dict)}
        lines.append(f"\n[{name}]")
        kept = held.get(name, ())
        lines.extend(f"{_quote_key(k)} = {toml_value(v)}" for k, v in scalars.items() if k not in kept)
        if kept:  # a family's options of the parts its variants or sweep name, not of this table's own part
            lines.append("# options of the parts that variants or the sweep name (not of this table's own part):")
            lines.extend(f"{_quote_key(k)} = {toml_value(v)}" for k, v in scalars.items() if k in kept)
        for k, v in body.items():
            if isinstance(v, dict):
                table(f"{name}.{_quote_key(k)}", v)

    for k, v in data.items():
        if isinstance(v, dict):
            table(k, v)
    return "\n".join(lines) + "\n"


def _quote_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else toml_value(key)
