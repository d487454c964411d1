"""Recording a scenario's traces (``wirelessfl trace``): its channel gains, computation times and
availability, drawn with a run's own random streams, written as files that ``channel.model =
"trace"`` and the devices' trace options replay (``wirelessfl.traces`` reads them)."""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from .. import rng as rngs
from ..devices import build_availability
from ..fields import ConfigError, require_memory
from ..files import check_output_folder, make_folder
from ..traces import write_trace
from ..wireless import build_channel

__all__ = ["record_traces"]


def record_traces(scenario, rounds: int, out_dir: str | Path, fmt: str = "csv",
                  overwrite: bool = False) -> dict[str, Path]:
    """Record ``rounds`` rounds of the scenario's channel gains (path loss included), every device's
    computation time and its availability, with the run's own random streams, into
    ``out_dir/gains.FMT``, ``compute_s.FMT`` and ``available.FMT``. Replaying gains.FMT with
    ``channel.model = "trace"`` (and path_loss off) gives the channel of a run of the scenario.
    Files already there are replaced only with ``overwrite``."""
    if rounds < 1 or not math.isfinite(rounds):
        raise ConfigError(f"rounds = {rounds}: must be >= 1")
    n = scenario.devices.count
    require_memory("--rounds", rounds, 3 * 16.0 * rounds * n, f"recording {rounds:,} rounds of {n:,} devices")
    if scenario.devices.mobility != "static":
        raise ConfigError(f"devices.mobility = {scenario.devices.mobility!r}: a trace has rounds, not a clock, so it "
                          "cannot follow moving devices; record one with devices.mobility = 'static'")
    if scenario.devices.availability == "battery":
        raise ConfigError("devices.availability = 'battery': who is available depends on what each device spent in "
                          "the run, which a trace of rounds cannot replay; record one with devices.availability = "
                          "'chain'")
    out = Path(out_dir)
    there = [out / f"{name}.{fmt}" for name in ("gains", "compute_s", "available")
             if os.path.lexists(out / f"{name}.{fmt}")]
    if there and not overwrite:
        raise ConfigError(f"trace: {there[0]} exists; pass --overwrite (overwrite=True) to replace the traces in {out}")
    check_output_folder(out)  # a read-only folder: one line, before the rounds are drawn
    make_folder(out, theirs=True)
    for path in there:  # asked to replace them: a link there goes, what it points to stays
        if path.is_symlink():
            path.unlink()
    channel = build_channel(scenario, rngs.stream(scenario.seed, "cell"))
    compute = scenario.part("compute").from_scenario(scenario, scenario.options("compute"))
    availability = build_availability(scenario)
    streams = {name: rngs.stream(scenario.seed, name) for name in ("channel", "compute", "availability")}
    everyone = np.arange(n)
    gains = np.stack([channel.draw(streams["channel"]) for _ in range(rounds)])
    times = np.stack([compute.compute_times(everyone, streams["compute"], round_idx=r) for r in range(rounds)])
    avail = np.stack([availability.step(streams["availability"]) if availability is not None
                      else np.ones(n, dtype=bool) for _ in range(rounds)])
    return {"gains": write_trace(out / f"gains.{fmt}", gains),
            "compute_s": write_trace(out / f"compute_s.{fmt}", times),
            "available": write_trace(out / f"available.{fmt}", avail)}
