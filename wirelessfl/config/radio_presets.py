"""Radio presets: tables of physical values a scenario names with ``radio = "..."``. A preset fills
the [link] and [channel] keys (and the rate's options) that the file does not set itself, so a
user's value always overrides the preset's. They are values, not code paths: a run with a preset is
the same run as one with its values written out.

Sources: the 3GPP evaluation assumptions of TR 38.901 Table 7.2-1 (inter-site distances, heights) and
TR 38.802 Table A.2.1-1 / TR 36.814 Table A.2.1.1-2 (UE power 23 dBm, base station noise figure 5 dB,
antenna element gain 8 dBi). A cell radius is the hexagon's, ISD / sqrt(3).
"""
from __future__ import annotations

import math

__all__ = ["PRESETS", "apply_preset"]

_UE = {"tx_power_dbm": 23.0, "noise_figure_db": 5.0, "bs_antenna_gain_db": 8.0, "ut_antenna_gain_db": 0.0}

PRESETS: dict[str, dict[str, dict]] = {
    "nr_uma_3_5ghz": {
        "link": {**_UE, "rate": "nr", "bandwidth_hz": 20e6, "carrier_hz": 3.5e9,
                 "rate_options": {"subcarrier_spacing_khz": 30}},
        "channel": {"path_loss": "38.901", "scenario": "uma", "carrier_hz": 3.5e9, "bs_height_m": 25.0,
                    "ut_height_m": 1.5, "cell_radius_m": round(500 / math.sqrt(3), 1)},
    },
    "nr_umi_3_5ghz": {
        "link": {**_UE, "rate": "nr", "bandwidth_hz": 20e6, "carrier_hz": 3.5e9,
                 "rate_options": {"subcarrier_spacing_khz": 30}},
        "channel": {"path_loss": "38.901", "scenario": "umi", "carrier_hz": 3.5e9, "bs_height_m": 10.0,
                    "ut_height_m": 1.5, "cell_radius_m": round(200 / math.sqrt(3), 1)},
    },
    "lte_uma_2ghz": {
        "link": {**_UE, "rate": "lte", "bandwidth_hz": 10e6, "carrier_hz": 2e9},
        "channel": {"path_loss": "38.901", "scenario": "uma", "carrier_hz": 2e9, "bs_height_m": 25.0,
                    "ut_height_m": 1.5, "cell_radius_m": round(500 / math.sqrt(3), 1)},
    },
    "inh_office_5ghz": {
        "link": {**_UE, "tx_power_dbm": 20.0, "bs_antenna_gain_db": 5.0, "rate": "nr", "bandwidth_hz": 20e6,
                 "carrier_hz": 5e9, "rate_options": {"subcarrier_spacing_khz": 30}},
        "channel": {"path_loss": "38.901", "scenario": "inh", "carrier_hz": 5e9, "bs_height_m": 3.0,
                    "ut_height_m": 1.0, "cell_radius_m": 20.0},
    },
}
"""The presets by name: the values each fills in [link] and [channel]."""


def apply_preset(data: dict) -> None:
    """Fill ``data`` (a scenario as parsed from TOML) with the values of its ``radio`` preset where it
    gives none of its own (ConfigError for an unknown preset, or one set by a variant or a sweep)."""
    from ..fields import ConfigError, show

    for special in ("variants", "sweep"):
        table = data.get(special)
        for key in _keys(table):
            if key == "radio" or key.endswith(".radio"):
                raise ConfigError(f"{special}: sets radio; a preset fills the file's [link] and [channel], so set "
                                  "radio at the top of the file and vary its values (link.tx_power_dbm, ...) instead")
    name = data.get("radio")
    if name is None:
        return
    if not isinstance(name, str) or name not in PRESETS:
        raise ConfigError(f"radio = {show(name)}: unknown preset; allowed: {', '.join(PRESETS)}")
    for table, values in PRESETS[name].items():
        node = data.setdefault(table, {})
        if not isinstance(node, dict):
            continue  # the table's own error comes when it is built
        for key, value in values.items():
            if isinstance(value, dict):
                sub = node.setdefault(key, {})
                if isinstance(sub, dict) and node.get("rate", value) == values.get("rate"):
                    for k, v in value.items():
                        sub.setdefault(k, v)
            else:
                node.setdefault(key, value)


def _keys(table) -> list[str]:
    """The dotted keys a variants or sweep table sets (variants: one level of names first)."""
    if not isinstance(table, dict):
        return []
    out = []
    for key, value in table.items():
        if isinstance(value, dict):
            out += [key] + [f"{key}.{k}" for k in _keys(value)]
        else:
            out.append(key)
    return out
