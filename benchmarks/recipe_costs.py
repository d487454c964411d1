"""What each recipe costs: CPU minutes of all its runs for 3 seeds at a scale, each recipe alone in a
fresh cache (the numbers ``wirelessfl reproduce --list`` shows; one torch thread, serial runs).

    python benchmarks/recipe_costs.py tiny lyapunov safari:table2 ...
"""
import resource
import sys
import tempfile
import time

import torch

from wirelessfl.papers import find_recipes
from wirelessfl.papers.recipes import reproduce


def main(scale: str, names: list[str]) -> None:
    torch.set_num_threads(1)
    for recipe in find_recipes(names):
        with tempfile.TemporaryDirectory() as out:
            before = resource.getrusage(resource.RUSAGE_SELF)
            started = time.perf_counter()
            reproduce([recipe], scale=scale, seeds=3, out=out, progress=False)
            after = resource.getrusage(resource.RUSAGE_SELF)
            cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            print(f"{recipe.key:28s} {scale}: {cpu_s / 60:.3f} CPU min, {time.perf_counter() - started:.1f} s wall",
                  flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        print(f"usage: python benchmarks/recipe_costs.py SCALE [RECIPE ...]  (SCALE: tiny, cpu, ...)\n{__doc__}",
              file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1], sys.argv[2:] or ["all"])
