"""3GPP TR 38.901 V17 large-scale channel models: path loss, LOS probability and shadow fading.

Scenarios (:data:`SCENARIOS`): ``uma`` (Urban Macro), ``umi`` (Urban Micro - Street Canyon), ``rma``
(Rural Macro) and ``inh`` (Indoor Hotspot - Office). Every function is vectorised: distances, heights
and LOS states broadcast against each other. numpy only.

- :func:`path_loss_db`: Table 7.4.1-1 (clause 7.4.1).
- :func:`los_probability`, :func:`draw_states`: Table 7.4.2-1 (clause 7.4.2).
- :func:`shadowing_sigma_db`: the shadow-fading standard deviations of Table 7.4.1-1.
- :data:`VALIDITY`, :func:`check_validity`: the applicability ranges of Table 7.4.1-1.

Checked against ns-3.44's ``ThreeGpp*PropagationLossModel`` and ``ThreeGpp*ChannelConditionModel``
(``python benchmarks/ns3_check.py propagation``): the path losses agree to 1e-13 dB (the goal is
1e-6 dB). Where the standard leaves a choice, the choice here is ns-3's, and said where it is made.

Distances outside a scenario's range (below 10 m 2D in UMa, UMi and RMa, beyond 5 km, or 10 km in
RMa LOS; InH outside 1 to 150 m 3D) are not clamped: the formulas are applied as they are, as ns-3
does (it only logs a warning there, or aborts with ``EnforceParameterRanges``). d3D >= |h_BS - h_UT|
keeps the logarithms finite for any 2D distance.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

__all__ = ["SCENARIOS", "SPEED_OF_LIGHT_38901", "VALIDITY", "Validity", "breakpoint_m",
           "check_validity", "draw_states", "los_probability", "path_loss_db", "shadowing_sigma_db"]

SCENARIOS = ("uma", "umi", "rma", "inh")

#: c in the breakpoint distances: TR 38.901 Table 7.4.1-1 notes 1 and 5 say "c = 3.0 x 10^8 m/s",
#: and ns-3 uses the same (``constexpr double M_C = 3.0e8`` in three-gpp-propagation-loss-model.cc).
#: With 299 792 458 m/s the breakpoint moves by 0.07 % and the LOS loss beyond it by 5e-3 dB.
SPEED_OF_LIGHT_38901 = 3.0e8

#: effective environment height h_E of UMi, and of UMa with probability 1/(1 + C) (Table 7.4.1-1 note 1)
H_E_M = 1.0
#: RMa's average building height h and street width W: the defaults of Table 7.4.1-1 (and of ns-3's
#: ThreeGppRmaPropagationLossModel AvgBuildingHeight / AvgStreetWidth)
RMA_BUILDING_HEIGHT_M = 5.0
RMA_STREET_WIDTH_M = 20.0


@dataclass(frozen=True)
class Validity:
    """Applicability ranges (lo, hi), inclusive; ``None``: the standard does not restrict it."""
    carrier_hz: tuple[float, float]
    h_bs_m: tuple[float, float] | None
    h_ut_m: tuple[float, float] | None


#: Per scenario, the ranges of Table 7.4.1-1 ("Applicability range, antenna height default values").
#: Carrier: 0.5 to 100 GHz (clause 7.1), RMa 0.5 to 30 GHz (clause 7.4.1; ns-3 asserts the same).
#: UMa: h_BS = 25 m, 1.5 m <= h_UT <= 22.5 m. UMi: h_BS = 10 m, 1.5 m <= h_UT <= 22.5 m. RMa: 10 m <=
#: h_BS <= 150 m, 1 m <= h_UT <= 10 m. InH: Table 7.4.1-1 states no heights (only 1 m <= d3D <= 150 m).
VALIDITY: dict[str, Validity] = {
    "uma": Validity((0.5e9, 100e9), (25.0, 25.0), (1.5, 22.5)),
    "umi": Validity((0.5e9, 100e9), (10.0, 10.0), (1.5, 22.5)),
    "rma": Validity((0.5e9, 30e9), (10.0, 150.0), (1.0, 10.0)),
    "inh": Validity((0.5e9, 100e9), None, None),
}

_NAMES = {"scenario": "channel.scenario", "carrier_hz": "channel.carrier_hz",
          "h_bs_m": "channel.bs_height_m", "h_ut_m": "channel.ut_height_m"}
_UNITS = {"carrier_hz": "Hz", "h_bs_m": "m", "h_ut_m": "m"}


def _scenario(scenario: str, name: str = _NAMES["scenario"]) -> str:
    if scenario not in SCENARIOS:
        raise ValueError(f"{name} = {scenario!r}: TR 38.901 scenarios are {', '.join(SCENARIOS)}")
    return scenario


def check_validity(scenario: str, carrier_hz, h_bs_m, h_ut_m, *, names: Mapping[str, str] | None = None) -> None:
    """Raise ``ValueError`` (one line: the quantity, its value, the allowed range) unless the carrier
    and the heights (scalars or arrays) lie in ``VALIDITY[scenario]``, e.g.
    ``channel.ut_height_m = 30: TR 38.901 uma needs 1.5 to 22.5 m``.

    ``names`` renames the quantities in the message (keys ``scenario``, ``carrier_hz``, ``h_bs_m``,
    ``h_ut_m``; default ``channel.scenario``, ``channel.carrier_hz``, ``channel.bs_height_m``,
    ``channel.ut_height_m``). UMa with h_UT >= 13 m is accepted: see :func:`path_loss_db` for h_E."""
    label = {**_NAMES, **(names or {})}
    valid = VALIDITY[_scenario(scenario, label["scenario"])]
    for key, value in (("carrier_hz", carrier_hz), ("h_bs_m", h_bs_m), ("h_ut_m", h_ut_m)):
        values, bounds, unit = np.atleast_1d(np.asarray(value, dtype=float)).ravel(), getattr(valid, key), _UNITS[key]
        if bounds is None:  # not restricted by the standard: still positive
            bad, need = ~(values > 0), f"a positive value in {unit}"
        else:
            lo, hi = bounds
            bad = ~((values >= lo) & (values <= hi))  # NaN is out of range too
            need = f"{lo:g} {unit}" if lo == hi else f"{lo:g} to {hi:g} {unit}"
        if bad.any():
            raise ValueError(f"{label[key]} = {values[bad][0]:g}: TR 38.901 {scenario} needs {need}")


def breakpoint_m(scenario: str, h_bs_m, h_ut_m, carrier_hz, h_e_m=H_E_M) -> np.ndarray:
    """The LOS breakpoint distance (Table 7.4.1-1): UMa and UMi d'_BP = 4 (h_BS - h_E)(h_UT - h_E) f_c / c
    (note 1), RMa d_BP = 2 pi h_BS h_UT f_c / c (note 5); InH has none (inf). c = 3.0e8 m/s."""
    h_bs, h_ut = np.asarray(h_bs_m, dtype=float), np.asarray(h_ut_m, dtype=float)
    if _scenario(scenario) in ("uma", "umi"):
        return 4.0 * (h_bs - h_e_m) * (h_ut - h_e_m) * carrier_hz / SPEED_OF_LIGHT_38901
    if scenario == "rma":
        return 2.0 * np.pi * h_bs * h_ut * carrier_hz / SPEED_OF_LIGHT_38901
    return np.full(np.broadcast(h_bs, h_ut).shape, np.inf)


def _uma_h_e(rng: np.random.Generator | None, d2d: np.ndarray, h_ut: np.ndarray) -> np.ndarray | float:
    """UMa's h_E (Table 7.4.1-1 note 1): 1 m with probability 1/(1 + C(d2D, h_UT)), else uniform over
    {12, 15, ..., h_UT - 1.5} m; C = 0 below h_UT = 13 m. Without ``rng``: 1 m throughout."""
    if rng is None:
        return H_E_M
    g = np.where(d2d > 18.0, 1.25 * (d2d / 100.0) ** 3 * np.exp(-d2d / 150.0), 0.0)
    c = np.where(h_ut >= 13.0, np.clip((h_ut - 13.0) / 10.0, 0.0, None) ** 1.5, 0.0) * g
    choices = np.maximum(np.floor((h_ut - 1.5 - 12.0) / 3.0) + 1.0, 1.0)  # 12, 15, ... (12 at least)
    high = 12.0 + 3.0 * np.floor(rng.random(d2d.shape) * choices)
    return np.where(rng.random(d2d.shape) < 1.0 / (1.0 + c), H_E_M, high)


def path_loss_db(scenario: str, d2d_m, h_bs_m, h_ut_m, carrier_hz: float, los, *,
                 rng: np.random.Generator | None = None) -> np.ndarray:
    """Path loss in dB, TR 38.901 Table 7.4.1-1 (f_c in GHz, d in m in the formulas below;
    d3D = sqrt(d2D^2 + (h_BS - h_UT)^2); ``los``: boolean, broadcast against the distances).

    - UMa LOS: PL1 = 28 + 22 log10 d3D + 20 log10 f_c for d2D <= d'_BP, else PL2 = 28 + 40 log10 d3D
      + 20 log10 f_c - 9 log10(d'_BP^2 + (h_BS - h_UT)^2). NLOS: max(PL_LOS, 13.54 + 39.08 log10 d3D
      + 20 log10 f_c - 0.6 (h_UT - 1.5)).
    - UMi LOS: 32.4 + 21 log10 d3D + 20 log10 f_c, beyond d'_BP 32.4 + 40 log10 d3D + 20 log10 f_c
      - 9.5 log10(d'_BP^2 + (h_BS - h_UT)^2). NLOS: max(PL_LOS, 35.3 log10 d3D + 22.4 + 21.3 log10 f_c
      - 0.3 (h_UT - 1.5)).
    - RMa LOS: PL1 = 20 log10(40 pi d3D f_c / 3) + min(0.03 h^1.72, 10) log10 d3D - min(0.044 h^1.72,
      14.77) + 0.002 log10(h) d3D for d2D <= d_BP, else PL1(d_BP) + 40 log10(d3D / d_BP); h = 5 m,
      W = 20 m. NLOS: max(PL_LOS, 161.04 - 7.1 log10 W + 7.5 log10 h - (24.37 - 3.7 (h/h_BS)^2)
      log10 h_BS + (43.42 - 3.1 log10 h_BS)(log10 d3D - 3) + 20 log10 f_c - (3.2 (log10(11.75 h_UT))^2
      - 4.97)).
    - InH-Office LOS: 32.4 + 17.3 log10 d3D + 20 log10 f_c. NLOS: max(PL_LOS, 38.3 log10 d3D + 17.30
      + 24.9 log10 f_c).

    Breakpoints: :func:`breakpoint_m` (c = 3.0e8 m/s, as the notes and ns-3). The branch test is
    d2D <= d_BP (PL1 at the breakpoint itself), as ns-3. UMa's h_E: the standard draws it per link
    when h_UT >= 13 m (note 1). Without ``rng`` it is 1 m for every link: exact for h_UT < 13 m
    (C = 0, h_E = 1 m with probability 1), and for higher UTs the most likely value, not a draw.
    With ``rng`` it is drawn per element as note 1 says (ns-3 draws it on every call, with integers
    12..h_UT-1.5 floored to multiples of 3, which is not uniform over {12, 15, ...}).

    Outside the distance ranges the formulas are applied unchanged, as ns-3 does (module docstring).
    """
    scenario = _scenario(scenario)
    d2d, h_bs, h_ut, los = np.broadcast_arrays(np.asarray(d2d_m, dtype=float), np.asarray(h_bs_m, dtype=float),
                                               np.asarray(h_ut_m, dtype=float), np.asarray(los, dtype=bool))
    d3d = np.sqrt(d2d ** 2 + (h_bs - h_ut) ** 2)
    lg_f, lg_d = np.log10(carrier_hz / 1e9), np.log10(d3d)

    if scenario in ("uma", "umi"):
        h_e = _uma_h_e(rng, d2d, h_ut) if scenario == "uma" else H_E_M
        d_bp = breakpoint_m(scenario, h_bs, h_ut, carrier_hz, h_e)
        lg_bp = np.log10(d_bp ** 2 + (h_bs - h_ut) ** 2)
        a, b, k = (28.0, 22.0, 9.0) if scenario == "uma" else (32.4, 21.0, 9.5)  # PL1 and PL2 share a
        pl_los = np.where(d2d <= d_bp, a + b * lg_d + 20.0 * lg_f, a + 40.0 * lg_d + 20.0 * lg_f - k * lg_bp)
        pl_nlos = (13.54 + 39.08 * lg_d + 20.0 * lg_f - 0.6 * (h_ut - 1.5) if scenario == "uma"
                   else 35.3 * lg_d + 22.4 + 21.3 * lg_f - 0.3 * (h_ut - 1.5))
    elif scenario == "rma":
        h, w = RMA_BUILDING_HEIGHT_M, RMA_STREET_WIDTH_M

        def pl1(d):
            return (20.0 * np.log10(40.0 * np.pi * d * carrier_hz / 1e9 / 3.0) + min(0.03 * h ** 1.72, 10.0)
                    * np.log10(d) - min(0.044 * h ** 1.72, 14.77) + 0.002 * np.log10(h) * d)

        d_bp = breakpoint_m("rma", h_bs, h_ut, carrier_hz)
        pl_los = np.where(d2d <= d_bp, pl1(d3d), pl1(d_bp) + 40.0 * np.log10(d3d / d_bp))
        pl_nlos = (161.04 - 7.1 * np.log10(w) + 7.5 * np.log10(h) - (24.37 - 3.7 * (h / h_bs) ** 2) * np.log10(h_bs)
                   + (43.42 - 3.1 * np.log10(h_bs)) * (lg_d - 3.0) + 20.0 * lg_f
                   - (3.2 * np.log10(11.75 * h_ut) ** 2 - 4.97))
    else:  # inh
        pl_los = 32.4 + 17.3 * lg_d + 20.0 * lg_f
        pl_nlos = 38.3 * lg_d + 17.30 + 24.9 * lg_f
    return np.where(los, pl_los, np.maximum(pl_los, pl_nlos))


def los_probability(scenario: str, d2d_m, h_ut_m) -> np.ndarray:
    """Pr(LOS), TR 38.901 Table 7.4.2-1 (d2D in m):

    - UMa: 1 for d2D <= 18 m, else [18/d2D + exp(-d2D/63)(1 - 18/d2D)] [1 + C'(h_UT) 5/4 (d2D/100)^3
      exp(-d2D/150)], C'(h_UT) = 0 for h_UT <= 13 m, ((h_UT - 13)/10)^1.5 for 13 m < h_UT <= 23 m.
    - UMi - Street canyon: 1 for d2D <= 18 m, else 18/d2D + exp(-d2D/36)(1 - 18/d2D).
    - RMa: 1 for d2D <= 10 m, else exp(-(d2D - 10)/1000).
    - InH - Office-Mixed: 1 for d2D <= 1.2 m, exp(-(d2D - 1.2)/4.7) for 1.2 m < d2D < 6.5 m, else
      0.32 exp(-(d2D - 6.5)/32.6). ns-3's ThreeGppIndoorMixedOfficeChannelConditionModel (not the
      ...OpenOffice... one, which ns-3's ThreeGppIndoorOfficePropagationLossModel uses by default).

    ``h_ut_m`` matters only in UMa."""
    scenario = _scenario(scenario)
    d, h_ut = np.broadcast_arrays(np.asarray(d2d_m, dtype=float), np.asarray(h_ut_m, dtype=float))
    safe = np.maximum(d, 1e-9)  # the branches not taken must not divide by zero
    if scenario in ("uma", "umi"):
        p = 18.0 / safe + np.exp(-safe / (63.0 if scenario == "uma" else 36.0)) * (1.0 - 18.0 / safe)
        if scenario == "uma":
            c = np.where(h_ut > 13.0, np.clip((h_ut - 13.0) / 10.0, 0.0, None) ** 1.5, 0.0)
            p = p * (1.0 + c * 1.25 * (safe / 100.0) ** 3 * np.exp(-safe / 150.0))
        return np.where(d <= 18.0, 1.0, p)
    if scenario == "rma":
        return np.where(d <= 10.0, 1.0, np.exp(-(d - 10.0) / 1000.0))
    return np.where(d <= 1.2, 1.0, np.where(d < 6.5, np.exp(-(d - 1.2) / 4.7), 0.32 * np.exp(-(d - 6.5) / 32.6)))


def shadowing_sigma_db(scenario: str, los, d2d_m, h_bs_m, h_ut_m, carrier_hz: float) -> np.ndarray:
    """The shadow-fading standard deviation sigma_SF in dB per link, TR 38.901 Table 7.4.1-1: UMa 4
    (LOS) / 6 (NLOS); UMi 4 / 7.82; RMa LOS 4 for d2D <= d_BP and 6 beyond, NLOS 8; InH 3 / 8.03.

    ns-3.44 draws the same (benchmarks/ns3_check.py). An ns-3-dev snapshot (nsnam/ns-3-dev-git 06c5b45)
    uses 7 dB for UMa and UMi below 6 GHz in both states (``if (m_frequency < 6e9) shadowingStd = 7.0``
    in their GetShadowingStd), which is not in Table 7.4.1-1; here the table holds at every carrier."""
    scenario = _scenario(scenario)
    los, d2d, h_bs, h_ut = np.broadcast_arrays(np.asarray(los, dtype=bool), np.asarray(d2d_m, dtype=float),
                                               np.asarray(h_bs_m, dtype=float), np.asarray(h_ut_m, dtype=float))
    if scenario == "rma":
        d_bp = breakpoint_m("rma", h_bs, h_ut, carrier_hz)
        return np.where(los, np.where(d2d <= d_bp, 4.0, 6.0), 8.0)
    sigma_los, sigma_nlos = {"uma": (4.0, 6.0), "umi": (4.0, 7.82), "inh": (3.0, 8.03)}[scenario]
    return np.where(los, sigma_los, sigma_nlos)


def draw_states(rng: np.random.Generator, scenario: str, d2d_m, h_ut_m, los_mode: str) -> np.ndarray:
    """Boolean LOS state per link: ``"los"`` all True, ``"nlos"`` all False, ``"random"``
    ``rng.random(shape) < los_probability(...)`` (Table 7.4.2-1; one uniform per link)."""
    p = los_probability(scenario, d2d_m, h_ut_m)
    if los_mode == "random":
        return rng.random(p.shape) < p
    if los_mode in ("los", "nlos"):
        return np.full(p.shape, los_mode == "los")
    raise ValueError(f"los_mode = {los_mode!r}: one of random, los, nlos")
