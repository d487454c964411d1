"""One run of a scenario: build every part through its registry, drive the engine, record, summarise.

The runner is the one place that turns a scenario into objects: the parts
(``scenario.part(kind).from_scenario(scenario, options)``), the learner (training runs), the link
and access scheme, availability, the recorder and the engine, each built by wirelessfl.sim.run.build,
and the progress bar. The round protocol picks the engine: the closed-form rounds of sync
(wirelessfl.sim.sync.engine) or the event engine (wirelessfl.sim.events.engine). It checkpoints every
``run.checkpoint_every`` aggregations and continues from a checkpoint; as it ends it writes the device
table and the summary (what the parts tell of the devices: wirelessfl.sim.run.part_facts) and hands
over a RunResult (wirelessfl.sim.run.result).
"""
from __future__ import annotations

import functools
import math
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ... import rng as rngs
from ...battery import build_battery
from ...capabilities import provides
from ...config import Scenario
from ...des.collector import paced_collector
from ...files import DamagedFile, FolderGuard, refuse_links, write_atomic
from ...plugins import PartError
from ...scheduling.base import check_frequency_choice
from ...wireless import build_channel, sigma_profile
from ..protocols import event_driven
from ..records.cell_summary import cell_rows, uplink_busy_s
from ..records.manifest import write_manifest
from ..records.round_record import RoundRecord
from ..records.summary import summarise
from .build import (build_engine, build_learning, build_parts, build_recorder, model_bits, run_availability,
                    work_scaled_compute)
from .checkpoint import CHECKPOINT_NAME, ResumeError, save_checkpoint
from .contract import EdgeTiers
from .part_facts import device_columns, mean_snr_db
from .progress import ProgressBar
from .result import RunResult

__all__ = ["ERROR_LOG", "Run"]

ERROR_LOG = "error.log"
"""Where a failed run writes the traceback of its error (summary.json names it)."""

WRITES = ("scenario.toml", "rounds.csv", "evals.csv", "updates.csv", "handovers.csv", "devices.csv", "decisions.h5",
          "passes.csv", "summary.json", "manifest.json", CHECKPOINT_NAME, ERROR_LOG)
"""The files a run (or a resume) reads back or writes in its folder: each must be a regular file
where it exists, never a link, a FIFO or a device (checked before anything is written)."""


def exited_in(exc: BaseException) -> str:
    """Who raised ``exc`` (a SystemExit): the module of the deepest frame outside this package and
    Python's own library, as "module my_parts (my_parts.py:12)"; "a part" when none is."""
    import sysconfig
    import traceback

    package = str(Path(__file__).resolve().parents[2])  # wirelessfl/
    library = {str(Path(sysconfig.get_paths()[k]).resolve()) for k in ("stdlib", "platstdlib")}
    for frame, line in reversed(list(traceback.walk_tb(exc.__traceback__))):
        name = str(Path(frame.f_code.co_filename).resolve())
        if not name.startswith(package) and not any(name.startswith(lib) for lib in library):
            return f"module {frame.f_globals.get('__name__', '?')} ({Path(name).name}:{line})"
    return "a part"


class Run:
    """One run's parts (engine, scheduler, algorithm, learner, recorder) wired together."""

    def __init__(self, scenario: Scenario, run_dir: Path | None, progress: bool):
        try:
            self._build(scenario, run_dir, progress)
        except SystemExit as exc:  # a part's sys.exit() fails the run; it does not end the program
            raise PartError(f"{exited_in(exc)} called sys.exit({exc.code!r}) while the run was built") from None

    def _build(self, scenario: Scenario, run_dir: Path | None, progress: bool) -> None:
        """Every part (wirelessfl.sim.run.build), wired together."""
        self.scenario, self.run_dir = scenario, run_dir
        self.algorithm, compressor, self.learner = build_learning(scenario, run_dir)
        self.bits = model_bits(scenario, self.algorithm, self.learner)
        check_frequency_choice(scenario)  # a scheduler's CPU frequencies need a computation model that takes them
        self.scheduler = scenario.part("scheduler").from_scenario(scenario, scenario.options("scheduler"))
        # the cell (positions, per-device shadowing) is drawn once from its own stream: a resumed run
        # rebuilds it from the seed, so it is not part of the checkpoint
        self.channel = build_channel(scenario, rngs.stream(scenario.seed, "cell"))
        self.compute = work_scaled_compute(scenario, self.algorithm)
        self.battery = build_battery(scenario)
        availability, self.excluded = run_availability(scenario, self.battery, self.channel)
        self.protocol = scenario.part("protocol").from_scenario(scenario, scenario.options("protocol"))
        parts, self._part_files = build_parts(scenario, self.protocol, channel=self.channel, compute=self.compute,
                                              scheduler=self.scheduler, algorithm=self.algorithm, battery=self.battery,
                                              availability=availability, compressor=compressor, bits=self.bits)
        self.recorder = build_recorder(scenario, run_dir, parts, self.protocol, self.battery)
        self.resumed = False
        self.guard = None  # the run folder as it was when the run began (execute)
        self._wall_before, self._started = 0.0, time.perf_counter()  # wall time of earlier attempts (resume)
        self.bar = ProgressBar(scenario, enabled=progress)
        # with edge servers the bar counts cloud aggregations; shown or not, the bar has nothing to do
        self.bar_counts_rounds = self.bar.shown and scenario.hierarchy.tiers == "cloud"
        checkpoints = scenario.run.checkpoint_every and run_dir is not None
        self.engine = build_engine(scenario, parts, self.protocol, self.learner, self.battery, self.recorder.on_update,
                                   on_round=self._on_round, on_eval=self._on_eval, on_cloud=self._on_cloud,
                                   # no checkpoints, nothing to do between events after an aggregation
                                   after_round=self._after_round if checkpoints else None)
        if self.battery is not None and not event_driven(self.protocol):  # sync: harvests at each round's start
            self.battery.clock = lambda: self.engine.now
        self.recorder.edge_rounds = provides(self.engine, EdgeTiers)
        self.engine.on_handovers = self.recorder.on_handovers
        self.engine.handover_upload = scenario.network.handover_upload

    def _on_round(self, rec: RoundRecord) -> None:
        self.recorder.on_round(rec)
        if self.bar_counts_rounds:
            self.bar.round(rec)

    def _on_cloud(self, row: dict) -> None:
        """A cloud aggregation of the edges' models: its row, and a step of the bar."""
        self.recorder.on_cloud(row)
        self.bar.round(SimpleNamespace(round=row["edge_round"], t_start=row["t_start"], t_end=row["t_end"]))

    def _on_eval(self, row: dict) -> None:
        self.recorder.on_eval(row)
        self.bar.accuracy(row["accuracy"])

    def _after_round(self, engine) -> None:
        every = self.scenario.run.checkpoint_every
        if every and self.run_dir is not None and engine.rounds_done % every == 0:
            self._same_folder()  # before the journals and the checkpoint are written by name in it
            save_checkpoint(self.run_dir / CHECKPOINT_NAME, self.state_dict())

    def state_dict(self) -> dict:
        """Everything needed to continue: the engine's loop, every part's state, the model, the records."""
        return {"engine": self.engine.state_dict(), "scheduler": self.scheduler.state_dict(),
                "algorithm": self.algorithm.state_dict(), "compute": self.compute.state_dict(),
                "learner": self.learner.state_dict() if self.learner is not None else None,
                "records": self.recorder.state_dict(), "scenario_sha256": self.scenario_sha256,
                # the wall time spent so far, so a resumed run's summary counts all of it
                "wall_time_s": self._wall_s()}

    def _wall_s(self) -> float:
        """Wall-clock seconds the run has taken, earlier attempts (before a resume) included."""
        return self._wall_before + time.perf_counter() - self._started

    @functools.cached_property
    def scenario_sha256(self) -> str:
        """The hash of the resolved scenario (as scenario.toml writes it): a checkpoint carries it,
        and a resume refuses one written for another scenario."""
        import hashlib

        from ...config import dumps

        return hashlib.sha256(dumps(self.scenario).encode()).hexdigest()

    def load_state(self, state: dict) -> None:
        """Continue from ``state_dict`` (call before ``execute``). Everything is checked before any
        file changes: a checkpoint that does not fit this scenario or disagrees with the records on
        disk raises ResumeError and leaves the folder as it was."""
        where = f"{self.run_dir or 'run'}: cannot resume"
        self.check_folder()  # nothing is read through a link, nor from a FIFO
        keys = ("engine", "scheduler", "algorithm", "compute", "learner", "records")
        if not isinstance(state, dict) or any(k not in state for k in keys):
            raise ResumeError(f"{where}: the checkpoint lacks {', '.join(k for k in keys if k not in (state or {}))}")
        if state.get("scenario_sha256", self.scenario_sha256) != self.scenario_sha256:
            raise ResumeError(f"{where}: the checkpoint was written for another scenario (scenario.toml was changed "
                              "since, or the checkpoint is another run's); the folder is left as it was")
        try:
            rounds_done = self.engine.rows_in_state(state["engine"])  # rounds.csv's rows the state stands for
            problem = self.recorder.check_resume(state["records"], rounds_done)
            if problem is None and (state["learner"] is None) != (self.learner is None):
                problem = "the checkpoint is of a training run and this one is timing only, or the other way round"
            if problem is None:
                self.engine.load_state(state["engine"])
                self.scheduler.load_state(state["scheduler"])
                self.algorithm.load_state(state["algorithm"])
                self.compute.load_state(state["compute"])
                if self.learner is not None:
                    self.learner.load_state(state["learner"])
        except DamagedFile as exc:  # a journal of the per-device state: it names itself
            problem = str(exc)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, RuntimeError) as exc:
            problem = f"the checkpoint does not fit this scenario ({type(exc).__name__}: {exc})"
        if problem is not None:
            raise ResumeError(f"{where}: {problem}; the folder is left as it was")
        self.recorder.load_state(state["records"])  # the first change on disk
        self._wall_before = float(state.get("wall_time_s", 0.0))
        self.resumed = True
        self.bar.bar.update(state["engine"]["now_s"] if self.bar.by_time else state["engine"]["rounds_done"])
        if self.recorder.evals:  # the accuracy the run had reached, until the next evaluation
            self.bar.acc = float(self.recorder.evals[-1]["accuracy"])

    def _same_folder(self) -> None:
        """UnsafeOutput, in one line, when the run folder was swapped (for a link, another folder)
        since the run began: nothing more is written by name in it."""
        if self.guard is not None:
            self.guard.check()

    def check_folder(self) -> None:
        """UnsafeOutput, in one line naming the path, when one of the files this run writes or reads
        back in its folder (WRITES, the per-device state's folder and journals) is a symbolic link or
        not a regular file: refused before anything is written or read, so nothing outside the
        folder changes and no read waits on a FIFO."""
        if self.run_dir is None:
            return
        refuse_links(self.run_dir, WRITES)
        if self.learner is not None:
            self.learner.trainer.device_states.check_files()

    def execute(self) -> RunResult:
        """Run to the end (or until interrupted), then write the device table and the summary."""
        self._started = time.perf_counter()
        status, error, error_log = "complete", None, None
        for name, text in self._part_files.items() if self.run_dir is not None else ():
            write_atomic(self.run_dir / name, text)
        # Float reductions depend on the thread count: fix it per run so a run gives the same
        # records serially, in a process pool or on a cluster.
        threads = None
        if self.learner is not None:
            import torch

            threads = torch.get_num_threads()
            torch.set_num_threads(self.scenario.run.threads)
        if not self.resumed:
            self.check_folder()  # before the first file is written
        if self.run_dir is not None:
            self.guard = self.recorder.files.guard = FolderGuard(self.run_dir)
        try:
            if not self.resumed:
                self.recorder.start()
            with paced_collector():  # a young collection every 20,000 allocations, not 700 (des/collector.py)
                self.engine.run()
        except BaseException as exc:  # record what happened, keep what was written, then re-raise
            status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
            # a part's sys.exit() fails the run; it does not end the program
            failure = PartError(f"{exited_in(exc)} called sys.exit({exc.code!r}) during the run") \
                if isinstance(exc, SystemExit) else exc
            error = f"{type(failure).__name__}: {failure}"
            if status == "failed" and self.run_dir is not None:  # the whole story, beside the one line
                import traceback

                self._same_folder()

                write_atomic(self.run_dir / ERROR_LOG, traceback.format_exc())
                error_log = ERROR_LOG
            if failure is not exc:
                raise failure from None
            raise
        finally:
            if threads is not None:
                import torch

                torch.set_num_threads(threads)
            self.bar.close()
            summary, devices = self._close(self._wall_s(), status, error, error_log)
        import pandas as pd  # not before the first round: 0.3 s of start-up

        rec = self.recorder
        # a run with a folder keeps no rows: RunResult reads rounds.csv when asked
        rounds = pd.DataFrame(rec.rounds, columns=rec.files.round_columns) if rec.rounds is not None else None
        return RunResult(rounds=rounds,
                         evals=pd.DataFrame(rec.evals), devices=pd.DataFrame(devices),
                         summary=summary, run_dir=self.run_dir, update_rows=rec.updates.log.rows_in_memory(),
                         update_columns=rec.updates.log.columns)

    def _busy_s(self) -> float:
        """How long the uplink carried a model upload: the sync rounds' (recorded with their rows)
        and the event engine's (kept as uploads go on and off the air)."""
        return self.recorder.updates.stats.get("busy_s", 0.0) + self.engine.uplink_busy_s(float(self.engine.now))

    def _updates_frame(self):
        """updates.csv as written so far (in memory, or read back from the run folder)."""
        import pandas as pd

        rec = self.recorder
        rows = rec.updates.log.rows_in_memory()
        if rows is not None:
            return pd.DataFrame(rows, columns=rec.updates.log.columns)
        return pd.read_csv(self.run_dir / "updates.csv")

    def _close(self, wall_time_s: float, status: str, error: str | None,
               error_log: str | None = None) -> tuple[dict, dict]:
        rec, sc, cells = self.recorder, self.scenario, self.engine.parts.cells
        extra = device_columns(sc, self.channel, self.battery, cells,
                               rec.devices.distance_sum if rec.positions is not None else None, rec.totals.rounds)
        own = None
        if provides(self.engine, EdgeTiers):  # each device's rates over its own edge's rounds
            own = np.asarray(self.engine.edge_rounds(), dtype=np.int64)[cells.serving]
        devices = rec.device_table(sigma_profile(sc.channel, sc.devices.count), extra, own)
        summary = summarise(sc, rec.totals, rec.evals, devices, wall_time_s=wall_time_s, model_bits=self.bits,
                            updates={**rec.updates.stats, "outcomes": rec.updates.outcomes, "busy_s": self._busy_s()},
                            sim_time_s=self.engine.now,
                            power_settled=rec.power.settled_round, mean_snr_db=mean_snr_db(sc, self.channel))
        summary.update(status=status, error=error)
        if cells.present:
            rec.flush()
            updates = self._updates_frame()
            summary["cells"] = cell_rows(cells, updates, float(self.engine.now))
            if provides(self.engine, EdgeTiers):  # the edges' rounds overlap in time:
                # the union of every cell's time on the air, not the sum of the edges' (at most 1)
                end_s = summary["sim_time_s"]
                busy = uplink_busy_s(updates, end_s)
                summary.update(uplink_busy_s=busy, uplink_utilisation=busy / end_s if end_s > 0 else math.nan)
            if rec.handovers is not None:
                summary["handovers"] = rec.handovers.count
        if provides(self.engine, EdgeTiers):
            summary.update(self.engine.summary(rec.totals.sums["num_selected"]))
        if error_log is not None:
            summary["error_log"] = error_log  # the traceback, in the run folder
        # incomplete participation (docs/papers/safari.md): who could never take part, and the capacity
        # omega = share of devices that ever took part
        summary.update(excluded=[int(i) for i in np.flatnonzero(self.excluded)],
                       ever_participated=float(np.mean(rec.devices.selections > 0)),
                       label_coverage=(self.learner.label_coverage(rec.devices.selections > 0)
                                       if self.learner is not None else math.nan))
        self._same_folder()  # the summary, the device table and the manifest are written by name
        rec.close(summary, devices)
        if status == "complete" and self.run_dir is not None:  # nothing left to resume
            write_manifest(self.run_dir, sc)  # last of the records: what a read-back checks
            (self.run_dir / CHECKPOINT_NAME).unlink(missing_ok=True)
            if self.learner is not None:
                self.learner.trainer.device_states.remove_files()
        return summary, devices
