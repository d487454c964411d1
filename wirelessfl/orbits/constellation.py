"""The satellites: a Walker constellation built from its elements, or two-line elements read from a file.

Walker (Walker 1984, "Satellite constellations", J. Brit. Interplanet. Soc. 37, 559-572), notation
i: T/P/F with T = planes x per_plane satellites, P planes and phasing F in 0..P-1. Satellite j of
plane k (numbered k * per_plane + j) has

* right ascension of the ascending node  RAAN = 360 k / P    (Walker-delta: planes spread over 360 deg)
                                          RAAN = 180 k / P    (Walker-star / polar: over 180 deg)
* mean anomaly                            M = 360 j / per_plane + 360 F k / T

on a circular orbit (e = 0, argument of perigee 0, so M is the argument of latitude) with no drag
(B* = 0). The mean motion follows from the altitude h with the WGS-72 constants that SGP4 uses
(Hoots & Roehrich 1980, Spacetrack Report #3; Vallado et al. 2006, AIAA 2006-6753):

    a = R_E + h,   n = sqrt(mu / a^3),   mu = 398600.8 km^3/s^2,   R_E = 6378.135 km

The elements are SGP4 mean elements (Kozai mean motion): the propagated orbit oscillates about them
by a few km (J2), and the height above the WGS84 ellipsoid varies by about 21 km between the equator
and the poles, so ``altitude_km`` is the nominal, not the instantaneous, height.

Two-line elements (format: CelesTrak, "FAQs: Two-Line Element Set Format", and Spacetrack Report #3
appendix) are checked line by line before SGP4 reads them: length 69, line numbers 1 and 2, the
same catalogue number on both lines, the modulo-10 checksum (digits add their value, '-' adds 1),
and every numeric field. Each problem is a one-line ConfigError naming the file and the line.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from sgp4.api import WGS72, Satrec, jday
from sgp4.conveniences import sat_epoch_datetime

from ..fields import ConfigError, option

__all__ = ["GEO_ALTITUDE_KM", "MIN_ALTITUDE_KM", "MU_WGS72_KM3_S2", "R_EARTH_WGS72_KM", "SAMPLE_TLE",
           "Constellation", "WalkerOptions", "from_tle_file", "mean_motion_rad_min", "parse_epoch", "walker"]

MU_WGS72_KM3_S2 = 398600.8
"""Earth's gravitational parameter in the WGS-72 model SGP4 is defined with (Spacetrack Report #3)."""
R_EARTH_WGS72_KM = 6378.135
"""Earth's equatorial radius in WGS-72."""
MIN_ALTITUDE_KM = 160.0
"""Below about 160 km an orbit decays within days (drag): not a constellation."""
GEO_ALTITUDE_KM = 35786.0
"""Geostationary altitude; the layer is for LEO/MEO and stops there."""
SAMPLE_TLE = Path(__file__).resolve().parent / "data" / "sample_leo.tle"
"""A few Starlink-like sample orbits (550 km, 53 deg) written for this package: not real satellites."""

_EPOCH_1949 = 2433281.5  # sgp4init's epoch origin: 1949 December 31 00:00 UT as a Julian date


def parse_epoch(epoch: datetime | str) -> datetime:
    """``epoch`` as an aware UTC datetime: a datetime (naive means UTC) or an ISO 8601 string."""
    if isinstance(epoch, str):
        try:
            epoch = datetime.fromisoformat(epoch.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ConfigError(f"orbits.epoch = {epoch!r}: must be an ISO 8601 UTC time like "
                              "'2024-06-01T00:00:00Z'") from None
    if not isinstance(epoch, datetime):
        raise ConfigError(f"orbits.epoch = {epoch!r}: must be a datetime or an ISO 8601 string")
    return epoch.replace(tzinfo=timezone.utc) if epoch.tzinfo is None else epoch.astimezone(timezone.utc)


def julian(epoch: datetime) -> tuple[float, float]:
    """(whole, fraction) Julian date of a UTC datetime, as sgp4's ``jday`` splits it."""
    return jday(epoch.year, epoch.month, epoch.day, epoch.hour, epoch.minute,
                epoch.second + epoch.microsecond * 1e-6)


def mean_motion_rad_min(altitude_km: float) -> float:
    """Kepler's third law with the WGS-72 mu and radius: n = sqrt(mu / (R_E + h)^3), in rad/min."""
    a = R_EARTH_WGS72_KM + altitude_km
    return math.sqrt(MU_WGS72_KM3_S2 / a ** 3) * 60.0


@dataclass(frozen=True, eq=False)
class Constellation:
    """Satellites as SGP4 records, their names, the run's epoch and (Walker only) the plane layout.

    ``raan_deg`` and ``mean_anomaly_deg`` are the elements each satellite was built with (from the
    TLE for a file). ``planes``/``per_plane`` are None for a TLE file: inter-satellite links along a
    plane need a Walker layout.
    """

    satrecs: tuple
    names: tuple[str, ...]
    epoch: datetime
    raan_deg: np.ndarray
    mean_anomaly_deg: np.ndarray
    inclination_deg: np.ndarray
    planes: int | None = None
    per_plane: int | None = None
    pattern: str = "tle"

    def __len__(self) -> int:
        return len(self.satrecs)

    def plane_and_slot(self, satellite: int) -> tuple[int, int]:
        """(plane k, slot j) of satellite k * per_plane + j (a Walker layout only)."""
        if self.per_plane is None:
            raise ConfigError("orbits: planes and slots need a Walker layout (planes, per_plane); a TLE file has none")
        if not 0 <= satellite < len(self):
            raise ConfigError(f"orbits: satellite {satellite} does not exist (0..{len(self) - 1})")
        return divmod(int(satellite), self.per_plane)


def _check_walker(altitude_km, inclination_deg, planes, per_plane, phasing, satellites, pattern) -> tuple[int, int]:
    """One-line ConfigErrors for a Walker layout that cannot be; returns (planes, per_plane)."""
    for name, value in (("altitude_km", altitude_km), ("inclination_deg", inclination_deg)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"orbits.{name} = {value!r}: must be a finite number")
    if not MIN_ALTITUDE_KM <= altitude_km <= GEO_ALTITUDE_KM:
        raise ConfigError(f"orbits.altitude_km = {altitude_km:g}: must be between {MIN_ALTITUDE_KM:g} km (lower "
                          f"decays within days) and {GEO_ALTITUDE_KM:g} km (GEO)")
    if not 0.0 <= inclination_deg <= 180.0:
        raise ConfigError(f"orbits.inclination_deg = {inclination_deg:g}: must be in [0, 180]")
    if pattern not in ("delta", "star"):
        raise ConfigError(f"orbits.pattern = {pattern!r}: must be one of 'delta', 'star'")
    for name, value in (("planes", planes), ("per_plane", per_plane), ("satellites", satellites),
                        ("phasing", phasing)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))):
            raise ConfigError(f"orbits.{name} = {value!r}: must be an integer")
    if planes < 1:
        raise ConfigError(f"orbits.planes = {planes}: must be >= 1")
    if (per_plane is None) == (satellites is None):
        raise ConfigError("orbits: give exactly one of per_plane and satellites (the total), "
                          f"not {'both' if per_plane is not None else 'neither'}")
    if satellites is not None:
        if satellites < 1 or satellites % planes:
            raise ConfigError(f"orbits.satellites = {satellites}: must be a positive multiple of "
                              f"orbits.planes = {planes} (the same number in every plane)")
        per_plane = satellites // planes
    if per_plane < 1:
        raise ConfigError(f"orbits.per_plane = {per_plane}: must be >= 1")
    if not 0 <= phasing <= planes - 1:
        raise ConfigError(f"orbits.phasing = {phasing}: must be in 0..planes-1 = 0..{planes - 1}")
    return int(planes), int(per_plane)


def walker(altitude_km: float, inclination_deg: float, planes: int, per_plane: int | None = None,
           phasing: int = 0, *, satellites: int | None = None, pattern: str = "delta",
           epoch: datetime | str = "2024-06-01T00:00:00Z") -> Constellation:
    """A Walker-delta (``pattern="delta"``) or Walker-star (``"star"``) constellation at ``epoch``.

    Give ``per_plane`` or the total ``satellites`` (a multiple of ``planes``). Satellites are named
    ``WALKER-kk-jj`` and numbered k * per_plane + j; SGP4 catalogue numbers are that index + 1.
    """
    planes, per_plane = _check_walker(altitude_km, inclination_deg, planes, per_plane, phasing, satellites,
                                      pattern)
    epoch = parse_epoch(epoch)
    jd, fr = julian(epoch)
    total = planes * per_plane
    spread = 360.0 if pattern == "delta" else 180.0
    k, j = np.divmod(np.arange(total), per_plane)
    raan = (spread * k / planes) % 360.0
    anomaly = (360.0 * j / per_plane + 360.0 * phasing * k / total) % 360.0
    n = mean_motion_rad_min(altitude_km)
    satrecs = []
    for i in range(total):
        sat = Satrec()
        # whichconst, opsmode ('i': the improved mode of AIAA 2006-6753), catalogue number, epoch (days from
        # 1949-12-31 00:00 UT), B*, ndot, nddot, e, argument of perigee, i, M, n (rad/min), RAAN
        sat.sgp4init(WGS72, "i", i + 1, (jd - _EPOCH_1949) + fr, 0.0, 0.0, 0.0, 0.0, 0.0,
                     math.radians(inclination_deg), math.radians(anomaly[i]), n, math.radians(raan[i]))
        satrecs.append(sat)
    names = tuple(f"WALKER-{a:02d}-{b:02d}" for a, b in zip(k, j))
    return Constellation(tuple(satrecs), names, epoch, raan, anomaly, np.full(total, float(inclination_deg)),
                         planes, per_plane, pattern)


@dataclass(frozen=True)
class WalkerOptions:
    """A Walker constellation's options as a scenario table would give them, checked on construction
    (one of ``per_plane`` and ``satellites`` is required)."""

    altitude_km: float = option(550.0, doc="nominal circular altitude, km (160 .. 35786)")
    inclination_deg: float = option(53.0, doc="orbit inclination, degrees in [0, 180]")
    planes: int = option(22, doc="orbital planes P")
    per_plane: int | None = option(None, doc="satellites per plane (or give satellites)")
    satellites: int | None = option(None, doc="total satellites T, a multiple of planes (or give per_plane)")
    phasing: int = option(0, doc="Walker phasing F in 0..planes-1")
    pattern: str = option("delta", choices=("delta", "star"), doc="delta: RAAN over 360 deg; star: over 180 deg")
    epoch: str = option("2024-06-01T00:00:00Z", doc="UTC time of simulated second 0 (ISO 8601)")

    def __post_init__(self):
        _check_walker(self.altitude_km, self.inclination_deg, self.planes, self.per_plane, self.phasing,
                      self.satellites, self.pattern)
        parse_epoch(self.epoch)

    def build(self) -> Constellation:
        """The constellation these options describe."""
        return walker(self.altitude_km, self.inclination_deg, self.planes, self.per_plane, self.phasing,
                      satellites=self.satellites, pattern=self.pattern, epoch=self.epoch)


def _checksum(line: str) -> int:
    """The TLE checksum: the digits' sum plus one per minus sign over columns 1-68, modulo 10."""
    return sum(int(c) if c.isdigit() else c == "-" for c in line[:68]) % 10


# (name, first column, last column) 1-based inclusive, per CelesTrak's TLE format description
_LINE1_FIELDS = (("catalogue number", 3, 7), ("epoch", 19, 32), ("first derivative of mean motion", 34, 43),
                 ("B*", 54, 61))
_LINE2_FIELDS = (("catalogue number", 3, 7), ("inclination", 9, 16), ("RAAN", 18, 25), ("eccentricity", 27, 33),
                 ("argument of perigee", 35, 42), ("mean anomaly", 44, 51), ("mean motion", 53, 63))


_IMPLIED = re.compile(r"\s*([+-]?)\.?(\d+)\s*([+-]\d)\s*")


def _implied(text: str) -> float:
    """A TLE number with an implied leading decimal point and exponent: ' 12345-3' is 0.12345e-3."""
    if not text.strip():
        return 0.0
    match = _IMPLIED.fullmatch(text)
    if not match:
        raise ValueError(text)
    sign = -1.0 if match.group(1) == "-" else 1.0
    return sign * float("0." + match.group(2)) * 10.0 ** int(match.group(3))


def _check_tle_line(where: str, line: str, number: str, fields) -> None:
    if len(line) != 69:
        raise ConfigError(f"{where}: a TLE line {number} must be 69 characters, this one has {len(line)}")
    if line[0] != number or line[1] != " ":
        raise ConfigError(f"{where}: expected TLE line {number} (starting '{number} '), got {line[:10]!r}")
    if not line[68].isdigit():
        raise ConfigError(f"{where}: the checksum (column 69) must be a digit, got {line[68]!r}")
    if int(line[68]) != _checksum(line):
        raise ConfigError(f"{where}: checksum {line[68]} does not match the computed {_checksum(line)}")
    for name, first, last in fields:
        text = line[first - 1:last]
        try:
            if name == "catalogue number":
                if not text.strip() or not (text.strip().isdigit() or text[0].isalpha() and text[1:].isdigit()):
                    raise ValueError
            elif name == "B*":
                _implied(text)
            elif name == "eccentricity":
                if not text.strip().isdigit():
                    raise ValueError
            else:
                value = float(text)
                if not math.isfinite(value):
                    raise ValueError
                if name == "inclination" and not 0.0 <= value <= 180.0:
                    raise ValueError
                if name in ("RAAN", "argument of perigee", "mean anomaly") and not 0.0 <= value < 360.0 + 1e-9:
                    raise ValueError
                if name == "mean motion" and not 0.0 < value < 20.0:
                    raise ValueError
        except (ValueError, IndexError):
            raise ConfigError(f"{where}: the {name} (columns {first}-{last}) is not valid: {text!r}") from None


def from_tle_file(path: str | Path, epoch: datetime | str | None = None) -> Constellation:
    """The satellites of a two-line (or three-line, with a name line) element file.

    Blank lines and lines starting with '#' are skipped. ``epoch`` (simulated second 0) defaults to
    the latest element-set epoch in the file. Every malformed line is a one-line ConfigError
    ``path:line: what is wrong``.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="ascii").splitlines()
    except FileNotFoundError:
        raise ConfigError(f"orbits.tle_file = {str(path)!r}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"orbits.tle_file = {str(path)!r}: cannot be read as ASCII text ({exc})") from None
    satrecs, names, pending_name = [], [], None
    numbered = [(i + 1, line.rstrip("\r\n").rstrip()) for i, line in enumerate(lines)]
    numbered = [(i, s) for i, s in numbered if s.strip() and not s.lstrip().startswith("#")]
    at = 0
    while at < len(numbered):
        lineno, line = numbered[at]
        if not line.startswith("1 "):
            if pending_name is not None:
                raise ConfigError(f"{path}:{lineno}: expected TLE line 1 after the name on line {pending_name[0]}, "
                                  f"got {line[:20]!r}")
            if line.startswith("2 "):
                raise ConfigError(f"{path}:{lineno}: TLE line 2 without a line 1 before it")
            pending_name = (lineno, line[2:].strip() if line.startswith("0 ") else line.strip())
            at += 1
            continue
        _check_tle_line(f"{path}:{lineno}", line, "1", _LINE1_FIELDS)
        if at + 1 >= len(numbered):
            raise ConfigError(f"{path}:{lineno}: TLE line 1 without its line 2 (end of file)")
        lineno2, line2 = numbered[at + 1]
        _check_tle_line(f"{path}:{lineno2}", line2, "2", _LINE2_FIELDS)
        if line[2:7] != line2[2:7]:
            raise ConfigError(f"{path}:{lineno2}: catalogue number {line2[2:7].strip()} differs from line "
                              f"{lineno}'s {line[2:7].strip()}")
        sat = Satrec.twoline2rv(line, line2, WGS72)
        if sat.error:
            raise ConfigError(f"{path}:{lineno}: SGP4 rejects these elements (error {sat.error})")
        satrecs.append(sat)
        names.append(pending_name[1] if pending_name else f"SAT-{line[2:7].strip()}")
        pending_name = None
        at += 2
    if pending_name is not None:
        raise ConfigError(f"{path}:{pending_name[0]}: a name line without its two element lines")
    if not satrecs:
        raise ConfigError(f"orbits.tle_file = {str(path)!r}: no two-line element sets in the file")
    epoch = parse_epoch(max(sat_epoch_datetime(s) for s in satrecs) if epoch is None else epoch)
    deg = np.degrees
    return Constellation(tuple(satrecs), tuple(names), epoch,
                         deg([s.nodeo for s in satrecs]) % 360.0, deg([s.mo for s in satrecs]) % 360.0,
                         deg([s.inclo for s in satrecs]))


def constellation_of(table) -> Constellation:
    """The constellation of a scenario's [orbits] table (anything with its fields: tle_file, epoch,
    altitude_km, inclination_deg, planes, per_plane, satellites, phasing, pattern)."""
    if table.tle_file is not None:
        return from_tle_file(table.tle_file, table.epoch)
    return walker(table.altitude_km, table.inclination_deg, table.planes, table.per_plane, table.phasing,
                  satellites=table.satellites, pattern=table.pattern, epoch=table.epoch or "2024-06-01T00:00:00Z")
