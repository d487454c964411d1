"""What a run's parts tell of its devices when it ends: devices.csv's columns beyond the recorder's
totals (:func:`device_columns`) and summary.json's mean SNR in physical units (:func:`mean_snr_db`)."""
from __future__ import annotations

import numpy as np

from ...config import Scenario
from ...plugins import registry
from ...wireless import channel_columns
from ..records.cell_summary import cell_columns

__all__ = ["device_columns", "mean_snr_db"]


def device_columns(scenario: Scenario, channel, battery, cells, distance_sum: np.ndarray | None,
                   rows: int) -> dict[str, np.ndarray] | None:
    """devices.csv's columns of the channel, the batteries and the cells of its own (None: none).

    Moving devices under path loss: their mean distance over the ``rows`` records (``distance_sum``:
    its sum; None, or no record yet: where the devices are), their mean gain and, TR 38.901, each
    device's state and path loss; a channel of one's own: what it tells of its devices (the
    built-ins' are their sigma, kept as they are, byte for byte)."""
    extra = None
    if scenario.channel.path_loss:
        distance = distance_sum / rows if distance_sum is not None and rows else channel.path_loss.distances_m
        extra = {"distance_m": distance, "mean_gain": channel.mean_gain()}
        if hasattr(channel.path_loss, "device_columns"):
            extra.update(channel.path_loss.device_columns())
    elif scenario.part_name("channel") not in registry("channel").builtins:
        extra = channel_columns(channel, scenario.devices.count, f"channel.model = {scenario.part_name('channel')!r}")
    if battery is not None:
        extra = {**(extra or {}), **battery.device_columns()}
    if cells.present:  # cells of its own: each device's cell and gains to the sites
        extra = {**(extra or {}), **cell_columns(cells, channel.positions_m(), getattr(channel, "site_gain", None))}
    return extra


def mean_snr_db(scenario: Scenario, channel) -> float | None:
    """Physical units (link.tx_power_dbm, noise_figure_db): the devices' mean SNR at p_bar in dB, the
    mean over devices of 10 log10(E|h_n|^2 p_bar / N0); None otherwise (records as they were)."""
    link = scenario.link
    mean = channel.mean_gain() if link.physical else None
    if mean is None:
        return None
    return float(np.mean(10.0 * np.log10(np.maximum(np.asarray(mean) * link.p_bar / link.noise_power, 1e-300))))
