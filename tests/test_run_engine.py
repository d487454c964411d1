"""The runner drives every engine through the declared RunEngine protocol and tells the tiered
engines by their capability (EdgeTiers), never by their type."""
from __future__ import annotations

import ast
import inspect

import pytest

from tests.test_edge_events import edges
from tests.test_tiers import scenario as tiers_scenario
from wirelessfl.capabilities import provides
from wirelessfl.config import from_dict
from wirelessfl.sim.run import build, part_facts, runner
from wirelessfl.sim.run.contract import EdgeTiers, RunEngine
from wirelessfl.sim.run.runner import Run

_SMALL = {"seed": 3, "devices": {"count": 6}, "run": {"rounds": 2, "timing_only": True},
          "scheduler": {"name": "uniform", "m": 2}}


def _plain(protocol: dict) -> dict:
    return {**_SMALL, "protocol": protocol}


@pytest.mark.parametrize("data, tiered", [
    (_plain({"name": "sync"}), False),
    (_plain({"name": "semi_sync"}), False),
    (_plain({"name": "fedbuff", "concurrency": 3, "buffer": 2}), False),
    (tiers_scenario(rounds=2), True),
    (edges("fedbuff", rounds=2), True),
])
def test_every_engine_is_a_run_engine_and_only_the_tiered_ones_have_tiers(data, tiered):
    engine = Run(from_dict(data), None, progress=False).engine
    assert provides(engine, RunEngine)
    assert provides(engine, EdgeTiers) == tiered


def test_a_run_engines_rows_and_busy_time_after_running():
    run = Run(from_dict(_plain({"name": "fedbuff", "concurrency": 3, "buffer": 2})), None, progress=False)
    run.engine.run()
    assert run.engine.rows_in_state(run.engine.state_dict()) == 2  # one row per aggregation
    assert run.engine.uplink_busy_s(run.engine.now) > 0  # the event engine timed its uploads itself
    sync = Run(from_dict(_plain({"name": "sync"})), None, progress=False).engine
    sync.run()
    assert sync.uplink_busy_s(sync.now) == 0.0  # a sync round's uplink time goes with its row


@pytest.mark.parametrize("module", [runner, build, part_facts])
def test_the_runner_neither_asks_an_engines_type_nor_probes_its_members(module):
    tree = ast.parse(inspect.getsource(module))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("isinstance", "getattr",
                                                                                               "hasattr"):
            assert "engine" not in ast.unparse(node.args[0]), ast.unparse(node)
