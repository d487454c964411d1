"""One run from a scenario: build the parts, drive the engine, record, summarise."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .. import rng as rngs
from ..config import Scenario, dumps
from ..devices import WorkScaledCompute, make_availability, make_compute
from ..learning.fedshuffle import FEDSHUFFLE_METHODS, FedShuffleGen, make_fedshuffle_method
from ..learning.perfedavg import GRADIENT_EVALUATIONS
from ..scheduling.base import Decision
from ..sim.engine import Engine, EvalRule, RoundRecord, StopRule
from ..sim.checkpoint import (CHECKPOINT_NAME, load_checkpoint, load_object_state, object_state,
                              save_checkpoint)
from ..sim.records import ROUND_COLUMNS, Recorder, write_json_atomic
from ..wireless import Link, PathLossChannel, make_access, make_channel, sigma_profile

# Input shape and class count of each dataset, so timing-only runs know the model size without data.
DATASET_SHAPES = {"fashion_mnist": ((1, 28, 28), 10), "mnist": ((1, 28, 28), 10),
                  "cifar10": ((3, 32, 32), 10), "synthetic": ((60,), 10)}


@dataclass
class RunResult:
    """What a run produced: per-round rows, evaluation rows, per-device totals and a summary."""

    rounds: pd.DataFrame
    evals: pd.DataFrame
    devices: pd.DataFrame
    summary: dict
    run_dir: Path | None = None


def make_store(scenario: Scenario, num_params: int):
    """The server's per-device gradient and loss store of a fair scheduler (None for the others)."""
    from ..scheduling.client_store import ClientStore
    from ..scheduling.fair import FAIR_SCHEDULERS

    s = scenario.scheduler
    if s.name not in FAIR_SCHEDULERS or s.name == "random":
        return None
    return ClientStore(scenario.devices.count, num_params, projection_dim=s.fair_projection_dim,
                       rng=rngs.stream(scenario.seed, "projection"))


def make_scheduler(scenario: Scenario, store=None, model_bits: float = 0.0):
    """The scheduler named in the scenario (fair schedulers read ``store`` and pay ``model_bits``
    per uploaded gradient)."""
    from ..scheduling.schedulers import LyapunovScheduler, UniformScheduler

    s, link, n = scenario.scheduler, scenario.link, scenario.devices.count
    if s.name == "uniform":
        return UniformScheduler(n, s.m, link.p_bar, link.p_max, replace=s.sampling == "with_replacement")
    if s.name in ("random", "power_of_choice", "divfl", "subtrunc", "unionfl"):
        from ..scheduling import fair

        if s.name == "random":
            return fair.RandomScheduler(n, s.kappa, link.p_bar, link.p_max)
        if store is None:
            raise ValueError(f"scheduler {s.name!r} needs a ClientStore")
        if s.name == "power_of_choice":
            return fair.PowerOfChoiceScheduler(n, s.kappa, link.p_bar, link.p_max, store, s.poc_candidates)
        r = s.fair_sample_size
        if s.fair_epsilon is not None:  # Mirzasoleiman et al.: r = (n / k) ln(1 / eps)
            r = min(n, math.ceil(n / s.kappa * math.log(1 / s.fair_epsilon)))
        return fair.SubmodularScheduler(
            n, s.kappa, link.p_bar, link.p_max, store, name=s.name,
            lam=(0.95 if s.fair_lambda is None else s.fair_lambda) if s.name == "subtrunc" else 0.0,
            budget=s.fair_budget, phi=s.fair_phi,
            mu=(1.0 if s.fair_mu is None else s.fair_mu) if s.name == "unionfl" else 0.0,
            window=s.fair_window, greedy=s.fair_greedy, sample_size=r, freshness=s.fair_freshness,
            normalize_distances=s.fair_normalize_distances, gradient_bits=model_bits)
    return LyapunovScheduler(n, s.m, s.V, s.lam, link.p_bar, link.p_max,
                             power_rule=s.power_rule, solver=s.solver)


def make_algorithm(scenario: Scenario, sizes: list[int], aux: np.ndarray):
    """The learning algorithm of the scenario, given the devices' dataset sizes and the server's
    auxiliary set."""
    from ..learning import FedAvg, PerFedAvg, Safari
    from ..scheduling.fair import FAIR_SCHEDULERS

    lc = scenario.learning
    # the fair schedulers' kappa updates are averaged (spec 000 Alg. 1), not weighted by 1 / (N q)
    aggregation = lc.aggregation or ("mean" if scenario.scheduler.name in FAIR_SCHEDULERS else "unbiased")
    if lc.algorithm == "safari":
        return Safari(aux, server_lr=lc.server_lr, server_steps=lc.server_steps, global_lr=lc.global_lr,
                      aggregation=aggregation, data_sizes=sizes)
    if lc.algorithm.startswith("perfedavg_"):  # spec 004: the local rule changes, the server's does not
        return PerFedAvg(lc.algorithm.split("_", 1)[1], lc.per_alpha, lc.per_beta, lc.per_delta,
                         server_lr=lc.global_lr)
    if lc.algorithm in FEDSHUFFLE_METHODS:  # spec 001: per-device work from the data sizes
        return make_fedshuffle_method(lc.algorithm, sizes, local_epochs=lc.local_epochs, batch_size=lc.batch_size,
                                      lr=lc.lr, server_lr=lc.global_lr, epochs_max=lc.local_epochs_max,
                                      momentum=lc.momentum, nova=lc.nova_tau_eff, seed=scenario.seed)
    return FedAvg(server_lr=lc.global_lr, aggregation=aggregation, data_sizes=sizes)


class FederatedLearner:
    """Adapts the training core (trainer + algorithm) to the engine's Learner protocol."""

    def __init__(self, scenario: Scenario):
        from ..learning import Trainer, load_dataset, partition, synthetic_federated
        from ..scheduling.fair import FAIR_SCHEDULERS

        lc = scenario.learning
        aux = np.empty(0, dtype=np.int64)
        if lc.dataset == "synthetic":  # the benchmark defines its own split over devices
            fed = synthetic_federated(scenario.devices.count, lc.synthetic_alpha, lc.synthetic_beta,
                                      lc.samples_per_device, rngs.stream(scenario.seed, "synthetic"))
            data, parts = fed.dataset, fed.train_indices
        else:
            data = load_dataset(lc.dataset, lc.data_dir or None)
            labels = data.y_train.numpy()
            pool = np.arange(labels.size)
            if lc.aux_samples:  # the server's set T: uniform from the training set, kept from the devices
                if lc.aux_samples >= labels.size:
                    raise ValueError(f"learning.aux_samples = {lc.aux_samples}: must be below the "
                                     f"{labels.size} training samples")
                aux = np.sort(rngs.stream(scenario.seed, "aux").choice(labels.size, lc.aux_samples, replace=False))
                pool = np.setdiff1d(pool, aux)
            parts = partition(labels[pool], scenario.devices.count, lc.partition,
                              rng=rngs.stream(scenario.seed, "partition"),
                              samples_per_device=lc.samples_per_device, alpha=lc.alpha, size_sigma=lc.size_sigma,
                              num_classes=data.num_classes, classes_per_device=lc.classes_per_device,
                              class_assignment=lc.class_assignment)
            parts = [pool[p] for p in parts]
        self.personalised = personalised_eval_enabled(scenario)
        fair = scenario.scheduler.name in FAIR_SCHEDULERS
        self.fairness = (lc.fairness_metrics if lc.fairness_metrics is not None else fair) and lc.dataset != "synthetic"
        # each device's own test split, for personalised evaluation and the fairness metrics
        self.test_parts = (_device_test_splits(scenario, data, parts)
                           if self.personalised or self.fairness else None)
        self.trainer = Trainer(data, parts, lc.model, local_steps=lc.local_steps,
                               batch_size=lc.batch_size, lr=lc.lr, root_seed=scenario.seed,
                               device=scenario.run.device, eval_train_samples=lc.eval_train_samples,
                               batching=scenario.run.batching)
        self.aux_indices = aux
        self.algorithm = make_algorithm(scenario, [len(p) for p in parts], aux)
        self.per_alpha, self.per_adapt_on = lc.per_alpha, lc.per_adapt_on
        self.num_devices = scenario.devices.count
        self.store = None
        self.probe_samples = scenario.scheduler.fair_probe_samples

    def attach_store(self, store) -> None:
        """Let the fair scheduler's store ask for losses and gradients at the current model."""
        self.store = store
        if store is not None:
            cap = self.probe_samples
            store.probe = lambda devices, with_gradients: self.trainer.local_objectives(
                devices, with_gradients, max_samples=cap)

    @property
    def model_bits(self) -> int:
        return self.trainer.model_bits

    def train_round(self, selected: np.ndarray, decision: Decision, round_idx: int) -> None:
        if self.store is not None and decision.info.get("store_refresh") == "gradient":
            # the uploaded gradient and loss are taken at x_t, before local training (spec 000 Alg. 1 l. 8)
            self.store.refresh(selected, with_gradients=True, round_idx=round_idx)
        self.algorithm.round(self.trainer, selected, decision.q, self.num_devices, round_idx)
        if not bool(torch.isfinite(self.trainer.params).all()):
            raise TrainingDiverged(f"training diverged in round {round_idx}: the model is no longer finite; "
                                   f"try a smaller learning.lr (now {self.trainer.lr:g})")

    def label_coverage(self, devices: np.ndarray) -> float:
        """Share of the classes held by at least one of the given devices (a boolean mask)."""
        y = self.trainer.dataset.y_train.numpy()
        held = [ix for ix, on in zip(self.trainer._indices, devices) if on and ix.size]
        seen = np.unique(y[np.concatenate(held)]) if held else np.empty(0)
        return float(seen.size / self.trainer.dataset.num_classes)

    def server_round(self, round_idx: int) -> None:
        """A SAFARI server round: SGD on the auxiliary set."""
        self.algorithm.server_round(self.trainer, round_idx)
        if not bool(torch.isfinite(self.trainer.params).all()):
            raise TrainingDiverged(f"training diverged in server round {round_idx}; try a smaller "
                                   "learning.server_lr")

    def state_dict(self) -> dict:
        return {"params": self.trainer.params.clone(), "algorithm": object_state(self.algorithm)}

    def load_state(self, state: dict) -> None:
        self.trainer.params = state["params"]
        load_object_state(self.algorithm, state["algorithm"])

    def evaluate(self) -> dict:
        metrics = self.trainer.evaluate()
        if self.personalised:
            pers = self.trainer.personalised_evaluate(self.test_parts, self.per_alpha, adapt_on=self.per_adapt_on)
            per_device = pers.pop("personal_per_device")
            metrics.update(pers, personal_per_device=" ".join(f"{a:.4g}" for a in per_device))
        if self.fairness:
            from ..learning.fairness import fairness_metrics

            sizes = [t.size for t in self.test_parts]
            correct = self.trainer.test_correct(np.concatenate(self.test_parts))
            acc = [c.mean() if c.size else np.nan for c in np.split(correct, np.cumsum(sizes)[:-1])]
            metrics.update(fairness_metrics(np.asarray(acc)))
        return metrics


def personalised_eval_enabled(scenario: Scenario) -> bool:
    """run.personalised_eval, or by default: on for Per-FedAvg algorithms and partitions."""
    if scenario.run.personalised_eval is not None:
        return scenario.run.personalised_eval
    lc = scenario.learning
    return lc.algorithm.startswith("perfedavg_") or lc.partition.startswith("perfedavg_groups")


def _device_test_splits(scenario: Scenario, data, parts: list[np.ndarray]) -> list[np.ndarray]:
    """Each device's own test split (indices into the test set): the Per-FedAvg layout with a_test
    for its partitions (spec 004 A6), else learning.device_test_samples samples with the class shares
    of the device's training data (spec 000's 33/33/34 recipe for three classes)."""
    from ..learning import perfedavg_group_counts, perfedavg_test_unit, split_by_class_counts
    from ..learning.fairness import device_test_sets

    lc = scenario.learning
    y_tr, y_te = data.y_train.numpy(), data.y_test.numpy()
    if lc.partition.startswith("perfedavg_groups"):
        a_test = perfedavg_test_unit(lc.samples_per_device // 5, y_tr.size, y_te.size)
        counts = perfedavg_group_counts(len(parts), a_test, single_class=lc.partition.endswith("single"))
        return split_by_class_counts(y_te, counts, rngs.stream(scenario.seed, "test_split"))
    return device_test_sets([y_tr[p] for p in parts], y_te, lc.device_test_samples,
                            rngs.stream(scenario.seed, "device_test"), data.num_classes)


def model_bits_of(scenario: Scenario) -> int:
    """Upload size in bits: the scenario's link.model_bits, else 32 x the model's parameter count."""
    if scenario.link.model_bits is not None:
        return scenario.link.model_bits
    from ..learning import build_model, num_parameters

    shape, classes = DATASET_SHAPES[scenario.learning.dataset]
    return 32 * num_parameters(build_model(scenario.learning.model, shape, classes))


def server_round_s(scenario: Scenario) -> float:
    """Simulated time of a SAFARI server round: devices.server_compute_s plus devices.server_step_s
    per SGD step (learning.server_steps, else one epoch: ceil(n_T / min(batch_size, n_T)) steps)."""
    dc, lc = scenario.devices, scenario.learning
    steps = lc.server_steps
    if steps is None:
        steps = math.ceil(lc.aux_samples / min(lc.batch_size, lc.aux_samples)) if lc.aux_samples else 0
    return dc.server_compute_s + dc.server_step_s * steps


def exchanged_vectors(scenario: Scenario) -> tuple[int, int]:
    """Model-sized vectors each device uploads and the server broadcasts per round (spec 001 sec. 4):
    FedShuffleMVR uploads u_i next to its delta; global momentum broadcasts m next to x_t, and MVR
    also x_{t-1}."""
    lc = scenario.learning
    mvr = lc.algorithm == "fedshuffle_mvr"
    return 1 + mvr, 1 + (lc.momentum > 0) + mvr


class TrainingDiverged(RuntimeError):
    """The global model stopped being finite (e.g. a learning rate far too large)."""


def simulate(scenario: Scenario, out_dir: str | Path | None = None, progress: bool = True,
             timing_only: bool | None = None) -> RunResult:
    """Run one scenario (no variants) and return its records; with ``out_dir``, also write them there.

    The run directory holds scenario.toml (the resolved scenario), rounds.csv and evals.csv (streamed
    while the run goes), devices.csv, decisions.npz and summary.json (written last; its "status" is
    "complete" only for a run that finished). With ``run.checkpoint_every = k`` a checkpoint is
    written every k rounds, from which ``resume(out_dir)`` continues an interrupted run.
    """
    if scenario.variants:
        raise ValueError("simulate() runs one scenario; use run_variants() for a scenario with [variants]")
    if timing_only is not None and timing_only != scenario.run.timing_only:
        scenario = scenario.replace(f"run.timing_only={'true' if timing_only else 'false'}")
    run_dir = Path(out_dir) if out_dir is not None else None
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
        for stale in ("summary.json", CHECKPOINT_NAME):
            (run_dir / stale).unlink(missing_ok=True)
        (run_dir / "scenario.toml").write_text(dumps(scenario))
    return _Run(scenario, run_dir, progress).execute()


def resume(run_dir: str | Path, progress: bool = True) -> RunResult:
    """Continue an interrupted run from its last checkpoint; the records equal an uninterrupted run's.

    A complete run is returned as it is; a run without a checkpoint starts again from round 0.
    """
    run_dir = Path(run_dir)
    done = load_run(run_dir)
    if done.summary.get("status") == "complete":
        return done
    from ..config import load_scenario

    scenario = load_scenario(run_dir / "scenario.toml")
    run = _Run(scenario, run_dir, progress)
    if (run_dir / CHECKPOINT_NAME).exists():
        run.load_state(load_checkpoint(run_dir / CHECKPOINT_NAME))
    return run.execute()


def _compute_model(scenario: Scenario, samples_per_round: int, learner: "FederatedLearner | None"):
    """The scenario's computation model; time proportional to each device's local steps when the
    algorithm sets them per device (FedShuffle family) or devices.step_time_s > 0."""
    base = make_compute(scenario.devices, samples_per_round)
    alg = getattr(learner, "algorithm", None)
    per_device = isinstance(alg, FedShuffleGen)
    k = scenario.learning.local_steps
    if scenario.learning.algorithm.startswith("perfedavg_"):
        # spec 004 sec. 5: a Per-FedAvg step costs 2 (FO) or 4 (HF, exact) FedAvg steps, whatever the
        # base model (the base time is a FedAvg round's); timing-only runs scale the same way
        factor = GRADIENT_EVALUATIONS[scenario.learning.algorithm.split("_", 1)[1]]
        return WorkScaledCompute(base, lambda d, r: np.full(len(d), k * factor), ref_steps=k,
                                 step_time_s=scenario.devices.step_time_s, scale_base=True)
    if not per_device and scenario.devices.step_time_s == 0:
        return base
    steps_fn = alg.work_units if per_device else (lambda d, r: np.full(len(d), k))
    return WorkScaledCompute(base, steps_fn, ref_steps=k, step_time_s=scenario.devices.step_time_s,
                             scale_base=scenario.devices.compute == "cpu")


class _Run:
    """One run's parts (engine, scheduler, learner, recorder) wired together."""

    def __init__(self, scenario: Scenario, run_dir: Path | None, progress: bool):
        self.scenario, self.run_dir = scenario, run_dir
        rc, n = scenario.run, scenario.devices.count
        self.learner = None if rc.timing_only else FederatedLearner(scenario)
        self.bits = scenario.link.model_bits or (self.learner.model_bits if self.learner else model_bits_of(scenario))
        self.recorder = Recorder(n, run_dir, keep_device_arrays=rc.record_devices)
        self.bar = _ProgressBar(scenario, enabled=progress)
        num_params = self.learner.trainer.num_params if self.learner else max(int(self.bits) // 32, 1)
        self.store = make_store(scenario, num_params)
        self.scheduler = make_scheduler(scenario, self.store, self.bits)
        if self.learner is not None:
            self.learner.attach_store(self.store)
        # the cell (positions, per-device shadowing) is drawn once from its own stream: a resumed run
        # rebuilds it from the seed, so it is not part of the checkpoint
        self.channel = make_channel(scenario.channel, n, rngs.stream(scenario.seed, "cell"))
        link = Link(scenario.link)
        availability = make_availability(scenario.devices)
        dc = scenario.devices
        if dc.excluded or dc.excluded_count or dc.min_mean_snr_db is not None:
            from ..participation import ExcludedAvailability, excluded_mask

            self.excluded = excluded_mask(
                n, dc.excluded, dc.excluded_count, rngs.stream(scenario.seed, "exclusion"),
                mean_snr=self.channel.mean_gain() * scenario.link.p_bar / scenario.link.noise_power,
                min_mean_snr_db=dc.min_mean_snr_db)
            availability = ExcludedAvailability(self.excluded, availability)
        else:
            self.excluded = np.zeros(n, dtype=bool)
        samples_per_round = scenario.learning.local_steps * scenario.learning.batch_size
        up, down = exchanged_vectors(scenario)
        safari = scenario.learning.algorithm == "safari"
        names = ("channel", "selection", "compute", "availability") + (("round_type",) if safari else ())
        self.engine = Engine(
            channel=self.channel, link=link, access=make_access(scenario.link, link),
            compute=_compute_model(scenario, samples_per_round, self.learner), scheduler=self.scheduler,
            availability=availability, round_deadline_s=rc.round_deadline_s,
            model_bits=self.bits * up, num_devices=n, downlink_s=link.downlink_time_s(self.bits * down),
            streams={name: rngs.stream(scenario.seed, name)
                     for name in names},
            client_round_prob=scenario.learning.safari_q if safari else None,
            server_round_s=server_round_s(scenario),
            server_round_is_slot=scenario.learning.server_round_is_slot,
            learner=self.learner,
            stop=StopRule(rc.rounds, rc.time_budget_s, rc.target_accuracy, rc.stop_at_target),
            evaluate=EvalRule(rc.eval_every_rounds, rc.eval_every_s),
            on_round=self._on_round, on_eval=self._on_eval,
            checkpoint_every=rc.checkpoint_every if run_dir is not None else None,
            on_checkpoint=lambda engine: save_checkpoint(run_dir / CHECKPOINT_NAME, self.state_dict()))

    def _on_round(self, rec: RoundRecord) -> None:
        self.recorder.on_round(rec)
        self.bar.round(rec)

    def _on_eval(self, row: dict) -> None:
        self.recorder.on_eval(row)
        self.bar.accuracy(row["accuracy"])

    def state_dict(self) -> dict:
        return {"engine": self.engine.state_dict(), "scheduler": object_state(self.scheduler),
                "learner": self.learner.state_dict() if self.learner else None,
                "records": self.recorder.state_dict(),
                "store": object_state(self.store) if self.store is not None else None}

    def load_state(self, state: dict) -> None:
        self.engine.load_state(state["engine"])
        load_object_state(self.scheduler, state["scheduler"])
        if self.learner is not None:
            self.learner.load_state(state["learner"])
        self.recorder.load_state(state["records"])
        if self.store is not None and state.get("store") is not None:
            load_object_state(self.store, state["store"])
        self.bar.bar.update(state["engine"]["now_s"] if self.bar.by_time else state["engine"]["rounds_done"])

    def execute(self) -> RunResult:
        started = time.perf_counter()
        status, error = "complete", None
        # Float reductions depend on the thread count: fix it per run so a run gives the same
        # records serially, in a process pool or on a cluster.
        threads = torch.get_num_threads()
        torch.set_num_threads(self.scenario.run.threads)
        try:
            self.engine.run()
        except BaseException as exc:  # record what happened, keep what was written, then re-raise
            status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
            error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            torch.set_num_threads(threads)
            self.bar.close()
            rec, sc = self.recorder, self.scenario
            extra = ({"distance_m": self.channel.path_loss.distances_m,
                      "mean_gain": self.channel.mean_gain()}
                     if isinstance(self.channel, PathLossChannel) else None)
            devices = rec.device_table(sigma_profile(sc.channel, sc.devices.count), extra)
            summary = summarise(sc, rec.rounds, rec.evals, devices,
                                wall_time_s=time.perf_counter() - started, model_bits=self.bits)
            summary.update(status=status, error=error)
            # incomplete participation (spec 003): who could never take part, and the capacity
            # omega = share of devices that ever took part
            summary.update(excluded=[int(i) for i in np.flatnonzero(self.excluded)],
                           ever_participated=float(np.mean(rec.selections > 0)),
                           label_coverage=(self.learner.label_coverage(rec.selections > 0)
                                           if self.learner is not None else math.nan))
            rec.close(summary, devices)
        return RunResult(rounds=pd.DataFrame(rec.rounds, columns=ROUND_COLUMNS),
                         evals=pd.DataFrame(rec.evals), devices=pd.DataFrame(devices),
                         summary=summary, run_dir=self.run_dir)


def summarise(scenario: Scenario, rounds: list[dict], evals: list[dict], devices: dict,
              *, wall_time_s: float, model_bits: int) -> dict:
    """Headline numbers of a run."""
    target = scenario.run.target_accuracy
    hit = next((e for e in evals if target is not None and e["accuracy"] >= target), None)
    n_rounds = len(rounds)
    return {
        "name": scenario.name, "seed": scenario.seed, "scheduler": scenario.scheduler.name,
        "access": scenario.link.access,
        "m": scenario.scheduler.m, "num_devices": scenario.devices.count, "model_bits": model_bits,
        "rounds": n_rounds, "sim_time_s": float(rounds[-1]["t_end"]) if rounds else 0.0,
        "final_accuracy": evals[-1]["accuracy"] if evals else math.nan,
        "best_accuracy": max((e["accuracy"] for e in evals), default=math.nan),
        "final_dissimilarity": evals[-1].get("dissimilarity", math.nan) if evals else math.nan,
        "target_accuracy": target,
        "time_to_target_s": hit["time_s"] if hit else math.nan,
        "rounds_to_target": hit["round"] if hit else math.nan,
        "total_comm_s": float(sum(r["comm_s"] for r in rounds)),
        "total_extra_airtime_s": float(sum(r.get("extra_airtime_s", 0.0) for r in rounds)),
        "total_comp_s": float(sum(r["comp_s"] for r in rounds)),
        "total_downlink_s": float(sum(r["downlink_s"] for r in rounds)),
        "server_rounds": int(sum(r.get("server_round", 0) for r in rounds)),
        "total_server_s": float(sum(r.get("server_s", 0.0) for r in rounds)),
        "total_energy_j": float(sum(r["energy_j"] for r in rounds)),  # transmit energy
        "total_compute_energy_j": float(sum(r.get("compute_energy_j", 0.0) for r in rounds)),
        "max_device_energy_j": float(np.max(devices["transmit_energy_j"] + devices["compute_energy_j"],
                                            initial=0.0)),
        "dropped_uploads": int(sum(r["num_selected"] - r.get("num_arrived", r["num_selected"]) for r in rounds)),
        "mean_time_avg_power": float(np.mean(devices["time_avg_power"])),
        "mean_distinct_per_round": float(np.mean([r["num_selected"] for r in rounds])) if rounds else 0.0,
        "wall_time_s": wall_time_s,
        "wall_per_round_s": wall_time_s / n_rounds if n_rounds else math.nan,
    }


class _ProgressBar:
    """tqdm bar over rounds (or simulated seconds when only a time budget is set)."""

    def __init__(self, scenario: Scenario, enabled: bool):
        from tqdm.auto import tqdm

        rc = scenario.run
        self.by_time = rc.rounds is None
        total = rc.time_budget_s if self.by_time else rc.rounds
        fmt = ("{l_bar}{bar}| {n:.1f}/{total:.0f} simulated s [{elapsed}<{remaining}{postfix}]"
               if self.by_time else None)
        self.bar = tqdm(total=total, desc=scenario.name, unit="round", bar_format=fmt,
                        disable=not enabled, leave=False, mininterval=0.5, dynamic_ncols=True)
        self.acc = math.nan

    def round(self, rec: RoundRecord) -> None:
        if self.by_time:
            # The last round may end past the budget: stop at the total (past it tqdm drops the
            # total from its format fields).
            self.bar.update(min(rec.t_end - rec.t_start, max(self.bar.total - self.bar.n, 0.0)))
        else:
            self.bar.update(1)
        if self.bar.disable:
            return
        self.bar.set_postfix(round=rec.round + 1, t=f"{rec.t_end:.1f}s", acc=f"{self.acc:.3f}", refresh=False)

    def accuracy(self, acc: float) -> None:
        self.acc = acc

    def close(self) -> None:
        self.bar.close()


def load_run(run_dir: str | Path) -> RunResult:
    """Read a run directory back (also an incomplete one: its summary then says so or is missing)."""
    import json

    run_dir = Path(run_dir)
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {"status": "incomplete"}

    def read(name: str) -> pd.DataFrame:
        path = run_dir / name
        if not path.exists() or path.stat().st_size == 0:  # a run killed before its first row
            return pd.DataFrame()
        return pd.read_csv(path, keep_default_na=False, na_values=[""])

    return RunResult(rounds=read("rounds.csv"), evals=read("evals.csv"), devices=read("devices.csv"),
                     summary=summary, run_dir=run_dir)


def run_variants(scenario: Scenario, out_dir: str | Path | None = None, progress: bool = True,
                 timing_only: bool | None = None) -> dict[str, RunResult]:
    """Run every variant of a scenario (or the scenario itself) into ``out_dir/VARIANT``."""
    results = {}
    for name, member in scenario.variant_scenarios():
        sub = None if out_dir is None else Path(out_dir) / name
        results[name] = simulate(member, sub, progress=progress, timing_only=timing_only)
    if out_dir is not None:
        write_json_atomic(Path(out_dir) / "index.json", {"scenario": scenario.name, "runs": list(results)})
    return results
