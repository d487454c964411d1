"""Typed, validated fields: what a scenario table or a plugin's ``Options`` dataclass is made of.

``option(default, ge=..., choices=..., doc=...)`` declares a field with its allowed range; building
a dataclass from a dict (as parsed from TOML) checks every value against its annotation and range
and raises ConfigError naming the field path, the value and what is allowed, in one line::

    @dataclass(frozen=True)
    class TopKOptions:
        k: int = option(5, ge=1, doc="devices per round")

Annotations understood (``OPTION_TYPES``; any other is refused by ``check_option_types``): bool, int,
float, str, ``Power`` (a linear number or a string in dB), ``FilePath`` (a string; a relative path is
taken from the scenario file's folder), ``Any``, ``X | None``, ``X | Y`` and ``tuple[X, ...]``. This
module does not import torch.
"""
from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
import weakref
from dataclasses import field
from pathlib import Path
from typing import Any, NewType

from .files import unreadable_file

__all__ = ["ConfigError", "FilePath", "NoOptions", "OPTION_TYPES", "Power", "build_dataclass", "check_option_types",
           "check_value", "coerce", "option", "require_memory", "show"]

Power = NewType("Power", float)
"""A power in linear units; the file may also give it as a string in decibels, e.g. "35 dB"."""
FilePath = NewType("FilePath", str)
"""A file; relative paths are resolved against the scenario file's folder (else the working folder)."""


class ConfigError(ValueError):
    """A scenario value is missing, unknown, of the wrong type or out of range."""


@dataclasses.dataclass(frozen=True)
class NoOptions:
    """The options of a part that takes none (every key given for it is an error)."""


def option(default: Any = dataclasses.MISSING, *, ge=None, gt=None, le=None, lt=None, choices=None,
           doc: str = "", allow_inf: bool = False, kind: str | None = None):
    """A dataclass field with its allowed range, choices and a one-line description.

    ``default`` omitted: the field is required. Bounds and choices apply to every item of a tuple.
    Floats must be finite unless ``allow_inf``. ``kind``: the value names a part of that kind
    (``wirelessfl.plugins.OPTION_KINDS``, e.g. "staleness"), which the kind's registry finds and
    checks when the scenario is read, instead of a fixed list of choices.
    """
    meta = {"ge": ge, "gt": gt, "le": le, "lt": lt, "choices": choices, "doc": doc, "allow_inf": allow_inf,
            "kind": kind}
    if isinstance(default, (list, dict, set)):
        raise TypeError("mutable default: use a tuple")
    return field(default=default, metadata=meta)


_DB = re.compile(r"^\s*([-+]?\d+(\.\d*)?([eE][-+]?\d+)?)\s*dB\s*$")


def coerce(value: Any, hint: Any, path: str, base_dir: Path | None = None) -> Any:
    """Check ``value`` against the annotated type, converting only where it is lossless."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return coerce(value, args[0], path, base_dir)
        wanted = []
        for arg in args:  # the first type the value fits (bool | str: true, false or a name)
            try:
                return coerce(value, arg, path, base_dir)
            except ConfigError as exc:
                wanted.append(str(exc).partition(": must be ")[2] or str(exc))
        raise ConfigError(f"{path} = {show(value)}: must be {' or '.join(wanted)}")
    if hint is Power:
        if isinstance(value, str):
            match = _DB.match(value)
            if not match:
                raise ConfigError(f"{path} = {show(value)}: must be a number (linear) or a string like '35 dB'")
            try:
                return 10 ** (float(match.group(1)) / 10)
            except OverflowError:
                raise ConfigError(f"{path} = {show(value)}: must be finite") from None
        return coerce(value, float, path)
    if hint is FilePath:
        text = coerce(value, str, path)
        if not text or "\0" in text:
            raise ConfigError(f"{path} = {show(value)}: must be a file path")
        try:
            p = Path(text).expanduser()
            resolved = str(p if p.is_absolute() else ((base_dir or Path.cwd()) / p).resolve())
        except (OSError, ValueError, RuntimeError) as exc:  # a name too long, a loop of links
            raise ConfigError(f"{path} = {show(value)}: not a usable file path ({exc})") from None
        problem = unreadable_file(Path(resolved))  # a file or a folder (plugin_path): never a FIFO or a device
        if problem is not None and "not a regular file" in problem:
            where = "" if resolved == text else f" ({resolved})"
            raise ConfigError(f"{path} = {show(value)}{where}: {problem}; wirelessfl reads regular files only")
        return resolved
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path} = {show(value)}: must be true or false")
        return value
    if hint is int:
        given = value
        if isinstance(value, float) and value.is_integer():  # 1e6 as TOML writes it: a whole number, kept exact
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path} = {show(value)}: must be an integer")
        if not -2 ** 63 <= value < 2 ** 63:
            raise ConfigError(f"{path} = {show(given)}: must be a 64-bit integer")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path} = {show(value)}: must be a number")
        try:
            value = float(value)
        except OverflowError:  # an int beyond the float range
            raise ConfigError(f"{path} = {show(value)}: must be finite") from None
        if math.isnan(value):
            raise ConfigError(f"{path} = nan: must be a number")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path} = {show(value)}: must be a string")
        return value
    if origin is tuple:
        if not isinstance(value, list):
            raise ConfigError(f"{path} = {show(value)}: must be a list")
        item = typing.get_args(hint)[0]
        return tuple(coerce(v, item, f"{path}[{i}]", base_dir) for i, v in enumerate(value))
    if hint is Any or hint is typing.Any:
        return value
    raise TypeError(f"unsupported annotation {hint!r} at {path}")  # a bug in the declaring class


OPTION_TYPES = ("bool, int, float, str, Power (linear, or a string like '35 dB'), FilePath, Any, X | None, "
                "X | Y, tuple[X, ...] (a list in TOML; X and Y themselves of these types)")
"""The annotations an option (or a table's field) may have: what ``coerce`` checks a value against."""

_SCALARS = (bool, int, float, str, Power, FilePath, Any)


def _known_type(hint: Any) -> bool:
    """Whether ``coerce`` understands the annotation ``hint`` (a bare ``tuple`` it does not: its items' type)."""
    if any(hint is t for t in _SCALARS):
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return all(_known_type(a) for a in args if a is not type(None))
    if origin is tuple:
        return len(args) == 2 and args[1] is Ellipsis and _known_type(args[0])
    return False


def check_option_types(cls, where: str) -> None:
    """ConfigError, one line naming the field and the allowed types, for a field of the dataclass
    ``cls`` whose annotation ``coerce`` cannot check a value against (``tuple``, ``list[int]``, ...):
    said when the part is named, not as a TypeError when a value is first given."""
    try:
        hints = type_hints(cls)
    except Exception as exc:  # an annotation that names something undefined
        raise ConfigError(f"{where}: its annotations cannot be read ({type(exc).__name__}: {exc})") from None
    for f in dataclasses.fields(cls):
        hint = hints.get(f.name, f.type)
        if not _known_type(hint):
            shown = getattr(hint, "__name__", None) if isinstance(hint, type) else None
            raise ConfigError(f"{where}.{f.name}: annotation {shown or str(hint).replace('typing.', '')} is not an "
                              f"option type; allowed: {OPTION_TYPES}")


def show(value: Any, limit: int = 200) -> str:
    """repr of a value for a message: shortened, and safe for ints too long to print (ValueError)."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        text = f"<{type(value).__name__} too large to print>"
    return text if len(text) <= limit else text[:limit] + "..."


_BOUNDS = (("ge", lambda a, b: a >= b, ">="), ("gt", lambda a, b: a > b, ">"),
           ("le", lambda a, b: a <= b, "<="), ("lt", lambda a, b: a < b, "<"))


def check_value(value: Any, meta: typing.Mapping, path: str, allow_inf: bool = False) -> Any:
    """The field's choices and bounds, for the value or every item of a tuple; floats must be finite."""
    items = value if isinstance(value, tuple) else (value,)
    for v in items:
        if meta.get("choices") is not None and v not in meta["choices"]:
            allowed = ", ".join(repr(c) for c in meta["choices"])
            raise ConfigError(f"{path} = {show(v)}: must be one of {allowed}")
        for key, ok, word in _BOUNDS:
            bound = meta.get(key)
            if bound is not None and not ok(v, bound):
                raise ConfigError(f"{path} = {show(v)}: must be {word} {bound}")
        if isinstance(v, float) and math.isinf(v) and not allow_inf:
            raise ConfigError(f"{path} = {show(v)}: must be finite")
    return value


def field_value(f: dataclasses.Field, hint: Any, value: Any, path: str, base_dir: Path | None = None) -> Any:
    """One field's value, coerced and checked (``allow_inf`` in the field's metadata admits inf)."""
    return check_value(coerce(value, hint, path, base_dir), f.metadata, path, f.metadata.get("allow_inf", False))


_HINTS: "weakref.WeakKeyDictionary[type, dict]" = weakref.WeakKeyDictionary()


def type_hints(cls) -> dict:
    """typing.get_type_hints(cls), kept per class: evaluating the annotations (strings, under
    ``from __future__ import annotations``) was a third of the time of loading a scenario."""
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def build_dataclass(cls, values: dict[str, tuple[Any, str]], missing_path: str,
                    base_dir: Path | None = None):
    """An instance of the dataclass ``cls`` from ``{field: (value, its path)}``; fields not given
    take their defaults, a required one missing is a ConfigError at ``missing_path.field``. A
    ValueError raised by the class itself (``__post_init__``) becomes a ConfigError."""
    hints = type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in values:
            value, path = values[f.name]
            kwargs[f.name] = field_value(f, hints[f.name], value, path, base_dir)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{missing_path}.{f.name}: required (no default)")
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{missing_path}: {exc}") from None


def physical_memory() -> int | None:
    """Bytes of memory of this machine (None where the system does not say)."""
    import os

    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def require_memory(path: str, value: Any, nbytes: float, what: str) -> None:
    """ConfigError before anything runs when ``what`` would need more memory than the machine has."""
    total = physical_memory()
    if total is not None and nbytes > 0.9 * total:
        raise ConfigError(f"{path} = {show(value)}: {what} needs about {_size(nbytes)} of memory and this machine "
                          f"has {_size(total)}")


def _size(nbytes: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if nbytes < 1024 or unit == "PB":
            return f"{nbytes:.3g} {unit}"
        nbytes /= 1024
    return f"{nbytes:.3g} PB"
