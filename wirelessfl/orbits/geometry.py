"""Ground stations and how each sees each satellite: slant range, elevation, azimuth, range rate, Doppler.

Station positions: geodetic latitude, longitude and height on the WGS84 ellipsoid (NIMA TR8350.2,
a = 6378.137 km, f = 1 / 298.257223563) to Earth-fixed coordinates:

    N = a / sqrt(1 - e^2 sin^2 phi),  e^2 = f (2 - f)
    x = (N + h) cos phi cos lam,  y = (N + h) cos phi sin lam,  z = (N (1 - e^2) + h) sin phi

Look angles from the station's local east-north-up frame (up = the ellipsoid normal), with
rho = r_sat - r_station (both Earth-fixed):

    range = |rho|,  elevation = asin(rho . up / |rho|),  azimuth = atan2(rho . east, rho . north)
    range rate = rho . v_sat / |rho|    (the station is fixed in the Earth-fixed frame)
    Doppler shift = f_c (-range rate) / c        (first order; positive while approaching)

No refraction: elevations are geometric (near the horizon refraction lifts a satellite by about
0.5 deg; at 10 deg by under 0.1 deg, ITU-R P.834).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..fields import ConfigError

__all__ = ["SPEED_OF_LIGHT_M_S", "STATIONS", "WGS84_A_KM", "WGS84_F", "Look", "Station", "doppler_hz",
           "look", "station", "stations"]

WGS84_A_KM = 6378.137
WGS84_F = 1.0 / 298.257223563
SPEED_OF_LIGHT_M_S = 299_792_458.0


@dataclass(frozen=True)
class Station:
    """A ground station: geodetic latitude and longitude (degrees, east positive) and height (m)."""

    name: str
    latitude_deg: float
    longitude_deg: float
    altitude_m: float = 0.0

    def __post_init__(self):
        for field, value, low, high in (("latitude_deg", self.latitude_deg, -90.0, 90.0),
                                        ("longitude_deg", self.longitude_deg, -180.0, 360.0),
                                        ("altitude_m", self.altitude_m, -500.0, 10000.0)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not low <= value <= high:
                raise ConfigError(f"orbits.ground_stations.{self.name}.{field} = {value!r}: must be in [{low:g}, {high:g}]")

    def ecef_km(self) -> np.ndarray:
        """Earth-fixed position (3,) in km on the WGS84 ellipsoid."""
        phi, lam = math.radians(self.latitude_deg), math.radians(self.longitude_deg)
        e2 = WGS84_F * (2.0 - WGS84_F)
        n = WGS84_A_KM / math.sqrt(1.0 - e2 * math.sin(phi) ** 2)
        h = self.altitude_m / 1000.0
        return np.array([(n + h) * math.cos(phi) * math.cos(lam), (n + h) * math.cos(phi) * math.sin(lam),
                         (n * (1.0 - e2) + h) * math.sin(phi)])

    def enu(self) -> np.ndarray:
        """Rows: the local east, north and up unit vectors (3, 3) in the Earth-fixed frame."""
        phi, lam = math.radians(self.latitude_deg), math.radians(self.longitude_deg)
        sp, cp, sl, cl = math.sin(phi), math.cos(phi), math.sin(lam), math.cos(lam)
        return np.array([[-sl, cl, 0.0], [-sp * cl, -sp * sl, cp], [cp * cl, cp * sl, sp]])


STATIONS = {
    # Rounded public coordinates of each site (operators' pages and Wikipedia), not surveyed antenna
    # positions: good to about a kilometre, which moves pass times by well under a second.
    "svalbard": Station("svalbard", 78.2298, 15.4078, 500.0),        # SvalSat, Plataberget, Longyearbyen (KSAT)
    "hawaii": Station("hawaii", 19.0140, -155.6633, 370.0),           # South Point, Hawaii
    "singapore": Station("singapore", 1.3521, 103.8198, 15.0),        # Singapore (city centre)
    "fairbanks": Station("fairbanks", 64.8594, -147.8498, 180.0),     # Alaska Satellite Facility, Fairbanks
    "kiruna": Station("kiruna", 67.8833, 21.0667, 325.0),             # Esrange, Kiruna (SSC)
    "punta_arenas": Station("punta_arenas", -52.9378, -70.8572, 40.0),  # Punta Arenas, Chile
    "awarua": Station("awarua", -46.5286, 168.3811, 10.0),            # Awarua, New Zealand
    "hartebeesthoek": Station("hartebeesthoek", -25.8872, 27.7078, 1540.0),  # Hartebeesthoek, South Africa
    "wallops": Station("wallops", 37.9402, -75.4664, 3.0),            # Wallops Flight Facility, Virginia
    "mcmurdo": Station("mcmurdo", -77.8463, 166.6681, 10.0),          # McMurdo Station, Antarctica
}
"""Station presets by name (``station("svalbard")``)."""


def station(spec) -> Station:
    """A Station from a preset name, a Station, or a mapping with name, latitude_deg, longitude_deg
    and optionally altitude_m."""
    if isinstance(spec, Station):
        return spec
    if isinstance(spec, str):
        if spec not in STATIONS:
            raise ConfigError(f"orbits.ground_stations: unknown station {spec!r}; presets: {', '.join(sorted(STATIONS))} "
                              "(or give name, latitude_deg, longitude_deg, altitude_m)")
        return STATIONS[spec]
    if isinstance(spec, dict):
        unknown = set(spec) - {"name", "latitude_deg", "longitude_deg", "altitude_m"}
        if unknown or not {"name", "latitude_deg", "longitude_deg"} <= set(spec):
            raise ConfigError(f"orbits.ground_stations: {spec!r}: must have name, latitude_deg, longitude_deg "
                              "(and optionally altitude_m), nothing else")
        return Station(str(spec["name"]), spec["latitude_deg"], spec["longitude_deg"], spec.get("altitude_m", 0.0))
    raise ConfigError(f"orbits.ground_stations: {spec!r}: must be a preset name or a table of name, latitude_deg, "
                      "longitude_deg, altitude_m")


def stations(specs) -> tuple[Station, ...]:
    """Stations from a list of presets, mappings or Stations (or just one); their names must differ."""
    if isinstance(specs, (str, dict, Station)):
        specs = [specs]
    out = tuple(station(s) for s in specs)
    names = [s.name for s in out]
    if not out:
        raise ConfigError("orbits.ground_stations: give at least one ground station")
    if len(set(names)) != len(names):
        raise ConfigError(f"orbits.ground_stations: names must differ, got {names}")
    return out


@dataclass(frozen=True)
class Look:
    """One station's view of satellites: arrays of the shape of the positions given, less the last axis."""

    range_km: np.ndarray
    elevation_deg: np.ndarray
    azimuth_deg: np.ndarray
    range_rate_km_s: np.ndarray

    def doppler_hz(self, carrier_hz: float) -> np.ndarray:
        """The Doppler shift of a carrier at ``carrier_hz``: f_c (-range rate) / c."""
        return doppler_hz(self.range_rate_km_s, carrier_hz)


def look(site: Station, position_km: np.ndarray, velocity_km_s: np.ndarray | None = None) -> Look:
    """Range, elevation, azimuth (and range rate when velocities are given) of Earth-fixed satellite
    positions (..., 3) from ``site``."""
    rho = np.asarray(position_km, dtype=float) - site.ecef_km()
    east, north, up = site.enu()
    rng = np.sqrt(np.einsum("...i,...i->...", rho, rho))
    elevation = np.degrees(np.arcsin(np.clip((rho @ up) / rng, -1.0, 1.0)))
    azimuth = np.degrees(np.arctan2(rho @ east, rho @ north)) % 360.0
    rate = (np.full(rng.shape, np.nan) if velocity_km_s is None
            else np.einsum("...i,...i->...", rho, np.asarray(velocity_km_s, dtype=float)) / rng)
    return Look(rng, elevation, azimuth, rate)


def doppler_hz(range_rate_km_s, carrier_hz: float):
    """First-order Doppler shift f_c (-d range / dt) / c in Hz (range rate in km/s)."""
    return -carrier_hz * np.asarray(range_rate_km_s, dtype=float) * 1000.0 / SPEED_OF_LIGHT_M_S
