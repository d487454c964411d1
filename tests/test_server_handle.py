"""Round protocols program against the declared ServerHandle: the event engine provides it, and the
built-in protocols call nothing else on the server they are handed."""
from __future__ import annotations

import ast
import inspect
import pkgutil
from importlib import import_module

from wirelessfl.capabilities import members, provides
from wirelessfl.config import from_dict
from wirelessfl.sim import protocols
from wirelessfl.sim.run.runner import Run
from wirelessfl.sim.protocols.server_handle import SERVER_HANDLE_MEMBERS, ServerHandle


def test_the_handle_names_exactly_its_members():
    assert set(members(ServerHandle)) == set(SERVER_HANDLE_MEMBERS)


def test_the_event_engine_is_a_server_handle():
    data = {"seed": 1, "devices": {"count": 4}, "run": {"rounds": 1, "timing_only": True},
            "scheduler": {"name": "uniform", "m": 2}, "protocol": {"name": "fedasync", "concurrency": 2}}
    engine = Run(from_dict(data), None, progress=False).engine
    assert provides(engine, ServerHandle)


def test_the_built_in_protocols_use_only_the_handle():
    modules = [import_module(f"{protocols.__name__}.{m.name}") for m in pkgutil.iter_modules(protocols.__path__)]
    assert {"semi_sync", "dispatching", "fedbuff", "fedasync"} <= {m.__name__.rpartition(".")[2] for m in modules}
    used = {node.attr for module in modules for node in ast.walk(ast.parse(inspect.getsource(module)))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "server"}
    assert used and used <= set(SERVER_HANDLE_MEMBERS), used - set(SERVER_HANDLE_MEMBERS)
