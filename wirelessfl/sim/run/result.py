"""What a run produced (:class:`RunResult`), as the runner hands it over or as a run folder holds it
(:func:`read_run_file`)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RunResult", "read_run_file"]


def read_run_file(run_dir: Path | None, name: str) -> pd.DataFrame:
    """A table of a run folder (empty for no folder, or a file a run killed before its first row
    left missing or empty); DamagedFile, in one line, for one that cannot be read."""
    import pandas as pd

    from ...files import read_table

    path = run_dir / name if run_dir is not None else None
    if path is None or not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame()
    return read_table(path)


class RunResult:
    """What a run produced: per-round (per-aggregation) rows, evaluation rows, per-device totals,
    a summary, and ``updates``: one row per dispatched device. ``rounds`` and ``updates`` given as
    None are read from the run folder's rounds.csv and updates.csv when first asked for (a run with
    a folder keeps neither in memory); a run without a folder hands them over."""

    def __init__(self, rounds: pd.DataFrame | None, evals: pd.DataFrame, devices: pd.DataFrame, summary: dict,
                 run_dir: Path | None = None, update_rows: list | None = None, update_columns: list | None = None):
        self._rounds, self.evals, self.devices, self.summary = rounds, evals, devices, summary
        self.run_dir, self.update_rows, self.update_columns = run_dir, update_rows, update_columns

    def __repr__(self) -> str:
        return f"RunResult({self.summary.get('name')!r}, status={self.summary.get('status')!r}, run_dir={self.run_dir})"

    @property
    def rounds(self) -> pd.DataFrame:
        """rounds.csv as a DataFrame (columns wirelessfl.sim.records.columns.ROUND_COLUMNS and the parts' own)."""
        if self._rounds is None:
            self._rounds = read_run_file(self.run_dir, "rounds.csv")
        return self._rounds

    @property
    def updates(self) -> pd.DataFrame:
        """updates.csv as a DataFrame (columns wirelessfl.sim.records.update_log.UPDATE_COLUMNS, then those of a
        timed downlink and of several cells where the run has them: wirelessfl.sim.records.update_log)."""
        import pandas as pd

        from ..records.update_log import UPDATE_COLUMNS

        if self.update_rows is not None:
            return pd.DataFrame(self.update_rows, columns=self.update_columns or UPDATE_COLUMNS)
        path = self.run_dir / "updates.csv" if self.run_dir is not None else None
        if path is None or not path.exists() or path.stat().st_size == 0:
            return pd.DataFrame(columns=UPDATE_COLUMNS)
        return pd.read_csv(path, keep_default_na=False, na_values=[""])

    @property
    def decisions(self) -> dict[str, np.ndarray]:
        """decisions.h5's per-round arrays of every device (gains, omega, q, power, queue,
        available; positions when devices move), read when asked for (wirelessfl.load_decisions)."""
        if self.run_dir is None:
            raise FileNotFoundError("a run without a folder keeps no per-device arrays")
        from ..records.device_arrays import load_decisions

        return load_decisions(self.run_dir)
