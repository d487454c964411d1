"""What summary.json and devices.csv say of each cell when there are several (wirelessfl.network):
its site, sub-band and devices, the uploads it carried and the share of the run its uplink was busy."""
from __future__ import annotations

import numpy as np

from .update_log import union_length

__all__ = ["cell_columns", "cell_rows", "uplink_busy_s"]


def _on_air(updates, end_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Each upload's time on the air: from its start to its end, or to when it stopped, or to ``end_s``."""
    start = updates["tx_start_s"].to_numpy(float)
    stop = updates["tx_end_s"].fillna(updates["lost_s"]).fillna(end_s).to_numpy(float)
    return start, np.minimum(stop, end_s)


def uplink_busy_s(updates, end_s: float) -> float:
    """How long at least one upload was on the air in any cell: the union over all cells' uploads
    (with edge servers the cells' rounds overlap in time, so their busy times do not add up)."""
    start, stop = _on_air(updates, end_s)
    return union_length(start, stop)


def cell_rows(cells, updates, end_s: float) -> list[dict]:
    """One entry per cell: ``site_m`` [x, y], ``band`` (its sub-band), ``devices`` (how many it
    serves), ``uploads`` (updates.csv's rows in it), ``uplink_utilisation``: the union of its
    uploads' times on the air (each from its start to its end, or to when it stopped) over the run's
    simulated time, and ``sinr_loss_db``: 10 log10(SNR / SINR) of its transmissions averaged over
    their time on the air (0 without interference). ``updates``: updates.csv as a DataFrame with its ``cell`` column."""
    start, stop = _on_air(updates, end_s)
    where = updates["cell"].to_numpy(np.int64)
    loss = cells.meter.mean_db()
    rows = []
    for c in range(cells.count):
        mine = where == c
        busy = union_length(start[mine], stop[mine])
        site = cells.site_row(c) if hasattr(cells, "site_row") else {  # (ground stations: name, coordinates)
            "site_m": [float(v) for v in cells.sites.positions_m[c]], "band": int(cells.sites.bands[c])}
        rows.append({"cell": c, **site, "devices": int((cells.serving == c).sum()),
                     "uploads": int(mine.sum()), "uplink_utilisation": busy / end_s if end_s > 0 else float("nan"),
                     "sinr_loss_db": float(loss[c])})
    return rows


def cell_columns(cells, positions_m: np.ndarray, site_gain: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """devices.csv's columns of several cells: the serving cell, where each device is, and its mean
    gain to every site there (``gain_site_<c>``: path loss and shadowing, what the association part
    was given), so that an association rule can be checked by hand."""
    columns = {"cell": cells.serving.copy()}
    if positions_m is not None:  # (satellites have no place on the plane)
        columns.update({"x_m": positions_m[:, 0].copy(), "y_m": positions_m[:, 1].copy()})
    if site_gain is not None:
        columns.update({f"gain_site_{c}": site_gain[:, c].copy() for c in range(site_gain.shape[1])})
    return columns
