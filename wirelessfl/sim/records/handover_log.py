"""handovers.csv: one row per handover of a moving device between cells (time_s, device, from_cell,
to_cell, and where it was: x_m, y_m), appended as they happen; a checkpoint remembers the file's length and digest, and a
resume cuts the file back to it (as updates.csv)."""
from __future__ import annotations

from pathlib import Path

from ...files import FileDigest, open_append, truncate_file, write_atomic

__all__ = ["HANDOVER_COLUMNS", "HandoverLog"]

HANDOVER_COLUMNS = ["time_s", "device", "from_cell", "to_cell", "x_m", "y_m"]


class HandoverLog:
    """handovers.csv (``path``; None: the rows stay in memory, ``rows``)."""

    def __init__(self, path: Path | None):
        self.path, self.count = path, 0
        self.rows: list[tuple] | None = [] if path is None else None
        self._fh = None
        self.digest = FileDigest(path)

    def start(self) -> None:
        if self.path is not None:
            write_atomic(self.path, ",".join(HANDOVER_COLUMNS) + "\n")
            self.digest.restart()
            self._fh = open_append(self.path)

    def write(self, handovers: list[tuple]) -> None:
        """Append (time, device, from, to, x, y) rows."""
        self.count += len(handovers)
        if self.rows is not None:
            self.rows.extend(handovers)
        if self._fh is not None and handovers:
            self._fh.write("".join(f"{t!r},{n},{a},{b},{x:.6g},{y:.6g}\n" for t, n, a, b, x, y in handovers))

    def flush(self) -> None:
        if self._fh is not None:
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def state_dict(self) -> dict:
        """How many rows, and how many bytes of the file, a checkpoint covers."""
        self.flush()
        size = self.path.stat().st_size if self.path is not None else 0
        return {"count": self.count, "bytes": size, "sha256": self.digest.advance(size)["sha256"],
                "rows": [list(r) for r in self.rows] if self.rows is not None else None}

    def check(self, state: dict | None) -> str | None:
        """Why the file cannot continue from ``state`` (None: it can)."""
        if state is None or self.path is None:
            return None
        return self.digest.continues(int(state["bytes"]), state.get("sha256"))

    def load_state(self, state: dict | None) -> None:
        """Cut the file back to the checkpoint's rows and append from there."""
        if state is None:
            return
        self.count = int(state["count"])
        if self.rows is not None:
            self.rows = [tuple(r) for r in (state.get("rows") or [])]
        if self.path is not None:
            self.close()
            truncate_file(self.path, int(state["bytes"]))
            self._fh = open_append(self.path)
