"""The scenarios shipped inside the package (``wirelessfl/scenarios``, read with importlib.resources).

A packaged scenario is named by its path below that folder without ``.toml``: ``quickstart``,
``paper/training``, ``studies/safari_tables``. ``wirelessfl run quickstart`` and
``load_scenario("quickstart")`` find it from any working folder, editable install or not.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path


def scenario_root() -> Path:
    """The folder holding the packaged scenario files."""
    # a plain install unpacks the package on disk, so the traversable is a real folder
    return Path(str(resources.files("wirelessfl") / "scenarios"))


def packaged_scenarios() -> dict[str, Path]:
    """Every packaged scenario, by name, in name order."""
    root = scenario_root()
    return {p.relative_to(root).with_suffix("").as_posix(): p for p in sorted(root.rglob("*.toml"))}


def packaged_scenario(name: str) -> Path | None:
    """The file of the packaged scenario ``name`` (``.toml`` optional), or None."""
    name = name.removesuffix(".toml").removeprefix("scenarios/")
    return packaged_scenarios().get(name)


def describe(path: Path) -> str:
    """A scenario's one-line description: the first line of its leading comment ("…" where it goes on)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or not lines[0].startswith("#"):
        return ""
    text = lines[0].lstrip("#").strip()
    return text.rstrip(":") if text.endswith((".", ":")) else f"{text} …"
