"""Python's garbage collector while a run goes on.

A run allocates a few dozen container objects per event (processes, generators, events, updates)
and frees nearly all of them by reference counting a moment later; they form no cycles. With the
collector's default pace (a young collection every 700 net allocations) a run with a thousand
devices in flight still collected every couple of hundred uploads, and each collection walked the
thousands of objects then alive; the older generations walked everything the libraries had loaded
(torch, pandas: some 200,000 objects). That was about 6 us an upload at 10,000 devices, an eighth
of the engine's time, and collected nothing.

``paced_collector`` keeps the collector on, with a young generation of YOUNG net allocations, and
moves what exists when the run starts (the libraries, the parts, the model) to the permanent
generation, so a full collection walks only what the run made. Garbage in cycles is still
collected, a little later: at most YOUNG objects wait.
"""
from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["YOUNG", "paced_collector"]

YOUNG = 20_000
"""Net allocations of container objects between young collections during a run (Python's default: 700)."""


@contextlib.contextmanager
def paced_collector(young: int = YOUNG) -> Iterator[None]:
    """The collector paced for a run (see the module) inside the block, as it was after it. A
    collector the user turned off stays off; one already paced at least as slowly is left alone,
    and objects someone else froze stay frozen."""
    before = gc.get_threshold()
    if not gc.isenabled() or before[0] == 0 or before[0] >= young:
        yield
        return
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    gc.set_threshold(young, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
        if freeze:
            gc.unfreeze()
