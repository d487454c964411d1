"""Parameter studies: run a grid of scenarios x seeds, serially, in a process pool or on Dask.

A sweep expands one scenario into members: every combination of the grid values (the scenario's
``[sweep]`` table, to which ``grid`` adds keys or replaces their values), every variant of the
scenario if it has ``[variants]``, and ``seeds`` seeds. Seed index k (0, 1, ...) runs with
``seed = scenario.seed + k``, so ``--seeds 3`` on a scenario with ``seed = 7`` uses seeds 7, 8, 9
(pass a sequence to ``sweep(seeds=...)`` to name the seeds yourself).

Layout of a sweep folder OUT::

    OUT/sweep.json         the grid, seeds, executor and the base scenario
    OUT/scenario.toml      the base scenario (with its [sweep] table)
    OUT/table.csv          one row per member: grid values, seed, status, headline metrics
    OUT/runs/<key>/        one finished run (simulate's run directory); key = the first 16 hex
                           digits of sha256(resolved member scenario as TOML)
    OUT/failed/<key>.json  the error, traceback and parameters of a run that raised

Crash safety: a run is written to ``OUT/runs/.<key>.tmp-<pid>`` and renamed to ``OUT/runs/<key>``
once its summary says "complete"; a rename is atomic, so ``runs/<key>`` is always a whole run.
The table and sweep.json are replaced atomically. A sweep killed at any moment (even SIGKILL) is
resumed by running it again: finished runs are skipped (found by key, so any sweep whose members
coincide reuses them), temporary folders are removed and unfinished or failed runs are redone.

Runs are deterministic given their scenario, so serial, process-pool and Dask sweeps give the
same records. With a remote Dask scheduler (``address``), the workers must see OUT at the same
path (a shared file system) and have wirelessfl installed.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import math
import re
import shutil
import time
import warnings
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from ..config import ConfigError, Scenario, dumps, parse_value
from ..fields import require_memory
from ..files import FolderLock, check_folder, check_output_folder, make_folder, refuse_links, replacing, write_atomic
from ..plugins import KINDS
from ..sim.records.manifest import plugin_digests
from ..jsonio import read_json, write_json_atomic
from .executors import EXECUTE, check_scheduler, read_summary
from .sweep_table import METRICS, aggregate, format_table, load_table, sweep_parameters

__all__ = ["EXECUTORS", "METRICS", "Member", "SweepFailed", "SweepResult", "aggregate", "expand", "format_table",
           "load_table", "member_key", "merge_grid", "parse_grid", "run_key", "sweep", "sweep_parameters"]

EXECUTORS = ("serial", "process", "dask")
_TMP = re.compile(r"^\.(?P<key>[0-9a-f]+)\.tmp-(?P<pid>\d+)$")


@dataclasses.dataclass(frozen=True)
class Member:
    """One run of a sweep: its grid values, seed, resolved scenario and key."""

    params: dict            # dotted key -> grid value as given (plus "variant" with variants)
    seed: int
    scenario: Scenario
    toml: str               # dumps(scenario): what is hashed and what a worker runs
    key: str


@dataclasses.dataclass
class SweepResult:
    """What a sweep produced: the results table (one row per member) and where it lives."""

    table: pd.DataFrame
    out_dir: Path
    ran: int = 0            # runs done by this call
    skipped: int = 0        # runs found finished from an earlier call
    failed: int = 0         # runs that raised in this call


# ---------------------------------------------------------------------------------------------
# grid


def _split_values(text: str) -> list[str]:
    """Split ``1,10,[1, 2]`` at top-level commas (a list value may contain commas)."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return [s.strip() for s in out]


def parse_grid(grid: Mapping[str, Sequence] | Iterable[str | tuple[str, Sequence]] | None
               ) -> list[tuple[str, tuple]]:
    """Normalise a grid to ``[(dotted_key, values), ...]``.

    Accepts a mapping ``{"scheduler.V": [1, 10]}``, pairs ``("scheduler.V", [1, 10])`` or
    command-line strings ``"scheduler.V=1,10,100"`` (each value parsed with config.parse_value, so
    ``1e3``, ``true`` and ``"35 dB"`` work). Raises ConfigError naming the key on a malformed item.
    """
    if grid is None:
        return []
    items = grid.items() if isinstance(grid, Mapping) else grid
    out: dict[str, tuple] = {}
    for item in items:
        if isinstance(item, str):
            if "=" not in item:
                raise ConfigError(f"grid {item!r}: expected KEY=V1,V2,..., e.g. scheduler.V=1,10,100")
            key, _, text = item.partition("=")
            key = key.strip()
            raw = _split_values(text)
            if not text.strip() or any(not r for r in raw):
                raise ConfigError(f"grid {key}: empty value in {text!r}; expected V1,V2,...")
            values = tuple(parse_value(r) for r in raw)
        else:
            key, values = item
            if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
                values = (values,)
            values = tuple(values)
        if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", key):
            raise ConfigError(f"grid {key!r}: KEY must be a dotted field path, e.g. scheduler.V")
        if key == "seed":
            raise ConfigError("grid seed: seeds are not a grid key; use seeds=N (--seeds N)")
        if not values:
            raise ConfigError(f"grid {key}: needs at least one value")
        if key in out:
            raise ConfigError(f"grid {key}: given twice ({', '.join(map(str, out[key]))} and "
                              f"{', '.join(map(str, values))}); list every value once: {key}=V1,V2,...")
        out[key] = values
    return list(out.items())


def merge_grid(base: Sequence[tuple[str, tuple]], extra: Sequence[tuple[str, tuple]]
               ) -> list[tuple[str, tuple]]:
    """The scenario's [sweep] grid with ``extra`` applied: a known key gets new values, a new key is added."""
    merged = dict(base)
    merged.update(extra)
    return list(merged.items())


MEMBER_BYTES = 20_000
"""Memory a sweep holds per member before it runs (its scenario, TOML and row): sizes the refusal of
absurd seed counts."""


def _seed_list(scenario: Scenario, seeds: int | Sequence[int]) -> list[int]:
    if isinstance(seeds, bool):
        raise ConfigError(f"seeds = {seeds!r}: must be a positive integer or a list of seeds")
    if isinstance(seeds, int):
        if seeds < 1:
            raise ConfigError(f"seeds = {seeds}: must be >= 1")
        return [scenario.seed + k for k in range(seeds)]
    out = [int(s) for s in seeds]
    if not out or any(s < 0 for s in out) or len(set(out)) != len(out):
        raise ConfigError(f"seeds = {list(seeds)!r}: must be distinct non-negative integers")
    return out


def run_key(toml_text: str) -> str:
    """The folder name of a run: short sha256 of its canonical scenario TOML (fields at defaults left out)."""
    return hashlib.sha256(toml_text.encode()).hexdigest()[:16]


def member_key(scenario: Scenario) -> str:
    """The key of a resolved scenario: run_key of its canonical TOML, without where its plugins live
    (plugin_path) but with the sha256 of each plugin's source file, so that a changed plugin runs
    again and a moved one does not."""
    text = dumps(dataclasses.replace(scenario, plugin_path=()), only_changed=True)
    text += "".join(f"# {part}: {digest}\n" for part, digest in plugin_digests(scenario).items())
    return run_key(text)


def expand(scenario: Scenario, grid=None, seeds: int | Sequence[int] = 1,
           timing_only: bool | None = None) -> tuple[list[tuple[str, tuple]], list[Member]]:
    """The merged grid and every member of the sweep, validated before anything runs.

    Members are ordered variant-major, then by the grid in key order, then by seed. A grid value
    that makes an invalid scenario raises ConfigError naming the key and value. A grid key that a
    member's part does not take (scheduler.V for the uniform scheduler) is not applied to it: its
    value is None in the member's parameters, and the grid points that differ only in it are one run.
    """
    keys_values = merge_grid(scenario.sweep, parse_grid(grid))
    for key, values in keys_values:
        for i, value in enumerate(values):
            if any(value == other for other in values[:i]):
                raise ConfigError(f"grid {key}: value {value!r} is listed twice")
    variants = list(scenario.variants) if scenario.variants else [(None, ())]
    points = len(variants) * math.prod(len(values) for _, values in keys_values)
    count = seeds if isinstance(seeds, int) else len(seeds)  # a bad value is refused by _seed_list below
    require_memory("seeds", seeds, points * count * MEMBER_BYTES, f"a sweep of {points * count:,} runs")
    seed_list = _seed_list(scenario, seeds)
    extra = [("run.timing_only", True)] if timing_only else []
    # parts first: whether another key applies depends on the part it belongs to
    order = sorted(range(len(keys_values)), key=lambda i: keys_values[i][0] not in _PART_FIELDS)
    members, seen = [], {}
    for vname, overrides in variants:
        named = [("name", vname)] if vname is not None else []
        for combo in itertools.product(*(values for _, values in keys_values)):
            assign = [(k, v) for (k, _), v in zip(keys_values, combo)]
            applied = _applicable(scenario, [*overrides, *named], [assign[i] for i in order])
            params = {"variant": vname} if vname is not None else {}
            params.update((k, v if (k, v) in applied else None) for k, v in assign)
            for seed in seed_list:
                try:
                    member = scenario.member(*overrides, *named, *applied, *extra, ("seed", seed))
                except ConfigError as exc:
                    raise _grid_error(scenario, applied, exc) from None
                text = dumps(member)
                # keyed by the canonical form, so new fields with defaults keep old runs valid
                key = member_key(member)
                if key in seen:
                    if seen[key] == (params, seed):  # a grid key this member does not take
                        continue
                    raise ConfigError(f"grid: {params} and {seen[key][0]} are the same run "
                                      "(a value is repeated)")
                seen[key] = (params, seed)
                members.append(Member(params=params, seed=seed, scenario=member, toml=text, key=key))
    for key, values in keys_values:  # a key no member takes is a mistake (a typo, a part left out)
        if all(m.params[key] is None for m in members):
            try:
                scenario.member((key, values[0]))
            except ConfigError as exc:
                raise _grid_error(scenario, [(key, values[0])], exc) from None
            raise ConfigError(f"grid {key}: no run of this sweep takes it (not an option of any variant's part)")
    return keys_values, members


_PART_FIELDS = {kind.field for kind in KINDS.values()}


def _applicable(scenario: Scenario, fixed: list, assign: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The assignments (parts first) that the member they make takes; the others are left out."""
    applied: list[tuple[str, Any]] = []
    member = None
    for key, value in assign:
        if key in _PART_FIELDS:
            applied.append((key, value))
            member = None
            continue
        if member is None:
            try:
                member = scenario.member(*fixed, *applied)
            except ConfigError:  # reported with the whole assignment below
                return assign
        if member.accepts(key):
            applied.append((key, value))
    return applied


def _grid_error(scenario: Scenario, assign: list[tuple[str, Any]], exc: ConfigError) -> ConfigError:
    """Name the grid key whose value is invalid on its own, else the whole grid point."""
    for key, value in assign:
        try:
            scenario.member((key, value))
        except ConfigError as alone:
            msg = str(alone)
            return ConfigError(msg if msg.startswith(key) else f"grid {key} = {value!r}: {msg}")
    where = ", ".join(f"{k}={v!r}" for k, v in assign)
    return ConfigError(f"grid point {where}: {exc}")


# ---------------------------------------------------------------------------------------------
# the sweep


def _row(member: Member, status: str, summary: dict | None = None, error: str = "") -> dict:
    row = dict(member.params)
    row["seed"] = member.seed
    row["status"] = status
    s = summary or {}
    for name in METRICS:
        if name == "mean_round_s":
            rounds, sim = s.get("rounds"), s.get("sim_time_s")
            row[name] = sim / rounds if rounds else math.nan
        else:
            value = s.get(name)
            row[name] = math.nan if value is None else value
    row["key"] = member.key
    row["error"] = error
    return row


def _write_table(rows: list[dict], path: Path) -> pd.DataFrame:
    table = pd.DataFrame(rows)
    with replacing(path) as fh:  # a reader (or a killed sweep) sees the old table or the new, never half
        table.to_csv(fh, index=False)
    return table


def _refuse_another_sweep(out: Path, scenario_toml: str, keys_values, timing_only, overwrite: bool) -> None:
    """OutputExists if ``out`` holds a sweep of another scenario, or of a grid this one does not
    contain (and not ``overwrite``): its table would lose rows. A grid that extends it is fine."""
    from .run import OutputExists

    info_path, toml_path = out / "sweep.json", out / "scenario.toml"
    if overwrite or not info_path.exists():
        return
    new = {k: list(v) for k, v in keys_values}
    try:
        info = read_json(info_path)
        old = {k: list(v) for k, v in info.get("grid", [])}
        same = (toml_path.read_text() == scenario_toml and info.get("timing_only") == timing_only
                and old.keys() == new.keys() and all(v in new[k] for k, values in old.items() for v in values))
    except (OSError, ValueError, TypeError):
        same = False
    if not same:
        raise OutputExists(f"{out}: holds a sweep of another scenario or grid; choose another folder (--out, "
                           "out_dir=), or replace its table (--overwrite, overwrite=True; runs the two share are reused)")


def _clean_tmp(runs_dir: Path) -> None:
    """Remove temporary run folders left by killed sweeps (we hold the sweep lock: none is live)."""
    for path in runs_dir.iterdir():
        if _TMP.match(path.name):
            if path.is_symlink():  # the link goes, not what it points to
                path.unlink()
            else:
                shutil.rmtree(path, ignore_errors=True)


def sweep(scenario: Scenario, grid=None, seeds: int | Sequence[int] = 1, executor: str = "serial",
          workers: int | None = None, address: str | None = None,
          out_dir: str | Path | None = None, progress: bool = True,
          timing_only: bool | None = None, overwrite: bool = False) -> SweepResult:
    """Run every member of a parameter study and collect one results table.

    scenario: the base scenario; its ``[sweep]`` table is the grid, ``grid`` adds keys or replaces
        values (a mapping, pairs or ``"key=v1,v2"`` strings, see parse_grid).
    seeds: number of seeds (seed index k runs with ``scenario.seed + k``) or a list of seeds.
    executor: "serial", "process" (a local process pool of ``workers`` processes, default one per
        core, each with cores // workers torch threads) or "dask" (``Client(address)`` when given,
        else a LocalCluster of ``workers`` single-threaded processes started and closed here).
    out_dir: the sweep folder (default ``runs/<name>-sweep``); see the module docstring for its
        layout. Re-running the same call resumes: finished runs are skipped.
    timing_only: True sets ``run.timing_only = true`` in every member (and so in its key).
    overwrite: a folder holding a sweep of another scenario, or of a grid this one does not contain,
        is refused (OutputExists) unless this is set; its table, sweep.json and scenario.toml are then
        replaced (runs both share are reused). The same sweep with other seeds, a grid that extends
        it, or another executor just continues.

    Returns a SweepResult whose table has one row per member: every grid key (and "variant" when
    the scenario has variants), "seed", "status" (complete, failed or pending), the METRICS, the
    run "key" (folder OUT/runs/<key>) and "error". A failing run does not stop the sweep.
    """
    if executor not in EXECUTORS:
        raise ConfigError(f"executor = {executor!r}: must be one of {', '.join(EXECUTORS)}")
    if address and executor != "dask":
        raise ConfigError(f"address = {address!r}: needs executor = 'dask'")
    if workers is not None and workers < 1:
        raise ConfigError(f"workers = {workers}: must be >= 1")
    keys_values, members = expand(scenario, grid, seeds, timing_only)
    out = Path(out_dir) if out_dir is not None else Path("runs") / f"{scenario.name}-sweep"
    check_output_folder(out)
    if address:  # before anything is written
        check_scheduler(address)
    runs_dir, failed_dir = out / "runs", out / "failed"  # failed/ only once a run has failed
    make_folder(runs_dir)  # never through a link planted at OUT/runs

    with FolderLock(out, "another sweep"):
        _begin(scenario, out, members, keys_values, timing_only, overwrite, executor)
        rows, todo = [], []
        for i, m in enumerate(members):
            summary = read_summary(runs_dir / m.key, m.scenario)  # checked against its manifest
            if summary is not None:
                rows.append(_row(m, "complete", summary))
            else:
                shutil.rmtree(runs_dir / m.key, ignore_errors=True)  # an incomplete leftover
                rows.append(_row(m, "pending"))
                todo.append((i, m))
        table_path = out / "table.csv"
        table = _write_table(rows, table_path)
        result = SweepResult(table=table, out_dir=out, skipped=len(members) - len(todo))
        if not todo:
            return result

        from tqdm.auto import tqdm

        results = EXECUTE[executor](todo, runs_dir, workers, address)  # Dask connects here
        bar = tqdm(total=len(members), initial=result.skipped, desc=f"sweep {scenario.name}",
                   unit="run", disable=not progress, dynamic_ncols=True)
        bar.set_postfix(done=result.skipped, failed=0, left=len(todo))
        try:
            for i, res in results:
                rows[i] = _finished(members[i], res, failed_dir, result)
                result.table = _write_table(rows, table_path)
                left = len(todo) - result.ran - result.failed
                bar.set_postfix(done=result.skipped + result.ran, failed=result.failed, left=left,
                                refresh=False)
                bar.update(1)
        finally:
            results.close()  # shut the pool or cluster down now, also when interrupted
            bar.close()
    if result.failed and result.failed == len(todo) and not result.skipped:
        first = next(r for r in rows if r["status"] == "failed")["error"]
        raise SweepFailed(f"{out}: all {result.failed} runs failed, the first with {first} (every error is in "
                          f"{failed_dir})")
    if result.failed:
        warnings.warn(f"{result.failed} of {len(members)} runs failed; the errors are in {failed_dir}", stacklevel=2)
    return result


def _begin(scenario: Scenario, out: Path, members: list, keys_values, timing_only, overwrite: bool,
           executor: str) -> None:
    """Refuse links where the sweep writes and another sweep in ``out`` (unless ``overwrite``), clear
    leftovers of killed runs, and write the sweep's scenario.toml and sweep.json."""
    runs_dir, failed_dir = out / "runs", out / "failed"
    refuse_links(out, ("scenario.toml", "sweep.json", "table.csv"))
    check_folder(failed_dir)
    for m in members:
        check_folder(runs_dir / m.key)
    if failed_dir.is_dir():
        refuse_links(failed_dir, [f"{m.key}.json" for m in members])
    _refuse_another_sweep(out, dumps(scenario), keys_values, timing_only, overwrite)
    _clean_tmp(runs_dir)
    write_atomic(out / "scenario.toml", dumps(scenario))
    write_json_atomic(out / "sweep.json", {
        "scenario": scenario.name, "base_seed": scenario.seed,
        "seeds": sorted({m.seed for m in members}),
        "grid": [[k, list(v)] for k, v in keys_values],
        "variants": [v for v, _ in scenario.variants],
        "parameters": list(members[0].params) if members else [],
        "timing_only": timing_only, "executor": executor, "members": len(members),
        "metrics": METRICS,
    })


def _finished(m: Member, res: dict, failed_dir: Path, result: SweepResult) -> dict:
    """A run's row once it ended; a failed one is also written to failed/KEY.json (and a run that
    failed before and now completed is taken off it). Counts it in ``result``."""
    if res["status"] == "complete":
        (failed_dir / f"{m.key}.json").unlink(missing_ok=True)
        result.ran += 1
        return _row(m, "complete", res["summary"])
    make_folder(failed_dir)
    write_json_atomic(failed_dir / f"{m.key}.json", {
        "key": m.key, "params": m.params, "seed": m.seed, "error": res["error"],
        "traceback": res.get("traceback", ""), "scenario": m.toml, "time": time.strftime("%Y-%m-%dT%H:%M:%S")})
    result.failed += 1
    return _row(m, "failed", error=res["error"])


class SweepFailed(RuntimeError):
    """Every run of a sweep failed (the table and failed/ say how)."""
