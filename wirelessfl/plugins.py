"""The kinds of part a scenario names, and where their names come from.

A scenario picks a round protocol (``protocol.name``), a scheduler (``scheduler.name``), a learning
algorithm (``learning.algorithm``), a fading channel (``channel.model``), a computation model
(``devices.compute``), an access scheme (``link.access``), the data side of training: a model
(``learning.model``), a dataset (``learning.dataset``) and a partition over devices
(``learning.partition``), and, where they apply, an association rule (``network.association``,
``wirelessfl.network.association.ASSOCIATIONS``, group ``wirelessfl.associations``, options in
``[network.association_options]``) and a harvest law (``devices.harvest``, ``wirelessfl.harvest.HARVESTS``,
group ``wirelessfl.harvests``, options in ``[devices.harvest_options]``). Each value is

* a built-in name, listed in the kind's :class:`Registry` next to the classes it names
  (``wirelessfl.sim.protocols.PROTOCOLS``, ``wirelessfl.scheduling.SCHEDULERS``,
  ``wirelessfl.learning.ALGORITHMS``, ``wirelessfl.wireless.CHANNELS``, ``wirelessfl.devices.COMPUTE``,
  ``wirelessfl.access.ACCESS``, ``wirelessfl.learning.MODELS``, ``wirelessfl.learning.DATASETS``,
  ``wirelessfl.learning.PARTITIONS``);
* a name an installed package registers under the kind's entry-point group
  (``wirelessfl.protocols``, ``wirelessfl.schedulers``, ``wirelessfl.algorithms``,
  ``wirelessfl.channels``, ``wirelessfl.compute``, ``wirelessfl.access``, ``wirelessfl.models``,
  ``wirelessfl.datasets``, ``wirelessfl.partitions``);
* or an import path ``"module.path:Name"``, looked up in the scenario file's folder first, then on
  ``sys.path``.

Every part is a class that fits its kind's protocol (:class:`Kind.protocol`): it has the protocol's
required members, and the optional ones, which it inherits with their defaults by subclassing the
protocol. A model may also be a plain function (``Kind.functions``): it is called as
``model(input_shape, num_classes, **options)`` and gets the protocol's defaults through
:class:`FunctionPart`. A part's options come from the scenario as an instance of its ``Options``
dataclass (validated like the built-in fields) or, without one, as a plain dict: from the table
``[<table>.options]`` (and the table's own keys) for the first six kinds, from
``[learning.model_options]``, ``[learning.dataset_options]`` and ``[learning.partition_options]``
for the last three (``Kind.options_key``). See docs/extending.md.

Some parts are named by an option of another part rather than by a table's key
(:data:`OPTION_KINDS`): the staleness function of the event protocols (``protocol.staleness``,
``wirelessfl.sim.protocols.staleness.STALENESS``, entry-point group ``wirelessfl.staleness``). Their names are
found the same three ways; the option's field says so with ``option(..., kind="staleness")``, and
reading the scenario checks the name through the kind's registry.

This module does not import torch; the registries import a part's module only when it is named.
"""
from __future__ import annotations

import functools
import importlib
import importlib.metadata
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

__all__ = ["KINDS", "OPTION_KINDS", "FunctionPart", "Kind", "PartError", "PluginError", "Registry", "part_class",
           "registry"]


class PluginError(ValueError):
    """A part named in a scenario cannot be found, imported, or does not fit its protocol."""


class PartError(ValueError):
    """A part handed the simulator something outside its contract (checked where it enters)."""


@dataclass(frozen=True)
class Kind:
    """One kind of part: where a scenario names it and where its built-ins and protocol live."""

    name: str        # "scheduler"
    table: str       # the scenario table that names it: "scheduler"
    key: str         # the key in that table: "name"
    group: str       # the entry-point group of installed plugins
    registry: str    # "module:attribute" of the kind's Registry
    required: tuple[str, ...]  # members a part must define itself (the protocol has no default);
    # an entry "a|b+c" is met by a, or by b and c together
    options_key: str = "options"  # the table's sub-table of the part's options
    functions: bool = False  # a plain function may be the part (models), besides a class

    @property
    def field(self) -> str:
        """The dotted scenario field that names the part, e.g. ``scheduler.name``."""
        return f"{self.table}.{self.key}"

    @property
    def owns_table(self) -> bool:
        """True for the kind whose options may also be written as the table's own keys
        (``scheduler.V``) and held for other parts; the learning table's model, dataset and
        partition keep theirs in their own sub-tables only."""
        return self.options_key == "options"


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("protocol", "protocol", "name", "wirelessfl.protocols", "wirelessfl.sim.protocols:PROTOCOLS",
         ("from_scenario",)),
    Kind("scheduler", "scheduler", "name", "wirelessfl.schedulers", "wirelessfl.scheduling:SCHEDULERS",
         ("from_scenario", "decide")),
    Kind("algorithm", "learning", "algorithm", "wirelessfl.algorithms", "wirelessfl.learning:ALGORITHMS",
         ("from_scenario", "round|local_updates+apply_updates")),
    Kind("channel", "channel", "model", "wirelessfl.channels", "wirelessfl.wireless:CHANNELS",
         ("from_scenario", "draw")),
    Kind("compute", "devices", "compute", "wirelessfl.compute", "wirelessfl.devices:COMPUTE",
         ("from_scenario", "compute_times")),
    Kind("access", "link", "access", "wirelessfl.access", "wirelessfl.access:ACCESS",
         ("from_scenario", "airtime_s", "schedule")),
    Kind("rate", "link", "rate", "wirelessfl.rates", "wirelessfl.radio.rates:RATES", ("from_link", "rate_bps"),
         options_key="rate_options"),
    Kind("model", "learning", "model", "wirelessfl.models", "wirelessfl.learning:MODELS", (),
         options_key="model_options", functions=True),
    Kind("dataset", "learning", "dataset", "wirelessfl.datasets", "wirelessfl.learning:DATASETS",
         ("from_scenario", "load"), options_key="dataset_options"),
    Kind("partition", "learning", "partition", "wirelessfl.partitions", "wirelessfl.learning:PARTITIONS",
         ("from_scenario", "split"), options_key="partition_options"),
    Kind("compression", "learning", "compression", "wirelessfl.compressors",
         "wirelessfl.learning.compression:COMPRESSORS", ("bits", "encode", "decode"),
         options_key="compression_options"),
    Kind("association", "network", "association", "wirelessfl.associations",
         "wirelessfl.network.association:ASSOCIATIONS", ("from_scenario", "associate"),
         options_key="association_options"),
    Kind("harvest", "devices", "harvest", "wirelessfl.harvests", "wirelessfl.harvest:HARVESTS",
         ("from_scenario", "harvest"), options_key="harvest_options"),
)}
"""The kinds by name. The engine, the runner, the recorder and the config know parts only through these."""

OPTION_KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("staleness", "protocol", "staleness", "wirelessfl.staleness", "wirelessfl.sim.protocols.staleness:STALENESS",
         ("__call__",)),
)}
"""Kinds of part named by an option of another part (``table.key`` is that option), not by a table of
the scenario: the config checks their names where an option declares ``kind=...``, and walks only
:data:`KINDS` for the parts a scenario is made of."""

KIND_OF_TABLE = {k.table: k for k in KINDS.values() if k.owns_table}
"""The kind that owns each table's ``options`` (and the option keys written in the table itself)."""


def _kind(name: str) -> Kind:
    """The kind called ``name``, in :data:`KINDS` or :data:`OPTION_KINDS`."""
    return KINDS[name] if name in KINDS else OPTION_KINDS[name]


def _import_attr(ref: str):
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


class Registry:
    """The built-in parts of one kind by name, each given as ``"module:Class"`` and imported when named.

    ``protocol``: ``"module:Class"`` of the kind's protocol. Lookups go built-ins, then entry
    points of installed packages, then import paths (see the module docstring). ``adapter``:
    ``"module:function"`` that turns a class of another framework into a part, ``adapter(cls, where)``,
    returning ``cls`` itself when it is not one (the algorithms' adapter runs Flower strategies).
    """

    def __init__(self, kind: str, protocol: str, builtins: Mapping[str, str], adapter: str | None = None):
        self.kind = _kind(kind)
        self._protocol = protocol
        self.builtins = dict(builtins)
        self._adapter = adapter
        self._loaded: dict[tuple, type] = {}

    @property
    def protocol(self) -> type:
        """The kind's protocol class (imported on first use)."""
        return _import_attr(self._protocol)

    def installed(self) -> dict[str, importlib.metadata.EntryPoint]:
        """Names registered by installed packages under the kind's entry-point group."""
        return {ep.name: ep for ep in importlib.metadata.entry_points(group=self.kind.group)}

    def names(self, installed: Mapping[str, object] | None = None) -> list[str]:
        """Every name that needs no import path: built-ins first, then installed plugins (``installed``:
        those already looked up, which takes a scan of every installed package)."""
        installed = self.installed() if installed is None else installed
        return list(self.builtins) + sorted(n for n in installed if n not in self.builtins)

    def load(self, name: str, plugin_path: Sequence[str] = ()) -> type:
        """The class a scenario's value names; PluginError (one line, naming the field) if none fits."""
        key = (name, tuple(plugin_path))
        if key in self._loaded:
            return self._loaded[key]
        where = f"{self.kind.field} = {name!r}"
        if name in self.builtins:
            cls = _import_attr(self.builtins[name])
        elif ":" in name:
            cls = _load_import_path(name, plugin_path, where)
        else:
            installed = self.installed()
            entry = installed.get(name)
            if entry is None:
                listed = ", ".join(repr(n) for n in self.names(installed))
                raise PluginError(f"{where}: unknown {self.kind.name}; choose from {listed}, "
                                  f"or give an import path 'module:{'Name' if self.kind.functions else 'Class'}' "
                                  "(see docs/extending.md)")
            try:
                cls = entry.load()
            except (Exception, SystemExit) as exc:  # whatever the plugin's import raises
                raise PluginError(f"{where}: loading the installed plugin {entry.value} failed: "
                                  f"{_one_line(exc)}") from None
        if self._adapter is not None:
            cls = _import_attr(self._adapter)(cls, where)
        cls = self.fitted(cls, where)
        self._loaded[key] = cls
        return cls

    def load_any(self, name: str) -> type:
        """The class ``name`` was loaded as (from whichever plugin path the scenario searched), else
        ``load(name)``: for a part built from one table of the scenario, without its plugin path."""
        for (loaded, _), cls in self._loaded.items():
            if loaded == name:
                return cls
        return self.load(name)

    def fitted(self, cls, where: str) -> type:
        """``cls``, made to fit the protocol: a class that lacks some of its members runs as a subclass
        of both, under its own name, so it gets the protocol's defaults; PluginError if it is not a
        class or lacks a required member."""
        protocol, public = self.protocol, self._protocol.replace(":", ".")
        if self.kind.functions and not isinstance(cls, (type, FunctionPart)) and callable(cls):
            cls = FunctionPart(cls, protocol)
        missing = [m for m in _members(protocol) if not hasattr(cls, m)] if isinstance(cls, type) else []
        if missing:
            try:
                cls = type(cls.__name__, (cls, protocol), {"__module__": cls.__module__,
                                                           "__qualname__": cls.__qualname__, "__doc__": cls.__doc__})
            except TypeError as exc:  # e.g. a metaclass of its own
                raise PluginError(f"{where}: {cls.__name__} lacks {', '.join(missing)} and cannot take the protocol's "
                                  f"defaults ({exc}); subclass {public}") from None
        self.check_fits(cls, where)
        return cls

    def check_fits(self, cls, where: str) -> None:
        """PluginError unless ``cls`` is a class whose required members are its own (not the
        protocol's bodiless declarations)."""
        protocol, public = self.protocol, self._protocol.replace(":", ".")
        if isinstance(cls, FunctionPart):
            return
        if not isinstance(cls, type):
            if self.kind.functions:
                raise PluginError(f"{where}: names a {type(cls).__name__}, not a class or function that fits "
                                  f"{public}")
            raise PluginError(f"{where}: names a {type(cls).__name__}, not a class; a {self.kind.name} is a class "
                              f"that fits {public}")
        required = [_spelt(m) for m in self.kind.required if not _meets(cls, protocol, m)]
        if required:
            raise PluginError(f"{where}: {cls.__name__} does not fit the {self.kind.name} protocol: it lacks "
                              f"{', '.join(required)}; see docs/extending.md")


class FunctionPart:
    """A function named as a part (a model): calling it calls the function; the members the function
    does not carry as attributes (``Options``, ``check``, ...) are the protocol's defaults."""

    def __init__(self, function, protocol: type):
        functools.update_wrapper(self, function)  # its name, module, doc and attributes
        self.function, self.protocol = function, protocol

    def __call__(self, *args, **kwargs):
        return self.function(*args, **kwargs)

    def __getattr__(self, name: str):  # only for what the function does not carry
        if name.startswith("__") or name in ("function", "protocol"):
            raise AttributeError(name)
        return getattr(self.protocol, name)

    def __repr__(self) -> str:
        return f"<{self.protocol.__name__} {self.__module__}.{self.__qualname__}>"


def _members(protocol: type) -> list[str]:
    """The protocol's own attributes and methods (not those of typing.Protocol or object)."""
    names = []
    for klass in protocol.__mro__:
        if klass.__module__ in ("typing", "builtins", "abc"):
            continue
        names += [n for n in vars(klass) if not n.startswith("_") and n not in names]
        names += [n for n in getattr(klass, "__annotations__", {}) if not n.startswith("_") and n not in names]
    return names


def _defines(cls: type, name: str) -> bool:
    """Whether ``cls`` has the member ``name``; a special method (``__call__``) counts only where a
    class of its own defines it (every class has its metaclass's)."""
    if name.startswith("__"):
        return any(name in vars(klass) for klass in cls.__mro__ if klass is not object)
    return hasattr(cls, name)


def _meets(cls: type, protocol: type, entry: str) -> bool:
    """Whether ``cls`` defines, of its own, the members of one of the entry's alternatives ("a|b+c")."""
    return any(all(_defines(cls, m) and not _is_stub(cls, protocol, m) for m in option.split("+"))
               for option in entry.split("|"))


def _spelt(entry: str) -> str:
    """A required entry in words: "round (or local_updates and apply_updates)"."""
    first, *others = entry.split("|")
    return first + "".join(f" (or {' and '.join(o.split('+'))})" for o in others)


def _is_stub(cls: type, protocol: type, name: str) -> bool:
    """True when ``cls`` inherits the protocol's bodiless declaration of ``name`` unchanged."""
    mine, theirs = getattr(cls, name), getattr(protocol, name)
    return getattr(mine, "__func__", mine) is getattr(theirs, "__func__", theirs)


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text if len(text) <= 300 else text[:300] + "..."


# ---------------------------------------------------------------------------------------------
# import paths


@contextmanager
def _path_first(folder: str):
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        try:
            sys.path.remove(folder)
        except ValueError:  # the plugin removed it itself
            pass


def module_folder(module: str, plugin_path: Iterable[str]) -> str | None:
    """The first folder of ``plugin_path`` that holds ``module`` (a file or a package), or None.
    PluginError, naming it, where the module's file there is a FIFO, a device or a socket: importing
    it would wait for a writer forever, and it is not missing either."""
    from .files import unreadable_file

    top = module.split(".")[0]
    for folder in plugin_path:
        root = Path(folder)
        try:
            problems = {source: unreadable_file(source) for source in (root / f"{top}.py", root / top / "__init__.py")}
        except (OSError, ValueError):  # a name too long, a NUL byte: not a folder that holds it
            continue
        for source, problem in problems.items():
            if problem is None:
                return str(root)
            if "not a regular file" in problem:
                raise PluginError(f"module {module!r}: {source} {problem}")
    return None


OPTIONAL_EXTRAS = {"flwr": "flower"}
"""Packages a part may come from that an optional extra of wirelessfl installs (module: extra)."""

_FROM_FOLDERS: set[str] = set()
"""Top-level modules this process imported from plugin folders (the only ones it may re-import)."""


def _inside(module, folder: str) -> bool:
    path = getattr(module, "__file__", None)
    return bool(path) and Path(folder).resolve() in Path(path).resolve().parents


def _load_import_path(ref: str, plugin_path: Sequence[str], where: str):
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr or not all(p.isidentifier() for p in module_name.split(".")) \
            or not all(p.isidentifier() for p in attr.split(".")):
        raise PluginError(f"{where}: an import path is 'module.path:Name', e.g. 'topk:TopK'")
    try:
        folder = module_folder(module_name, plugin_path)
    except PluginError as exc:
        raise PluginError(f"{where}: {exc}") from None
    top = module_name.split(".")[0]
    try:
        if folder is not None:
            existing = sys.modules.get(top)
            if existing is not None and not _inside(existing, folder):
                if top not in _FROM_FOLDERS:
                    raise PluginError(f"{where}: a module {top!r} is already imported from "
                                      f"{getattr(existing, '__file__', None) or 'elsewhere'}; rename "
                                      f"{Path(folder) / top}")
                # another folder's module of the same name (a second study): load this folder's
                for name in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
                    del sys.modules[name]
            with _path_first(folder):
                module = importlib.import_module(module_name)
            _FROM_FOLDERS.add(top)
        else:
            module = importlib.import_module(module_name)
    except PluginError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            extra = OPTIONAL_EXTRAS.get(module_name.split(".")[0])
            if extra is not None:
                raise PluginError(f"{where}: {module_name.split('.')[0]} is not installed; it comes with the "
                                  f"optional extra: pip install -e \".[{extra}]\" (or pip install "
                                  f"\"wirelessfl[{extra}]\")") from None
            places = ", ".join(str(p) for p in plugin_path) or "the scenario's folder"
            raise PluginError(f"{where}: no module {module_name!r} in {places} or on sys.path") from None
        raise PluginError(f"{where}: importing {module_name} failed: {_one_line(exc)}") from None
    except Exception as exc:  # a syntax error, or whatever the module raises at import
        raise PluginError(f"{where}: importing {module_name} failed: {_one_line(exc)}") from None
    except SystemExit as exc:  # a module that ends the program as it loads: a failed import, not a run
        raise PluginError(f"{where}: importing {module_name} called sys.exit({exc.code!r})") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            public = sorted(n for n, v in vars(module).items() if isinstance(v, type) and not n.startswith("_"))
            raise PluginError(f"{where}: {module_name} has no {attr!r}"
                              + (f" (its classes: {', '.join(public)})" if public else ""))
        obj = getattr(obj, part)
    return obj


# ---------------------------------------------------------------------------------------------
# lookups by kind


def registry(kind: str) -> Registry:
    """The Registry of a kind ("protocol", "scheduler", "algorithm", "channel", "compute", "access",
    "model", "dataset", "partition"; "staleness", named by an option)."""
    return _import_attr(_kind(kind).registry)


def part_class(kind: str, name: str, plugin_path: Sequence[str] = ()) -> type:
    """The class of the part named ``name`` (see Registry.load)."""
    return registry(kind).load(name, plugin_path)


def is_import_path(name: str) -> bool:
    """True for ``"module:Class"`` references (as opposed to registered names)."""
    return ":" in name


def source_file(cls: type) -> Path | None:
    """The file that defines ``cls`` (None for classes without one)."""
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    return Path(path) if path else None
