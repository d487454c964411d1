"""orbits.png, the figure of a run over satellites (a scenario's [orbits]): (a) the ground tracks of the
satellites over the run's first orbits and the ground stations, (b) the contacts over time, one row
per satellite, a bar for each pass (passes.csv) coloured by its station."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .plots import _save, plt
from .run import RunResult

__all__ = ["plot_orbits"]

_TRACK_S = 6000.0
"""How much of each ground track is drawn: about one LEO orbit."""


def plot_orbits(runs: dict[str, RunResult], out_dir: str | Path, title: str | None = None) -> Path | None:
    """orbits.png for the first run whose folder has passes.csv (None when none has)."""
    run = next((r for r in runs.values() if r.run_dir is not None and (r.run_dir / "passes.csv").exists()), None)
    if run is None:
        return None
    import pandas as pd

    from ..config import load_scenario
    from ..orbits import propagate_ecef, stations
    from ..orbits.constellation import constellation_of

    scenario = load_scenario(run.run_dir / "scenario.toml")
    orbits = scenario.orbits
    passes = pd.read_csv(run.run_dir / "passes.csv")
    sites = stations(orbits.station_specs())
    constellation = constellation_of(orbits)
    times = np.arange(0.0, _TRACK_S, 60.0)
    pos, _ = propagate_ecef(constellation, times)
    fig, (track, contacts) = plt.subplots(2, 1, figsize=(9.0, 8.0), gridspec_kw={"height_ratios": [1.1, 1.0]})
    lon = np.degrees(np.arctan2(pos[..., 1], pos[..., 0]))
    lat = np.degrees(np.arctan2(pos[..., 2], np.hypot(pos[..., 0], pos[..., 1])))  # geocentric
    for s in range(len(constellation)):
        jumps = np.flatnonzero(np.abs(np.diff(lon[s])) > 180.0) + 1  # no line across the date line
        for a, b in zip(np.r_[0, jumps], np.r_[jumps, lon.shape[1]]):
            track.plot(lon[s, a:b], lat[s, a:b], lw=0.5, color="0.6")
    colours = {site.name: f"C{i % 10}" for i, site in enumerate(sites)}
    for site in sites:
        track.scatter([(site.longitude_deg + 180.0) % 360.0 - 180.0], [site.latitude_deg], marker="^", s=80,
                      color=colours[site.name], edgecolor="k", zorder=3, label=site.name)
    track.set(xlim=(-180, 180), ylim=(-90, 90), xlabel="longitude (deg)", ylabel="latitude (deg)",
              title=f"(a) ground tracks over the first {_TRACK_S / 3600:.1f} h, {len(constellation)} satellites")
    track.legend(loc="lower left", fontsize=8)
    for name, rows in passes.groupby("station"):
        contacts.barh(rows["satellite"], (rows["set_s"] - rows["rise_s"]) / 3600.0, left=rows["rise_s"] / 3600.0,
                      height=0.8, color=colours.get(name, "k"), label=name)
    contacts.set(xlabel="time since orbits.epoch (h)", ylabel="satellite",
                 title=f"(b) contacts above {orbits.min_elevation_deg:g} deg ({len(passes)} passes)")
    contacts.legend(loc="upper right", fontsize=8)
    if title:
        fig.suptitle(title)
    return _save(fig, out_dir, "orbits.png")
