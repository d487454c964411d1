"""rounds.csv rows of aggregations of one update (fedasync, fedbuff with K = 1), which come once per
upload: kept as a tuple each and written a chunk at a time, each row through one %-format, instead
of a list of 27 values through csv.writer per aggregation (about 3 us an upload less). The bytes are
csv.writer's: it writes every number as str() does, and none of these fields needs quoting.

Only rows of nothing but ROUND_COLUMNS are written this way (no scheduler, algorithm or part
columns, no queue_mean or objective from the dispatch rule); the others go through csv.writer, after
the rows kept here.
"""
from __future__ import annotations

__all__ = ["SingleUpdateRows"]

# round, t_start, t_end, downlink_s, comp_s, comm_s, 1 selected (the device), its airtime (columns.G6),
# energy_j, power_mean, no q, queue_mean 0.0, objective nan, compute_energy_j, num_available, 1 arrived,
# no drop, no server round or extra time, one update, its staleness (mean and max)
ROW = "%s,%s,%s,%s,%s,%s,1,%s,,%.6g,%s,%s,,0.0,nan,%s,%s,1,,0,0.0,0.0,0.0,0.0,1,%s,%s\r\n"


class SingleUpdateRows:
    """The rows not yet written, as tuples of ROW's fields."""

    CHUNK = 1024

    def __init__(self):
        self.pending: list[tuple] = []

    def add(self, row: tuple, fh) -> None:
        """One aggregation's row (ROW's fields), written to ``fh`` with the others once a chunk is full."""
        self.pending.append(row)
        if len(self.pending) >= self.CHUNK:
            self.write(fh)

    def write(self, fh) -> None:
        """Write the rows kept so far to ``fh`` (before any other row of the file, and before a flush)."""
        if self.pending:
            fh.write("".join([ROW % row for row in self.pending]))
            self.pending = []
