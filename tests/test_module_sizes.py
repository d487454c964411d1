"""The engine's code stays in pieces one can read: every module of wirelessfl.sim is under 450
lines, every class under 300 and every function under 60 (from its ``def`` or ``class`` line to
its last, as ast counts them), and sim/ is in sub-packages, not modules side by side."""
from __future__ import annotations

import ast
from pathlib import Path

SIM = Path(__file__).resolve().parent.parent / "wirelessfl" / "sim"
LIMITS = {"module": 450, "class": 300, "function": 60}


def oversized(path: Path, root: Path = SIM) -> list[str]:
    """What in ``path`` is at or over its limit: 'kind name lines' for each (``path`` named from ``root``)."""
    text = path.read_text(encoding="utf-8")
    found = []
    lines = text.count("\n")
    if lines >= LIMITS["module"]:
        found.append(f"module {path.relative_to(root)} {lines}")
    for node in ast.walk(ast.parse(text)):
        kind = ("class" if isinstance(node, ast.ClassDef) else
                "function" if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None)
        if kind is not None and node.end_lineno - node.lineno + 1 >= LIMITS[kind]:
            found.append(f"{kind} {path.relative_to(root)}:{node.name} {node.end_lineno - node.lineno + 1}")
    return found


def test_every_module_class_and_function_of_the_engine_is_under_its_limit():
    found = [line for path in sorted(SIM.rglob("*.py")) for line in oversized(path)]
    assert not found, "over the limits (module 450, class 300, function 60 lines):\n" + "\n".join(found)


def test_the_check_finds_what_is_too_long(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(59))
    path = tmp_path / "probe.py"
    path.write_text(f"def f():\n{body}\n\n\ndef g():\n    pass\n", encoding="utf-8")
    assert oversized(path, tmp_path) == ["function probe.py:f 60"]
    path.write_text("def f():\n" + "\n".join(body.splitlines()[:58]) + "\n", encoding="utf-8")
    assert oversized(path, tmp_path) == []
    path.write_text("x = 1\n" * 450, encoding="utf-8")
    assert oversized(path, tmp_path) == ["module probe.py 450"]


def test_sim_holds_sub_packages_only():
    loose = sorted(p.name for p in SIM.glob("*.py") if p.name != "__init__.py")
    assert not loose, f"modules directly in wirelessfl/sim (put each in its sub-package): {loose}"
    assert {p.name for p in SIM.iterdir() if (p / "__init__.py").exists()} >= {
        "round", "protocols", "sync", "events", "records", "run"}
