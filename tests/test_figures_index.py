"""figures/README.md, the index of every reproduced result, against the committed reports.

tests/test_papers.py redraws each recipe's report from its committed data and compares it with the
committed one; these tests close the chain: every number the index quotes as ours appears in the
report of the recipe its row names, and the seed count the row gives is the one of that report's
data. So each number of the index recomputes from committed data.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

FIGURES = Path(__file__).resolve().parents[1] / "figures"
INDEX = FIGURES / "README.md"
NUMBER = re.compile(r"(?<![\w.])[+−-]?\d+(?:\.\d+)?(?:e[+-]?\d+)?")


def index_rows() -> list[dict]:
    """The rows of the index's result tables: ours, scale and seeds, and the recipes of the row (a row
    without a command belongs to the recipes of the row above it)."""
    rows, recipes = [], []
    for line in INDEX.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| ") or len(cells) != 5 or cells[0] == "result" or set(cells[0]) <= {"-"}:
            continue
        recipes = re.findall(r"reproduce ([a-z_]+:[a-z0-9_]+)", cells[4]) or recipes
        rows.append({"result": cells[0], "ours": cells[2], "scale_seeds": cells[3], "recipes": recipes})
    return rows


def quoted_numbers(ours: str) -> list[str]:
    """The numbers a cell quotes as ours; what stands in brackets is context (per-seed ranges,
    products with another recipe's numbers) that the write-ups explain."""
    outside = re.sub(r"\([^()]*\)", "", ours)
    return [n.lstrip("+−-") for n in NUMBER.findall(outside)]


def report_text(recipe: str) -> str:
    return (FIGURES / (recipe.replace(":", "_") + ".md")).read_text()


ROWS = index_rows()


def test_the_index_is_read():
    """The parser finds the tables of all five papers and the studies (a changed layout must not pass vacuously)."""
    assert len(ROWS) >= 40
    papers = {r.split(":")[0] for row in ROWS for r in row["recipes"]}
    assert papers == {"lyapunov", "fair_selection", "perfedavg", "fedshuffle", "safari", "async_wireless", "energy",
                      "networks", "radio", "satellites"}
    assert all(row["recipes"] for row in ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['recipes'][0]}: {r['result'][:50]}" for r in ROWS])
def test_every_number_of_the_index_is_in_its_recipes_reports(row):
    reports = "\n".join(report_text(r) for r in row["recipes"])
    numbers = quoted_numbers(row["ours"])
    assert numbers, f"no number in {row['ours']!r}"
    missing = [n for n in numbers if not re.search(rf"(?<![\d.]){re.escape(n)}(?!\d)", reports)]
    assert not missing, f"{missing} of {row['ours']!r} are not in the reports of {row['recipes']}"


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['recipes'][0]}: {r['result'][:50]}" for r in ROWS])
def test_the_seed_count_of_every_row_is_its_datas(row):
    seeds = int(row["scale_seeds"].rsplit(",", 1)[1])
    for recipe in row["recipes"]:
        found = re.search(r"\((\d+) seed\(s\)\)", report_text(recipe))
        assert found, f"{recipe}'s report does not say its seeds"
        assert int(found.group(1)) == seeds, f"{recipe}: the index says {seeds} seeds, its data has {found.group(1)}"
