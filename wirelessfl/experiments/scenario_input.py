"""A scenario as ``wirelessfl run`` and ``trace`` load it: overrides checked against the variants that
will run (``--variant``), and the pairs of variants that overrides made one run, for a warning."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from ..config import ConfigError, Scenario, load_scenario, to_dict

__all__ = ["load_kept", "merged_variants"]


def load_kept(path: str | Path, overrides: Sequence[str], kept: Sequence[str]) -> Scenario:
    """The scenario at ``path`` with ``overrides``. With ``kept`` (the names --variant gives), an
    override that only a variant left out cannot take is no error: the scenario is then loaded with
    the kept variants alone, and an error names the kept variant it is about."""
    try:
        return load_scenario(path, overrides)
    except ConfigError:
        if not kept:
            raise
    return load_scenario(path, overrides, variants=kept)


def merged_variants(path: str | Path, overrides: Sequence[str], scenario: Scenario) -> list[tuple[str, str]]:
    """Pairs of ``scenario``'s variants that are the same run apart from their names, and were not
    before ``overrides`` (the scenario file alone, with the same variants): an override of the field
    they differ in makes them one run twice."""
    now = _same_runs(scenario) if overrides else []
    if not now:
        return []
    try:
        before = _same_runs(load_scenario(path, variants=[name for name, _ in scenario.variants]))
    except ConfigError:  # the file alone is not a valid scenario: nothing to compare with
        before = []
    return [pair for pair in now if pair not in before]


def _same_runs(scenario: Scenario) -> list[tuple[str, str]]:
    """Pairs (first, later) of variants whose resolved scenarios differ only in their names."""
    if len(scenario.variants) < 2:
        return []
    seen: dict[str, str] = {}
    pairs = []
    for name, member in scenario.variant_scenarios():
        fields = to_dict(member)
        fields.pop("name", None)
        key = json.dumps(fields, sort_keys=True, default=str)
        if key in seen:
            pairs.append((seen[key], name))
        else:
            seen[key] = name
    return pairs
