"""The scenario's [orbits] table: federated learning over a satellite constellation (docs/satellites.md).

Optional: a scenario without it has ``Scenario.orbits = None`` and runs, and writes, as before. With
it the uplink is the contact plan's (``link.access = "orbit"``, filled in when the file names no
access scheme): a client uploads only inside its passes, at the link budget's rate. The physics
(constellation, passes, budget) is wirelessfl.orbits, which the access scheme's ``check`` calls: this
module holds plain data, like the other tables.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..fields import ConfigError, FilePath, option, show

__all__ = ["OrbitsConfig", "apply_orbits"]

GEO_ALTITUDE_KM = 35786.0


@dataclass(frozen=True)
class OrbitsConfig:
    """A constellation (Walker elements or a TLE file), ground stations, the link budget of a pass,
    inter-satellite links, and who trains (``clients``)."""

    clients: str = option("satellites", choices=("satellites", "ground"),
                          doc="who trains: satellites (on board; ground stations aggregate, devices.count = the "
                              "number of satellites) or ground (devices at the ground stations, round robin, "
                              "upload through whichever satellite they see, a bent pipe to the server)")
    altitude_km: float = option(550.0, ge=160.0, le=GEO_ALTITUDE_KM,
                                doc="Walker: circular altitude, km (160 .. 35786, GEO)")
    inclination_deg: float = option(53.0, ge=0.0, le=180.0, doc="Walker: inclination, degrees")
    planes: int = option(5, ge=1, le=10_000, doc="Walker: orbital planes P")
    per_plane: int | None = option(None, ge=1, le=100_000, doc="Walker: satellites per plane (or satellites)")
    satellites: int | None = option(None, ge=1, le=1_000_000, doc="Walker: total T, a multiple of planes "
                                    "(or per_plane)")
    phasing: int = option(1, ge=0, doc="Walker: phasing F in 0 .. planes - 1")
    pattern: str = option("delta", choices=("delta", "star"), doc="Walker-delta (RAAN over 360 deg) or "
                          "Walker-star (over 180 deg)")
    tle_file: FilePath | None = option(None, doc="two-line elements instead of a Walker layout (the package "
                                       "ships wirelessfl/orbits/data/sample_leo.tle)")
    epoch: str | None = option(None, doc="UTC of simulated second 0, ISO 8601 (default: 2024-06-01T00:00:00Z "
                               "for Walker, the latest element set of a TLE file)")
    ground_stations: tuple[Any, ...] = option(("hawaii",), doc="presets (svalbard, hawaii, singapore, fairbanks, "
                                              "kiruna, punta_arenas, awarua, hartebeesthoek, wallops, mcmurdo) or "
                                              "tables {name, latitude_deg, longitude_deg, altitude_m}")
    orbit_step_s: float = option(30.0, gt=0.0, le=300.0, doc="the orbit grid: positions cached every this many "
                                 "seconds, Hermite-interpolated between; rates are constant on it")
    min_elevation_deg: float = option(10.0, ge=0.0, lt=90.0, doc="a station and a satellite see each other above "
                                      "this elevation")
    duration_s: float | None = option(None, gt=0.0, doc="how far the orbits are propagated (default "
                                      "run.time_budget_s); uploads not through by then are lost")
    pass_end: str = option("lose", choices=("lose", "resume"), doc="an upload still under way when its pass ends: "
                           "lost, or resumed with the bits left at the next pass")
    frequency_hz: float = option(8.2e9, ge=1e9, le=51e9, doc="carrier of the satellite-ground link (X band "
                                 "by default)")
    eirp_dbw: float = option(10.0, ge=-100.0, le=100.0, doc="the transmitter's EIRP, dBW")
    g_over_t_db_k: float = option(20.0, ge=-100.0, le=100.0, doc="the receiver's G/T, dB/K")
    bandwidth_hz: float = option(20e6, gt=0.0, doc="the link's bandwidth")
    other_losses_db: float = option(2.0, ge=0.0, le=100.0, doc="pointing, polarisation and implementation "
                                    "losses, dB")
    rate: str = option("shannon", choices=("shannon", "dvbs2"), doc="B log2(1 + SNR), or the best DVB-S2 "
                       "MODCOD at the symbol rate B / (1 + roll_off)")
    roll_off: float = option(0.2, ge=0.0, le=1.0, doc="rate = 'dvbs2': the pulse roll-off")
    margin_db: float = option(0.0, ge=0.0, le=50.0, doc="rate = 'dvbs2': margin on the MODCOD thresholds")
    isl: bool = option(False, doc="satellites out of view hand their upload along their plane to one in view")
    isl_rate_bps: float = option(1e8, gt=0.0, doc="the rate of each inter-satellite hop")
    isl_grazing_km: float = option(80.0, ge=0.0, le=1000.0, doc="an inter-satellite link is usable while its "
                                   "chord clears the Earth by this much")

    def __post_init__(self):
        stations = []
        for i, spec in enumerate(self.ground_stations):
            stations.append(_station_spec(spec, f"orbits.ground_stations[{i}]"))
        if not stations:
            raise ConfigError("orbits.ground_stations = []: give at least one ground station")
        object.__setattr__(self, "ground_stations", tuple(stations))
        if self.tle_file is None:
            if (self.per_plane is None) == (self.satellites is None):
                raise ConfigError("orbits: give exactly one of orbits.per_plane and orbits.satellites "
                                  "(or orbits.tle_file)")
            if self.satellites is not None and self.satellites % self.planes:
                raise ConfigError(f"orbits.planes = {self.planes}: must divide orbits.satellites = {self.satellites} "
                                  "(every plane holds the same number)")
            if not self.phasing < self.planes:
                raise ConfigError(f"orbits.phasing = {self.phasing}: must be in 0 .. planes - 1 = {self.planes - 1}")
        elif self.per_plane is not None or self.satellites is not None:
            raise ConfigError("orbits.tle_file: given with orbits.per_plane / orbits.satellites; a TLE file "
                              "brings its own satellites, keep one")

    @property
    def walker_count(self) -> int | None:
        """The number of satellites of a Walker layout (None for a TLE file)."""
        if self.tle_file is not None:
            return None
        return self.satellites if self.satellites is not None else self.planes * self.per_plane

    def station_specs(self) -> list:
        """The stations as wirelessfl.orbits.station takes them (a preset name or a mapping)."""
        return [s if isinstance(s, str) else {"name": s[0], "latitude_deg": s[1], "longitude_deg": s[2],
                                              "altitude_m": s[3]} for s in self.ground_stations]


def _station_spec(spec, path: str):
    """A preset name, or (name, latitude_deg, longitude_deg, altitude_m) from a table or a list."""
    if isinstance(spec, str):
        return spec
    if isinstance(spec, dict):
        unknown = set(spec) - {"name", "latitude_deg", "longitude_deg", "altitude_m"}
        if unknown or not {"name", "latitude_deg", "longitude_deg"} <= set(spec):
            raise ConfigError(f"{path} = {show(spec)}: must have name, latitude_deg, longitude_deg (and optionally "
                              "altitude_m), nothing else")
        spec = [spec["name"], spec["latitude_deg"], spec["longitude_deg"], spec.get("altitude_m", 0.0)]
    if isinstance(spec, (list, tuple)) and len(spec) == 4 and isinstance(spec[0], str) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in spec[1:]):
        name, lat, lon, alt = spec[0], float(spec[1]), float(spec[2]), float(spec[3])
        if not -90.0 <= lat <= 90.0 or not -180.0 <= lon <= 360.0 or not -500.0 <= alt <= 10_000.0:
            raise ConfigError(f"{path} = {show(list(spec))}: latitude_deg in [-90, 90], longitude_deg in "
                              "[-180, 360], altitude_m in [-500, 10000]")
        return (name, lat, lon, alt)
    raise ConfigError(f"{path} = {show(spec)}: must be a preset name or a table of name, latitude_deg, "
                      "longitude_deg, altitude_m")


def apply_orbits(data: dict) -> None:
    """A scenario with [orbits] (as parsed from TOML) sends over the passes: link.access = "orbit"
    unless the file names one, and, with satellite clients of a Walker layout, devices.count = the
    number of satellites unless the file sets it (a wrong one is refused by the rules)."""
    orbits = data.get("orbits")
    if not isinstance(orbits, dict):
        return
    link = data.setdefault("link", {})
    if isinstance(link, dict):
        link.setdefault("access", "orbit")
    devices = data.setdefault("devices", {})
    if isinstance(devices, dict) and orbits.get("clients", "satellites") == "satellites" \
            and "tle_file" not in orbits:
        count = orbits.get("satellites")
        planes, per_plane = orbits.get("planes", 5), orbits.get("per_plane")
        if count is None and isinstance(planes, int) and isinstance(per_plane, int):
            count = planes * per_plane
        if isinstance(count, int) and not isinstance(count, bool) and count >= 1:
            devices.setdefault("count", count)
