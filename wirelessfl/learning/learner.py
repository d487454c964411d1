"""The training side of a run: the federated data, the trainer and the algorithm, behind the
engine's Learner protocol (train a round, train on the server, report losses, evaluate)."""
from __future__ import annotations

import numpy as np

from .. import rng as rngs
from . import TrainingDiverged
from ..scheduling.base import Decision, ReportRequest, Reports

__all__ = ["FederatedLearner", "TrainingDiverged", "model_bits_of"]


def model_bits_of(scenario) -> int:
    """Upload size in bits: the scenario's link.model_bits, else 32 x the model's parameter count."""
    if scenario.link.model_bits is not None:
        return scenario.link.model_bits
    from .sizes import parameter_count

    return 32 * parameter_count(scenario.learning.model, scenario.learning.dataset)


def federated_data(scenario):
    """(dataset, each device's training indices, the server's auxiliary indices) of the scenario."""
    from .datasets import load_dataset, synthetic_federated
    from .partition import partition

    lc = scenario.learning
    aux = np.empty(0, dtype=np.int64)
    if lc.dataset == "synthetic":  # the benchmark defines its own split over devices
        fed = synthetic_federated(scenario.devices.count, lc.synthetic_alpha, lc.synthetic_beta,
                                  lc.samples_per_device, rngs.stream(scenario.seed, "synthetic"))
        return fed.dataset, fed.train_indices, aux
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
    return data, [pool[p] for p in parts], aux


def _device_test_splits(scenario, data, parts: list[np.ndarray]) -> list[np.ndarray]:
    """Each device's own test split (indices into the test set): the Per-FedAvg layout with a_test
    for its partitions (docs/papers/perfedavg.md, "Data: ten groups of devices"), else
    learning.device_test_samples samples with the class shares of the device's training data (the
    33/33/34 recipe of docs/papers/fair_selection.md, "Metrics", for three classes)."""
    from .fairness import device_test_sets
    from .partition import perfedavg_group_counts, perfedavg_test_unit, split_by_class_counts

    lc = scenario.learning
    y_tr, y_te = data.y_train.numpy(), data.y_test.numpy()
    if lc.partition.startswith("perfedavg_groups"):
        a_test = perfedavg_test_unit(lc.samples_per_device // 5, y_tr.size, y_te.size)
        counts = perfedavg_group_counts(len(parts), a_test, single_class=lc.partition.endswith("single"))
        return split_by_class_counts(y_te, counts, rngs.stream(scenario.seed, "test_split"))
    return device_test_sets([y_tr[p] for p in parts], y_te, lc.device_test_samples,
                            rngs.stream(scenario.seed, "device_test"), data.num_classes)


class FederatedLearner:
    """Adapts the training core (trainer + algorithm) to the engine's Learner protocol.

    personalised: record personalised accuracy at every evaluation; fairness: record per-device
    accuracies and the client dissimilarity (the runner decides both from the scenario and parts).
    """

    def __init__(self, scenario, algorithm, *, personalised: bool = False, fairness: bool = False,
                 run_dir=None):
        from .trainer import Trainer

        lc = scenario.learning
        data, parts, aux = federated_data(scenario)
        self.personalised = personalised
        self.fairness = fairness and lc.dataset != "synthetic"
        # each device's own test split, for personalised evaluation and the fairness metrics
        self.test_parts = (_device_test_splits(scenario, data, parts)
                           if self.personalised or self.fairness else None)
        self.trainer = Trainer(data, parts, lc.model, local_steps=lc.local_steps,
                               batch_size=lc.batch_size, lr=lc.lr, root_seed=scenario.seed,
                               device=scenario.run.device, eval_train_samples=lc.eval_train_samples,
                               batching=scenario.run.batching, server_indices=aux)
        if run_dir is not None:  # per-device states keep their journals (and large arrays) there
            self.trainer.device_states.use_run_folder(run_dir)
        self.algorithm = algorithm
        algorithm.setup(self.trainer)
        self.per_alpha, self.per_adapt_on = lc.per_alpha, lc.per_adapt_on
        self.num_devices = scenario.devices.count

    @property
    def model_bits(self) -> int:
        """32 x the model's parameters."""
        return self.trainer.model_bits

    def uplink(self, facts) -> None:
        """What the uplink did for the coming aggregation: its noise goes to the trainer's next
        aggregate, the facts to ``Algorithm.uplink``."""
        self.trainer.aggregate_noise_var = float(facts.noise_var)
        self.algorithm.uplink(facts)

    def train_round(self, selected: np.ndarray, decision: Decision, round_idx: int) -> dict:
        """The algorithm's client round on the devices whose uploads arrived; its numbers."""
        metrics = self.algorithm.round(self.trainer, selected, decision.q, self.num_devices, round_idx)
        self._check_finite(f"round {round_idx}", "learning.lr", self.trainer.lr)
        return dict(metrics or {})

    @property
    def params(self):
        """The global model (a tensor replaced, not changed in place, at every aggregation)."""
        return self.trainer.params

    def local_updates(self, devices: np.ndarray, key: int):
        """Event protocols: the devices' deltas from the current model by the algorithm's local rule
        (minibatches keyed by ``key``), a (k, d) tensor; the model does not change."""
        return self.algorithm.local_updates(self.trainer, np.asarray(devices, dtype=np.int64), key)

    def apply_updates(self, devices: np.ndarray, deltas: list, weights: np.ndarray, staleness: np.ndarray,
                      starts: list | None = None) -> dict:
        """Event protocols: one aggregation of (possibly stale) updates by the algorithm. With
        ``starts`` (fedasync's mix), each update moves the model toward the device's model
        start + delta: the algorithm gets y - x instead of the delta."""
        import torch

        from .algorithms import Updates

        stacked = torch.stack(deltas)
        if starts is not None:
            stacked = torch.stack(starts) + stacked - self.trainer.params
        metrics = self.algorithm.apply_updates(self.trainer, Updates(np.asarray(devices, dtype=np.int64), stacked,
                                                                     np.asarray(weights, dtype=float),
                                                                     np.asarray(staleness)))
        self._check_finite("an aggregation", "learning.lr", self.trainer.lr)
        return dict(metrics or {})

    def server_round(self, round_idx: int) -> dict:
        """The algorithm's server round; its numbers."""
        metrics = self.algorithm.server_round(self.trainer, round_idx)
        self._check_finite(f"server round {round_idx}", "server step size", None)
        return dict(metrics or {})

    def _check_finite(self, where: str, knob: str, value) -> None:
        import torch

        if not bool(torch.isfinite(self.trainer.params).all()):
            now = f" (now {value:g})" if value is not None else ""
            raise TrainingDiverged(f"training diverged in {where}: the model is no longer finite; "
                                   f"try a smaller {knob}{now}")

    def reports(self, request: ReportRequest, round_idx: int) -> Reports:
        """The requested devices' losses (and gradients) at the current global model."""
        devices = np.asarray(request.devices, dtype=np.int64)
        grads, losses = self.trainer.local_objectives(devices, request.gradients, max_samples=request.max_samples)
        return Reports(round=round_idx, devices=devices, losses=losses, gradients=grads)

    def label_coverage(self, devices: np.ndarray) -> float:
        """Share of the classes held by at least one of the given devices (a boolean mask)."""
        y = self.trainer.dataset.y_train.numpy()
        held = [ix for ix, on in zip(self.trainer._indices, devices) if on and ix.size]
        seen = np.unique(y[np.concatenate(held)]) if held else np.empty(0)
        return float(seen.size / self.trainer.dataset.num_classes)

    def state_dict(self) -> dict:
        """The global model, how many aggregations made it and the per-device states (by reference to
        their journals; the algorithm's own state is saved by the runner)."""
        return {"params": self.trainer.params.clone(), "aggregations": self.trainer.aggregations,
                "device_states": self.trainer.device_states.checkpoint()}

    def load_state(self, state: dict) -> None:
        """Restore the global model and the per-device states."""
        self.trainer.params = state["params"]
        self.trainer.aggregations = int(state.get("aggregations", 0))
        self.trainer.device_states.restore(state.get("device_states", {}))

    def evaluate(self) -> dict:
        """Test accuracy and losses, plus personalised and fairness metrics where they are on."""
        metrics = self.trainer.evaluate()
        if self.personalised:
            pers = self.trainer.personalised_evaluate(self.test_parts, self.per_alpha, adapt_on=self.per_adapt_on)
            per_device = pers.pop("personal_per_device")
            metrics.update(pers, personal_per_device=" ".join(f"{a:.4g}" for a in per_device))
        if self.fairness:
            from .fairness import fairness_metrics

            sizes = [t.size for t in self.test_parts]
            correct = self.trainer.test_correct(np.concatenate(self.test_parts))
            acc = [c.mean() if c.size else np.nan for c in np.split(correct, np.cumsum(sizes)[:-1])]
            metrics.update(fairness_metrics(np.asarray(acc)))
        return metrics
