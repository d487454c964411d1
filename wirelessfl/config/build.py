"""Building a scenario: TOML and dicts in, overrides applied, every value validated, parts resolved."""
from __future__ import annotations

import dataclasses
import os
import re
import sys
import unicodedata
from pathlib import Path
from typing import Any, Iterable

from ..fields import ConfigError, build_dataclass, check_option_types, field_value, show, type_hints
from ..files import unreadable_file
from ..plugins import KIND_OF_TABLE, KINDS, OPTION_KINDS, PluginError, registry
from .orbits_table import apply_orbits
from .radio_presets import apply_preset
from .overrides import INHERITED, INHERITED_OF, apply_overrides, flatten, own_fields
from .rules import cross_check
from .tables import OPTIONAL_TABLES, REBUILD, SPECIAL, TABLES, PluginOptions, Scenario
from .writing import to_dict, toml_value

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def load_scenario(path: str | Path, overrides: Iterable[str] = (), environment: bool = True,
                  variants: Iterable[str] | None = None) -> Scenario:
    """Load a TOML scenario file, apply ``key.path=value`` overrides and validate everything.

    ``path`` is a file, or the name of a packaged scenario (``quickstart``, ``paper/training``;
    ``wirelessfl scenarios`` lists them) when no such file exists. ``environment``: apply
    $WIRELESSFL_SET after ``overrides`` (see environment_overrides). Parts given as import paths are looked up in the file's folder first; relative file paths of
    options (traces) are taken from there too. ``variants``: keep only the variants of these names
    (see from_dict).
    """
    path = Path(path)
    if not path.exists():
        from .packaged import packaged_scenario, packaged_scenarios

        path = packaged_scenario(str(path)) or path
        if not path.exists():
            raise ConfigError(f"scenario file {path} does not exist, nor a packaged scenario of that name "
                              f"(packaged: {', '.join(packaged_scenarios())})")
    problem = unreadable_file(path)
    if problem is not None and problem != "no such file":
        raise ConfigError(f"scenario file {path} {problem}")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"scenario file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"scenario file {path} cannot be read: {exc}") from None
    try:
        data = tomllib.loads(text)
    except (ValueError, RecursionError) as exc:  # TOMLDecodeError, an int over 4300 digits, deep nesting
        raise ConfigError(f"scenario file {path} is not valid TOML: {exc}") from None
    data.setdefault("name", safe_name(path.stem))
    extra = environment_overrides() if environment else []
    return from_dict(data, [*overrides, *extra], base_dir=path.resolve().parent, variants=variants)


def environment_overrides() -> list[str]:
    """Overrides from $WIRELESSFL_SET ("key=value;key=value"), applied after a file's own: a
    documented hook to run every command at a small scale (the README's test uses it). The papers'
    recipes ignore it: ``wirelessfl reproduce --scale tiny`` is their small scale."""
    text = os.environ.get("WIRELESSFL_SET", "").strip()
    return [item.strip() for item in text.split(";") if item.strip()]


def from_dict(data: dict, overrides: Iterable[str] = (), base_dir: str | Path | None = None,
              variants: Iterable[str] | None = None) -> Scenario:
    """Build a validated Scenario from a nested dict (as parsed from TOML) plus overrides.

    ``base_dir``: the folder of the scenario file (for import-path parts and relative file paths;
    default: only ``plugin_path``, and the working folder). ``variants``: names of the variants to
    keep (after the overrides; the others are dropped before anything is checked), so that an
    override is checked against the variants that will run only; default all.
    """
    try:
        data = _deep_copy(data)
    except RecursionError:  # e.g. a table header a.a.a... thousands of keys deep
        raise ConfigError("scenario: tables or lists nested too deeply") from None
    apply_overrides(data, overrides)
    if variants is not None:
        _keep_variants(data, list(variants))
    return _build_scenario(data, Path(base_dir) if base_dir is not None else None)


def _keep_variants(data: dict, names: list[str]) -> None:
    """Drop the variants not in ``names`` from ``data`` (in the file's order); a name that is not a
    variant is a ConfigError listing them."""
    table = data.get("variants")
    if not isinstance(table, dict):
        return  # not a table: building it says so
    for name in names:
        if name not in table:
            listed = ", ".join(map(str, table)) or "none"
            raise ConfigError(f"variants.{name}: no such variant; the scenario's variants: {listed}")
    data["variants"] = {k: v for k, v in table.items() if k in set(names)}


def _deep_copy(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _deep_copy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_deep_copy(v) for v in data]
    return data


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


class _Context:
    """What building one scenario needs besides the data: where its parts may live, and, for a
    scenario with variants or a sweep, the parts its members name (by kind)."""

    def __init__(self, base_dir: Path | None, plugin_path: tuple[str, ...], family: dict[str, set] | None):
        self.base_dir = base_dir
        self.plugin_path = list(plugin_path)
        self.family = family

    def other_parts(self, kind) -> list[str]:
        """Names of the other parts of ``kind`` a held option may belong to."""
        names = set(registry(kind.name).names())
        return sorted(names | (self.family or {}).get(kind.name, set()))

    def search_path(self) -> tuple[str, ...]:
        first = [str(self.base_dir)] if self.base_dir is not None else []
        return tuple(dict.fromkeys(first + self.plugin_path))

    def load(self, kind, name: str, path: str) -> type:
        """The part's class; a folder it was found in joins plugin_path (so a run folder's copy of
        the scenario finds it again)."""
        try:
            cls = registry(kind.name).load(name, self.search_path())
        except PluginError as exc:
            raise ConfigError(str(exc)) from None
        self.record_folder(name)
        return cls

    def record_folder(self, name: str) -> None:
        """If ``name`` is an import path found in a folder, keep that folder in plugin_path."""
        from ..plugins import is_import_path, module_folder

        if is_import_path(name):
            folder = module_folder(name.partition(":")[0], self.search_path())
            if folder is not None and folder not in self.plugin_path:
                self.plugin_path.append(folder)


def _build_scenario(data: Any, base_dir: Path | None) -> Scenario:
    if not isinstance(data, dict):
        raise ConfigError(f"scenario = {show(data)}: must be a table")
    fields = {f.name: f for f in dataclasses.fields(Scenario)}
    for key in data:
        if key not in fields:
            raise ConfigError(f"{key}: unknown key; allowed: {', '.join(fields)}")
    apply_preset(data)
    apply_orbits(data)
    _check_units(data.get("link"))
    hints = type_hints(Scenario)
    plugin_path = field_value(fields["plugin_path"], hints["plugin_path"], data.get("plugin_path", []),
                              "plugin_path", base_dir)
    for i, folder in enumerate(plugin_path):
        try:
            is_dir = Path(folder).is_dir()
        except (OSError, ValueError):
            is_dir = False
        if not is_dir:
            raise ConfigError(f"plugin_path[{i}] = {show(folder)}: no such folder")
    family = _family_parts(data) if isinstance(data.get("variants"), dict) and data["variants"] \
        or isinstance(data.get("sweep"), dict) and data["sweep"] else None
    ctx = _Context(base_dir, plugin_path, family)
    for names in (family or {}).values():  # parts the members name: their folder goes with the scenario
        for name in sorted(names):
            ctx.record_folder(name)
    values = {}
    for name, f in fields.items():
        if name in SPECIAL:
            values[name] = _build_special(name, data.get(name, {}), name)
        elif name in OPTIONAL_TABLES and name not in data:
            values[name] = None
        elif name in TABLES:
            values[name] = _build_table(TABLES[name], data.get(name, {}), name, ctx)
        elif name in data and name != "plugin_path":
            values[name] = field_value(f, hints[name], data[name], name)
    values["plugin_path"] = tuple(ctx.plugin_path)
    if "name" in values:
        check_name(values["name"], "name", "a scenario's name")
    scenario = Scenario(**values)
    cross_check(scenario)
    return scenario


_PHYSICAL = (("noise_power", "noise_figure_db"), ("p_bar", "tx_power_dbm"), ("p_max", "tx_power_dbm"),
             ("p_max", "p_max_dbm"))


def _check_units(link: Any) -> None:
    """A power or the noise given both linearly and in physical units is refused: one would be ignored."""
    if not isinstance(link, dict):
        return
    for linear, physical in _PHYSICAL:
        if linear in link and physical in link and not (linear == "p_max" and physical == "tx_power_dbm"
                                                        and "p_max_dbm" in link):
            raise ConfigError(f"link.{linear}: given with link.{physical}, which sets it in physical units; "
                              "keep one")


def _family_parts(data: dict) -> dict[str, set]:
    """The part names that the variants and the sweep of a scenario's raw data give each kind."""
    out: dict[str, set] = {k: set() for k in KINDS}
    entries = []
    variants, sweep = data.get("variants"), data.get("sweep")
    for ov in variants.values() if isinstance(variants, dict) else ():
        if isinstance(ov, dict):
            entries += list(flatten(ov))
    for key, values in flatten(sweep) if isinstance(sweep, dict) else ():
        entries += [(key, v) for v in values] if isinstance(values, list) else []
    for key, value in entries:
        for kind in KINDS.values():
            if key == kind.field and isinstance(value, str):
                out[kind.name].add(value)
    return out


def _build_table(cls, data: Any, path: str, ctx: _Context):
    if not isinstance(data, dict):
        raise ConfigError(f"{path} = {show(data)}: must be a table")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    part_field = next((f for f in fields.values() if "part" in f.metadata), None)
    data = dict(data)
    inherited = data.pop(INHERITED, {})
    sub_tables = {f.name: f for f in fields.values() if "options_of" in f.metadata}
    given_sub = {name: data.pop(name) for name in sub_tables if name in data}
    inherited_sub = {kind: data.pop(aside) for kind, aside in INHERITED_OF.items() if aside in data}
    # "held" is not a key of a file: held options are written as the table's own keys
    extra = {k: data.pop(k) for k in list(data) if k not in fields or k in ("options", "held")}
    if part_field is None and extra:
        key = next(iter(extra))
        raise ConfigError(f"{_join(path, key)}: unknown key; allowed: {', '.join(fields)}")
    hints = type_hints(cls)
    values = {}
    for name, f in fields.items():
        if name in data:
            values[name] = field_value(f, hints[name], data[name], _join(path, name), ctx.base_dir)
    for name, f in sub_tables.items():  # the model's, the dataset's and the partition's options
        kind = KINDS[f.metadata["options_of"]]
        part_name = values.get(kind.key, fields[kind.key].default)
        if not part_name:
            raise ConfigError(f"{kind.field} = {part_name!r}: must name a {kind.name}")
        part = ctx.load(kind, part_name, path)
        explicit = given_sub.get(name, {})
        if not isinstance(explicit, dict):
            raise ConfigError(f"{path}.{name} = {show(explicit)}: must be a table of the {kind.name}'s options")
        values[name] = _build_options(part, kind, part_name, path, {}, explicit, inherited_sub.get(kind.name, {}),
                                      ctx, [])
    if part_field is not None:
        kind = KINDS[part_field.metadata["part"]]
        name = values.get(kind.key, part_field.default)
        if not name:
            raise ConfigError(f"{kind.field} = {name!r}: must name a {kind.name}")
        part = ctx.load(kind, name, path)
        explicit = extra.pop("options", {})
        if not isinstance(explicit, dict):
            raise ConfigError(f"{path}.options = {show(explicit)}: must be a table of the {kind.name}'s options")
        own = sorted(set(fields) - {"options", "held"})
        takes = None if part.Options is None else {f.name for f in dataclasses.fields(part.Options)}
        clash = sorted((takes or set()) & set(own))
        if clash:  # a value written in the table would be the table's field, and the option its default
            raise ConfigError(f"{kind.field} = {name!r}: its option {clash[0]!r} has the name of the field "
                              f"{path}.{clash[0]}, so a value written there would never reach it; rename the option")
        held = {k: v for k, v in extra.items() if ctx.family is not None and (takes is None or k not in takes)
                and _option_of_another(kind, name, k, ctx)}
        for k in held:
            extra.pop(k)
        values["options"] = _build_options(part, kind, name, path, extra, explicit, inherited, ctx, own)
        values["held"] = PluginOptions(held)
    return cls(**values)


def _option_of_another(kind, name: str, key: str, ctx: _Context) -> bool:
    """Whether a part of ``kind`` other than ``name`` that the scenario may name takes ``key``."""
    for other in ctx.other_parts(kind):
        if other == name:
            continue
        try:
            schema = registry(kind.name).load(other, ctx.search_path()).Options
        except Exception:  # a part that cannot be loaded here says nothing about this key
            continue
        if schema is not None and dataclasses.is_dataclass(schema) and \
                key in {f.name for f in dataclasses.fields(schema)}:
            return True
    return False


def _build_options(part: type, kind, name: str, path: str, flat: dict, explicit: dict, inherited: dict,
                   ctx: _Context, own: list[str]):
    """The part's options from the table's extra keys, its ``options`` table and what an override
    moved aside (see the module docstring)."""
    for key in flat:
        if key in explicit:
            raise ConfigError(f"{path}.{key}: given both as {path}.{key} and {path}.options.{key}; keep one")
    sub = f"{path}.{kind.options_key}"
    schema = getattr(part, "Options", None)
    if schema is None:
        if flat:
            key = next(iter(flat))
            raise ConfigError(f"{path}.{key}: unknown key; {kind.field} = {name!r} declares no options class, "
                              f"so its options go in the table [{sub}]; allowed here: {', '.join(own)}")
        return PluginOptions(explicit)
    if not dataclasses.is_dataclass(schema):
        raise ConfigError(f"{kind.field} = {name!r}: {part.__name__}.Options must be a dataclass")
    check_option_types(schema, f"{kind.field} = {name!r}: {getattr(schema, '__name__', 'Options')}")
    names = [f.name for f in dataclasses.fields(schema)]
    for key, where in [(k, f"{path}.{k}") for k in flat] + [(k, f"{sub}.{k}") for k in explicit]:
        if key not in names:
            raise ConfigError(f"{where}: {_unknown_option(kind, name, key, own + names)}")
    # options written as the table's own keys read as the table's; the others as the sub-table's
    at = path if kind.owns_table else sub
    given = {k: (v, f"{at}.{k}") for k, v in inherited.items() if k in names}
    given.update({k: (v, f"{path}.{k}") for k, v in flat.items()})
    given.update({k: (v, f"{sub}.{k}") for k, v in explicit.items()})
    options = build_dataclass(schema, given, at, ctx.base_dir)
    for f in dataclasses.fields(schema):  # options that name a part of their own (protocol.staleness)
        if f.metadata.get("kind") is not None:
            ctx.load(OPTION_KINDS[f.metadata["kind"]], getattr(options, f.name), at)
    return options


def _unknown_option(kind, name: str, key: str, allowed: list[str]) -> str:
    """Why ``key`` is refused, with the built-in parts (of this kind, else of another) that take it."""
    def takers(k) -> list[str]:
        out = []
        for other in registry(k.name).builtins:
            try:
                schema = registry(k.name).load(other).Options
            except Exception:  # a built-in that cannot be imported here says nothing about this key
                continue
            if other != name and schema is not None and dataclasses.is_dataclass(schema) \
                    and key in {f.name for f in dataclasses.fields(schema)}:
                out.append(repr(other))
        return out

    same = takers(kind)
    if same:
        hint = f" (an option of {kind.name} {', '.join(same[:3])}{', ...' if len(same) > 3 else ''})"
    else:
        elsewhere = [(k, t) for k in KINDS.values() if k is not kind for t in [takers(k)] if t]
        hint = (f" (an option of {elsewhere[0][0].name} {elsewhere[0][1][0]}: {elsewhere[0][0].table}.{key})"
                if elsewhere else "")
    if not allowed:
        return f"{kind.name} {name!r} takes no options{hint}"
    if not hint:
        return f"unknown key; allowed: {', '.join(allowed)}"
    return f"not an option of {kind.name} {name!r}{hint}; allowed: {', '.join(allowed)}"


_NAME = re.compile(r"[^\W][\w.+=@,-]*")
NAME_BYTES = 120


def check_name(name: str, path: str, what: str) -> None:
    """A name that becomes a folder (a scenario's, a variant's) is one plain path component."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name.encode("utf-8", "replace")) > NAME_BYTES:
        raise ConfigError(f"{path} = {show(name, 60)}: {what} becomes a folder name: use letters, digits and "
                          f". _ - + = @ , (not first), at most {NAME_BYTES} bytes")


def safe_name(text: str) -> str:
    """``text`` made a valid name (for a default taken from a file name)."""
    name = re.sub(r"[^\w.+=@,-]", "_", text).lstrip(".+=@,-") or "scenario"
    while len(name.encode()) > NAME_BYTES:
        name = name[:-1]
    return name


def _build_special(name: str, table: Any, path: str):
    if not isinstance(table, dict):
        raise ConfigError(f"{path} = {show(table)}: must be a table")
    if name == "variants":
        out, seen = [], {}
        for vname, ov in table.items():
            check_name(vname, f"{path}.{show(vname)}", "a variant's name")
            if not isinstance(ov, dict):
                raise ConfigError(f"{path}.{vname} = {show(ov)}: must be a table of overrides")
            key = unicodedata.normalize("NFKC", vname).casefold()
            if key in seen:
                raise ConfigError(f"{path}.{vname}: names the same folder as variants.{seen[key]} (on a file "
                                  "system that ignores case); give them different names")
            seen[key] = vname
            out.append((vname, tuple(flatten(ov))))
        return tuple(out)
    out = []
    for key, values in flatten(table):
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{path}.{key} = {show(values)}: must be a non-empty list of values")
        out.append((key, tuple(values)))
    return tuple(out)


def member(scenario: Scenario, *assignments: tuple[str, Any]) -> Scenario:
    """Scenario.member: one run of a family, its parts keeping the options set for them."""
    base = to_dict(scenario, only_changed=True)
    base.pop("variants", None)
    base.pop("sweep", None)
    for table in KIND_OF_TABLE:
        node = base.get(table)
        if isinstance(node, dict):
            own = own_fields(table)
            moved = {k: node.pop(k) for k in list(node) if k not in own and k != "options"}
            moved.update(node.pop("options", {}))
            node[INHERITED] = moved
    overrides = []
    for k, v in assignments:
        try:
            overrides.append(f"{k}={toml_value(v)}")
        except (TypeError, ValueError):  # a date, a table in a list, an int too long to print
            raise ConfigError(f"{k} = {show(v)}: must be a number, string, boolean or list") from None
    return from_dict(base, overrides)


def replace(scenario: Scenario, *overrides: str) -> Scenario:
    """Scenario.replace: a copy with dotted overrides applied and validated."""
    return from_dict(to_dict(scenario), overrides)


REBUILD.member, REBUILD.replace = member, replace
