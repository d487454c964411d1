"""Dotted overrides (``--set``, ``WIRELESSFL_SET``, a sweep's grid, ``Scenario.replace``) applied to a
scenario's data before it is built: ``table.key=value`` parsed as a TOML value, set where the field
lives (an option of the part a table names is ``table.k`` or ``table.options.k``), the options of a
part that an override replaces moved aside for the new part to take what it shares, and the value
carried into every variant that sets the field itself. Refused in one line: an override that would
make the variants one run, or one of a key the sweep sets."""
from __future__ import annotations

import dataclasses
import re
import sys
from typing import Any, Iterable

from ..fields import ConfigError
from ..plugins import KIND_OF_TABLE, KINDS
from .tables import SPECIAL, TABLES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["INHERITED", "INHERITED_OF", "apply_overrides", "flatten", "own_fields", "parse_value"]


class _Inherited:
    """Key of the options a table held before an override named another part (never in TOML)."""

    def __init__(self, kind: str = ""):
        self.kind = kind

    def __repr__(self):
        return f"<inherited {self.kind} options>" if self.kind else "<inherited options>"


INHERITED = _Inherited()
_PART_FIELDS = {k.field for k in KINDS.values()}
INHERITED_OF = {k.name: _Inherited(k.name) for k in KINDS.values() if not k.owns_table}
"""The same for the parts whose options are a sub-table of their own (learning.model_options, ...)."""


def apply_overrides(data: dict, overrides: Iterable[str]) -> None:
    """Apply each ``KEY=VALUE`` of ``overrides`` to ``data`` (a scenario's nested dict), in order."""
    variants = data.get("variants")
    known = list(variants) if isinstance(variants, dict) else []
    for item in overrides:
        key, value = _parse_override(item)
        _check_variant_named(key, known)
        _check_not_replaced(data, key)
        _apply_override(data, key, value)
        _apply_to_variants(data, key, value)


def _apply_to_variants(data: dict, key: str, value: Any) -> None:
    """An override reaches every variant, as a sweep's grid value does: a variant that sets the field
    itself (``protocol.concurrency = 20`` in async.toml's fedbuff) gets the override's value instead
    (also where it wrote the field in the other form, ``protocol.options.concurrency``)."""
    variants = data.get("variants")
    if not isinstance(variants, dict) or key.split(".")[0] in SPECIAL:
        return
    forms = set(_forms(key))
    for name, overrides in list(variants.items()):
        if not isinstance(overrides, dict):
            continue
        flat = list(flatten(overrides))  # nested tables and quoted dotted keys alike (scenario.toml writes those)
        hits = [i for i, (k, _) in enumerate(flat) if k in forms]
        if hits:  # the override's value where the variant set the field first: a part named before its options
            variants[name] = dict((key, value) if i == hits[0] else (k, v) for i, (k, v) in enumerate(flat)
                                  if i == hits[0] or i not in hits)


def _forms(key: str) -> list[str]:
    """The ways of writing the field ``key``: an option of the part a table names is ``table.k`` or
    ``table.options.k``."""
    parts = key.split(".")
    if parts[0] not in KIND_OF_TABLE:
        return [key]
    if len(parts) == 2 and parts[1] not in own_fields(parts[0]) and parts[1] != "options":
        return [key, f"{parts[0]}.options.{parts[1]}"]
    if len(parts) == 3 and parts[1] == "options" and parts[2] not in own_fields(parts[0]):
        return [key, f"{parts[0]}.{parts[2]}"]
    return [key]




def _check_variant_named(key: str, known: list) -> None:
    """``variants.NAME...`` of a scenario that has variants must name one of them: a misspelt name
    would add a variant, and so a run, of its own. (A scenario without variants may be given some.)"""
    parts = key.split(".")
    if parts[0] == "variants" and len(parts) > 1 and known and parts[1] not in known:
        raise ConfigError(f"{key}: {parts[1]!r} is not a variant of the scenario; its variants: "
                          f"{', '.join(map(str, known))}")


def _check_not_replaced(data: dict, key: str) -> None:
    """An override of the part that every variant names would make the variants one run (they differ
    in it), and one of a key the sweep sets would change nothing: refuse them. Any other override
    reaches every variant (``_apply_to_variants``)."""
    variants, sweep = data.get("variants"), data.get("sweep")
    if key.split(".")[0] in SPECIAL:
        return
    if key in _PART_FIELDS and isinstance(variants, dict) and len(variants) > 1 and all(
            isinstance(ov, dict) and key in dict(flatten(ov)) for ov in variants.values()):
        names = ", ".join(map(str, variants))
        first = next(iter(variants))
        raise ConfigError(f"{key}: every variant sets it ({names}): they differ in it, and an override would "
                          f"make them one run; set it for one variant, e.g. variants.{first}.{key}=...")
    if isinstance(sweep, dict) and key in dict(flatten(sweep)):
        raise ConfigError(f"{key}: the scenario's [sweep] sets it, so an override would change nothing; "
                          f"give its values to the sweep instead (--grid {key}=...)")


def parse_value(text: str) -> Any:
    """Parse an override value as a TOML value (1000, 1e-3, true, inf, [1, 2]); else a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except (ValueError, RecursionError):  # TOMLDecodeError, an int over 4300 digits, deep nesting
        return text


def _parse_override(item: str) -> tuple[str, Any]:
    if "=" not in item:
        raise ConfigError(f"override {item!r}: expected KEY=VALUE, e.g. scheduler.V=1000")
    key, _, text = item.partition("=")
    key = key.strip()
    if not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*", key):
        raise ConfigError(f"override {item!r}: KEY must be a dotted field path, e.g. scheduler.V")
    return key, parse_value(text.strip())


def own_fields(table: str) -> set[str]:
    return {f.name for f in dataclasses.fields(TABLES[table])} - {"options", "held"}


def _apply_override(data: dict, key: str, value: Any) -> None:
    """Set ``key`` in ``data``. In a table that names a part, naming another part moves the
    table's options aside (the new part keeps those it also takes), and an option set at
    ``table.k`` replaces the one at ``table.options.k`` (and the other way round)."""
    parts = key.split(".")
    kind = KIND_OF_TABLE.get(parts[0])
    node = data.get(parts[0])
    if isinstance(node, dict):
        _move_sub_table_options(node, parts, value)
    if kind is not None and len(parts) in (2, 3) and isinstance(node, dict):
        own = own_fields(parts[0])
        opts = node.get("options")
        if parts[1] == kind.key and len(parts) == 2:
            default = next(f.default for f in dataclasses.fields(TABLES[parts[0]]) if f.name == kind.key)
            if value != node.get(kind.key, default):
                moved = dict(node.pop(INHERITED, {}))
                if isinstance(opts, dict):
                    moved.update(node.pop("options"))
                moved.update({k: node.pop(k) for k in list(node) if isinstance(k, str) and k not in own
                              and k != "options"})
                node[INHERITED] = moved
        elif len(parts) == 2 and parts[1] not in own and parts[1] != "options":
            if isinstance(opts, dict):
                opts.pop(parts[1], None)
            node.get(INHERITED, {}).pop(parts[1], None)
        elif len(parts) == 3 and parts[1] == "options":
            if parts[2] not in own:
                node.pop(parts[2], None)
            node.get(INHERITED, {}).pop(parts[2], None)
    _set_dotted(data, key, value)


def _move_sub_table_options(node: dict, parts: list[str], value: Any) -> None:
    """Naming another model, dataset or partition moves its options sub-table aside (the new part keeps
    the options it also takes); an option set again is no longer inherited."""
    for kind in KINDS.values():
        if kind.owns_table or kind.table != parts[0]:
            continue
        aside = INHERITED_OF[kind.name]
        if parts[1:] == [kind.key]:
            default = next(f.default for f in dataclasses.fields(TABLES[parts[0]]) if f.name == kind.key)
            if value != node.get(kind.key, default):
                moved = dict(node.pop(aside, {}))
                if isinstance(node.get(kind.options_key), dict):
                    moved.update(node.pop(kind.options_key))
                node[aside] = moved
        elif len(parts) == 3 and parts[1] == kind.options_key:
            node.get(aside, {}).pop(parts[2], None)


def _set_dotted(data: dict, key: str, value: Any) -> None:
    parts = key.split(".")
    node = data
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{'.'.join(parts[:i + 1])}: is a value, not a table; cannot set {key}")
        node = child
    node[parts[-1]] = value


def flatten(table: dict, prefix: str = "") -> Iterable[tuple[str, Any]]:
    """The (dotted key, value) pairs of a nested table, in order."""
    for key, value in table.items():
        dotted = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            yield from flatten(value, dotted)
        else:
            yield dotted, value
