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
        self._last = None  # the last round's record
        self.training = not rc.timing_only  # timing-only runs have no accuracy to show

    @property
    def shown(self) -> bool:
        """Whether the bar is drawn at all (hidden: a round has nothing to tell it)."""
        return not self.bar.disable

    def round(self, rec) -> None:
        """Advance by one round; the postfix is set before the bar draws, so it shows this round."""
        if not self.shown:  # (an aggregation may come every few microseconds)
            return
        if self.by_time:
            # The last round may end past the budget: stop at the total (past it tqdm drops the
            # total from its format fields).
            step = min(rec.t_end - rec.t_start, max(self.bar.total - self.bar.n, 0.0))
        else:
            step = 1
        self._last = rec
        now = time.monotonic()
        # the bar draws at most every mininterval: format the postfix only then
        if now - self._shown_at >= self.bar.mininterval or self.bar.n + step >= self.bar.total:
            self._shown_at = now
            self.bar.set_postfix(self._postfix(), refresh=False)
        self.bar.update(step)

    def accuracy(self, acc: float) -> None:
        """A new evaluation: shown at once, with the round it was made after."""
        self.acc = acc
        if self.training and not self.bar.disable and self._last is not None:
            self.bar.set_postfix(self._postfix(), refresh=True)

    def _postfix(self) -> dict:
        shown = {"round": self._last.round + 1, "t": f"{self._last.t_end:.1f}s"}
        if self.training and not math.isnan(self.acc):  # no evaluation yet: nothing to show
            shown["acc"] = f"{self.acc:.3f}"
        return shown

    def close(self) -> None:
        self.bar.close()
