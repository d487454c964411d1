"""The rows of rounds.csv of the event protocols' aggregations (``aggregation_values``: the
ROUND_COLUMNS of one, from its updates).

Aggregations of one update (fedasync, fedbuff with K = 1) come once per upload: each row is one
%-format of a tuple as it comes, and the rows reach the file a chunk at a time, instead of a list
of 27 values through csv.writer per aggregation (about 3 us an upload less). The bytes are
csv.writer's: it writes every number as str() does, and none of these fields needs quoting.

Only rows of nothing but ROUND_COLUMNS are written this way (no scheduler, algorithm or part
columns, no queue_mean or objective from the dispatch rule); the others go through csv.writer, after
the rows kept here.
"""
from __future__ import annotations

import math

from .columns import G6, fsum
from .round_record import AggregationRecord

__all__ = ["ROW", "SingleUpdateRows", "aggregation_values", "single_update_row"]

# round, t_start, t_end, downlink_s, comp_s, comm_s, 1 selected (the device), its airtime (columns.G6),
# energy_j, power_mean, no q, queue_mean 0.0, objective nan, compute_energy_j, num_available, 1 arrived,
# no drop, no server round or extra time, one update, its staleness (mean and max)
ROW = "%s,%s,%s,%s,%s,%s,1,%s,,%.6g,%s,%s,,0.0,nan,%s,%s,1,,0,0.0,0.0,0.0,0.0,1,%s,%s\r\n"


def aggregation_values(rec: AggregationRecord, num_available: int) -> list:
    """An aggregation's ROUND_COLUMNS, from its updates, in plain Python (the same numbers as the
    arrays of a round give: see columns.fsum); ``num_available``: the devices available now."""
    ups = rec.updates
    k = len(ups)
    info = rec.info
    staleness = rec.staleness
    if k == 1:  # one update per aggregation (fedasync, fedbuff with K = 1): fsum of one value is 0.0 + it
        u = ups[0]
        comp, comm, selected, airtimes = u.compute_s, 0.0 + u.airtime_s, str(u.device), G6(u.airtime_s)
        energy, power, compute_energy = 0.0 + u.energy_j, 0.0 + u.power, 0.0 + u.compute_energy_j
    else:
        airtime = [u.airtime_s for u in ups]
        comp = max((u.compute_s for u in ups), default=0.0)
        comm, selected, airtimes = fsum(airtime), " ".join([str(u.device) for u in ups]), " ".join(map(G6, airtime))
        energy = fsum([u.energy_j for u in ups])
        power = fsum([u.power for u in ups]) / k if k else 0.0
        compute_energy = fsum([u.compute_energy_j for u in ups])
    return [rec.round, rec.t_start, rec.t_end, rec.downlink_s, comp, comm, k, selected, "", airtimes, energy,
            power, "", info.get("queue_mean", 0.0), info.get("objective", math.nan), compute_energy,
            num_available, k, "", 0, 0.0, 0.0, 0.0, 0.0, len(staleness),
            # the sum of whole numbers is exact in any order: np.mean's value
            float(sum(staleness)) / len(staleness) if staleness else 0.0,
            max(staleness) if staleness else 0]


def single_update_row(rec: AggregationRecord, num_available: int) -> tuple:
    """ROW's fields for an aggregation of one update: the values of ``aggregation_values`` that vary."""
    u = rec.updates[0]
    staleness = rec.staleness[0]
    return (rec.round, rec.t_start, rec.t_end, rec.downlink_s, u.compute_s, 0.0 + u.airtime_s, u.device, u.airtime_s,
            0.0 + u.energy_j, 0.0 + u.power, 0.0 + u.compute_energy_j, num_available, float(staleness), staleness)


class SingleUpdateRows:
    """The rows not yet written, as tuples of ROW's fields."""

    CHUNK = 1024

    def __init__(self):
        self.pending: list[str] = []

    def add(self, row: tuple, fh) -> None:
        """One aggregation's row (ROW's fields), written to ``fh`` with the others once a chunk is full."""
        self.pending.append(ROW % row)  # formatted now, while its numbers are in the CPU's cache
        if len(self.pending) >= self.CHUNK:
            self.write(fh)

    def write(self, fh) -> None:
        """Write the rows kept so far to ``fh`` (before any other row of the file, and before a flush)."""
        if self.pending:
            fh.write("".join(self.pending))
            self.pending = []
