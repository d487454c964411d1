"""Partition parts: what ``learning.partition`` names (registry ``wirelessfl.learning.PARTITIONS``).

A partition splits the pooled training set over the devices: it receives the training labels, the
device count and the run's "partition" stream, and returns one array of training-set indices per
device. The built-ins below read their settings from the learning table (``learning.alpha``,
``learning.samples_per_device``, ``learning.size_sigma``, ``learning.classes_per_device``,
``learning.class_assignment``) and take no options of their own. A dataset that brings its own
split over devices (``DatasetLoader.own_split``) is not partitioned. numpy only.
"""
from __future__ import annotations

from typing import ClassVar, Protocol, Sequence

import numpy as np

from ..fields import NoOptions
from .partition import (check_split_inputs, classes_per_device_partition, dirichlet_per_device, iid_split,
                        label_dirichlet, perfedavg_group_counts, perfedavg_groups, perfedavg_test_unit,
                        split_by_class_counts)

__all__ = ["ClassesPerDevice", "DirichletPerDevice", "IID", "LabelDirichlet", "PerFedAvgGroups",
           "PerFedAvgGroupsSingle", "Partitioner"]


class Partitioner(Protocol):
    """A partition of the training set over devices. Required: ``from_scenario`` and ``split``."""

    Options: ClassVar[type | None] = None
    """A dataclass of the partition's options (``[learning.partition_options]``), or None: a dict."""
    personalised_eval: ClassVar[bool] = False
    """True: runs with this partition record personalised accuracy by default."""

    @classmethod
    def from_scenario(cls, scenario, options) -> "Partitioner":
        """Build the partition for a run of ``scenario`` with its options (Options instance or dict)."""
        ...

    def split(self, labels: np.ndarray, num_devices: int, rng: np.random.Generator, *,
              num_classes: int) -> Sequence[np.ndarray]:
        """One array of indices into ``labels`` per device (``rng``: the run's "partition" stream)."""
        ...

    def test_split(self, train_labels: np.ndarray, test_labels: np.ndarray, parts: Sequence[np.ndarray],
                   rng: np.random.Generator) -> Sequence[np.ndarray] | None:
        """Each device's own test split (indices into the test set) for personalised and fairness
        metrics, drawn from the "test_split" stream; None (default): learning.device_test_samples
        samples with the class shares of the device's training data."""
        return None

    @classmethod
    def check(cls, scenario, options) -> None:
        """Raise wirelessfl.config.ConfigError if the scenario cannot run with this partition."""


class _LearningTablePartition(Partitioner):
    """A built-in: its settings are the learning table's keys."""

    Options = NoOptions

    def __init__(self, *, samples_per_device: int = 500, alpha: float = 1.0, size_sigma: float = 0.0,
                 classes_per_device: int = 2, class_assignment: str = "random"):
        self.samples_per_device, self.alpha, self.size_sigma = samples_per_device, alpha, size_sigma
        self.classes_per_device, self.class_assignment = classes_per_device, class_assignment

    @classmethod
    def from_scenario(cls, scenario, options) -> "_LearningTablePartition":
        """The partition with the scenario's learning.* settings."""
        lc = scenario.learning
        return cls(samples_per_device=lc.samples_per_device, alpha=lc.alpha, size_sigma=lc.size_sigma,
                   classes_per_device=lc.classes_per_device, class_assignment=lc.class_assignment)

    def split(self, labels, num_devices, rng, *, num_classes=None):
        """The checked inputs handed to :meth:`_split` (``num_classes`` None: max label + 1)."""
        labels = check_split_inputs(labels, num_devices, self.samples_per_device, self.size_sigma, self.alpha)
        num_classes = int(labels.max()) + 1 if num_classes is None else int(num_classes)
        return self._split(labels, int(num_devices), rng, num_classes)

    def _split(self, labels: np.ndarray, num_devices: int, rng, num_classes: int) -> list[np.ndarray]:
        raise NotImplementedError

    @staticmethod
    def _own_split_refused(scenario, name: str) -> None:
        from ..config import ConfigError

        if scenario.part("dataset").own_split:
            raise ConfigError(f"learning.partition = {name!r}: dataset {scenario.learning.dataset!r} brings its "
                              "own split over devices; use a dataset with a shared training set")


class DirichletPerDevice(_LearningTablePartition):
    """``"dirichlet_per_device"``: per device a class mix ~ Dir(learning.alpha), then
    learning.samples_per_device draws (see wirelessfl.learning.partition.dirichlet_per_device)."""

    def _split(self, labels, num_devices, rng, num_classes):
        return dirichlet_per_device(labels, num_devices, self.samples_per_device, self.alpha, rng, num_classes,
                                    self.size_sigma)


class LabelDirichlet(_LearningTablePartition):
    """``"label_dirichlet"``: each class cut over the devices in proportions ~ Dir(learning.alpha);
    learning.samples_per_device is ignored."""

    def _split(self, labels, num_devices, rng, num_classes):
        return label_dirichlet(labels, num_devices, self.alpha, rng, num_classes)


class IID(_LearningTablePartition):
    """``"iid"``: a random disjoint split, learning.samples_per_device each if the set is large enough."""

    def _split(self, labels, num_devices, rng, num_classes):
        return iid_split(labels.size, num_devices, self.samples_per_device, rng, self.size_sigma)


class ClassesPerDevice(_LearningTablePartition):
    """``"classes_per_device"``: the SAFARI paper's non-iid index p (docs/papers/safari.md): every device
    holds learning.classes_per_device classes, each class held by p N / 10 devices and split evenly."""

    def _split(self, labels, num_devices, rng, num_classes):
        return classes_per_device_partition(labels, num_devices, self.classes_per_device, rng,
                                            num_classes=num_classes, assignment=self.class_assignment)

    @classmethod
    def check(cls, scenario, options) -> None:
        """A shared training set, and p x devices.count a multiple of the 10 classes."""
        from ..config import ConfigError

        cls._own_split_refused(scenario, "classes_per_device")
        p, n = scenario.learning.classes_per_device, scenario.devices.count
        if (p * n) % 10:
            raise ConfigError(f"learning.classes_per_device = {p}: p x devices.count = {p * n} must be a "
                              "multiple of the 10 classes (each class is held by p N / 10 devices)")


class PerFedAvgGroups(_LearningTablePartition):
    """``"perfedavg_groups"``: Per-FedAvg's Table 2 layout, 10 groups of devices (docs/papers/perfedavg.md,
    "Data: ten groups of devices"), with a test split of the same layout for every device."""

    personalised_eval = True
    single_class = False

    def _split(self, labels, num_devices, rng, num_classes):
        return perfedavg_groups(labels, num_devices, self.samples_per_device, rng, num_classes, self.single_class)

    def test_split(self, train_labels, test_labels, parts, rng):
        """The Per-FedAvg layout again, with a_test scaled to the test set's size."""
        a_test = perfedavg_test_unit(self.samples_per_device // 5, train_labels.size, test_labels.size)
        counts = perfedavg_group_counts(len(parts), a_test, single_class=self.single_class)
        return split_by_class_counts(test_labels, counts, rng)

    @classmethod
    def check(cls, scenario, options) -> None:
        """Training runs: 10 equal groups of devices, 5a samples each with a even, a shared training set."""
        from ..config import ConfigError

        if scenario.run.timing_only:
            return
        name = scenario.learning.partition
        if scenario.devices.count % 10:
            raise ConfigError(f"devices.count = {scenario.devices.count}: learning.partition = {name!r} needs a "
                              "multiple of 10 devices (10 equal groups)")
        if scenario.learning.samples_per_device % 10:
            raise ConfigError(f"learning.samples_per_device = {scenario.learning.samples_per_device}: "
                              f"learning.partition = {name!r} needs a multiple of 10 (5a with a even)")
        cls._own_split_refused(scenario, name)


class PerFedAvgGroupsSingle(PerFedAvgGroups):
    """``"perfedavg_groups_single"``: the "diff. hetero." variant, type-B devices hold one class."""

    single_class = True
