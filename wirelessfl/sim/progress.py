"""The progress bar of a run (tqdm): rounds, or simulated seconds when only a time budget is set."""
from __future__ import annotations

import math
import time


class ProgressBar:
    """tqdm bar over rounds (or simulated seconds when only a time budget is set)."""

    def __init__(self, scenario, enabled: bool):
        from tqdm.auto import tqdm

        rc = scenario.run
        self.by_time = rc.rounds is None
        total = rc.time_budget_s if self.by_time else rc.rounds
        fmt = ("{l_bar}{bar}| {n:.1f}/{total:.0f} simulated s [{elapsed}<{remaining}{postfix}]"
               if self.by_time else None)
        self.bar = tqdm(total=total, desc=scenario.name, unit="round", bar_format=fmt,
                        disable=not enabled, leave=False, mininterval=0.5, dynamic_ncols=True)
        self.acc = math.nan
        self._shown_at = -math.inf
        self.training = not rc.timing_only  # timing-only runs have no accuracy to show

    def round(self, rec) -> None:
        if self.by_time:
            # The last round may end past the budget: stop at the total (past it tqdm drops the
            # total from its format fields).
            self.bar.update(min(rec.t_end - rec.t_start, max(self.bar.total - self.bar.n, 0.0)))
        else:
            self.bar.update(1)
        if self.bar.disable:
            return
        now = time.monotonic()
        if now - self._shown_at < self.bar.mininterval and self.bar.n < self.bar.total:
            return  # the bar shows what it has at most every mininterval: format only then
        self._shown_at = now
        shown = {"round": rec.round + 1, "t": f"{rec.t_end:.1f}s"}
        if self.training:
            shown["acc"] = f"{self.acc:.3f}"
        self.bar.set_postfix(shown, refresh=False)

    def accuracy(self, acc: float) -> None:
        self.acc = acc

    def close(self) -> None:
        self.bar.close()
