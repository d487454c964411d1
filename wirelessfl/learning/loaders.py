"""Dataset parts: what ``learning.dataset`` names (registry ``wirelessfl.learning.DATASETS``).

A dataset part loads a train/test split (a :class:`wirelessfl.learning.datasets.Dataset`, which
``Dataset.from_arrays`` builds from numpy arrays) from the user's files. It may bring its own split
over devices (``own_split = True``: ``load`` returns a :class:`DeviceSplit`, and the partition is not
used), and may declare its input shape and class count, so that a timing-only run sizes the model
without loading the data. This module imports torch only when data is loaded.
"""
from __future__ import annotations

from typing import ClassVar, NamedTuple, Protocol, Sequence

import numpy as np

from ..fields import NoOptions

__all__ = ["CIFAR10", "DatasetLoader", "DeviceSplit", "FashionMNIST", "MNIST", "Synthetic"]


class DeviceSplit(NamedTuple):
    """A dataset with its own split over devices: the pooled Dataset and, per device, indices into
    its training set (and, optionally, into its test set)."""

    dataset: object  # wirelessfl.learning.datasets.Dataset
    train_indices: Sequence[np.ndarray]
    test_indices: Sequence[np.ndarray] | None = None


class DatasetLoader(Protocol):
    """A dataset. Required: ``from_scenario`` and ``load``."""

    Options: ClassVar[type | None] = None
    """A dataclass of the dataset's options (``[learning.dataset_options]``), or None: a dict."""
    own_split: ClassVar[bool] = False
    """True: ``load`` returns a DeviceSplit, and learning.partition (and learning.aux_samples, which
    draws from a shared training set) are not used."""
    input_shape: ClassVar[tuple[int, ...] | None] = None
    """The shape of one sample, if known without loading (see ``shape``)."""
    num_classes: ClassVar[int | None] = None
    """The number of classes, if known without loading (see ``shape``)."""

    @classmethod
    def from_scenario(cls, scenario, options) -> "DatasetLoader":
        """Build the loader for a run of ``scenario`` with its options (Options instance or dict)."""
        ...

    def load(self):
        """The data: a Dataset (a DeviceSplit when ``own_split``); a missing file raises
        FileNotFoundError naming where it looked."""
        ...

    @classmethod
    def shape(cls, scenario, options) -> tuple[tuple[int, ...], int] | None:
        """(input_shape, num_classes) without loading the data, for timing-only runs and the check of
        the model's input; default: the class attributes, None when either is unset (a timing-only
        run then loads the data to size the model)."""
        if cls.input_shape is None or cls.num_classes is None:
            return None
        return tuple(int(s) for s in cls.input_shape), int(cls.num_classes)

    @classmethod
    def check(cls, scenario, options) -> None:
        """Raise wirelessfl.config.ConfigError if the scenario cannot run with this dataset."""


class _FilesDataset(DatasetLoader):
    """A built-in read from its files (wirelessfl.learning.datasets.load_dataset, learning.data_dir)."""

    Options = NoOptions
    name: ClassVar[str] = ""
    num_classes = 10

    def __init__(self, data_dir: str | None = None):
        self.data_dir = data_dir or None

    @classmethod
    def from_scenario(cls, scenario, options) -> "_FilesDataset":
        """The loader of the files under learning.data_dir (default: the standard places)."""
        return cls(scenario.learning.data_dir)

    def load(self):
        """The dataset's normalised tensors (DatasetNotFoundError lists where it looked)."""
        from .datasets import load_dataset

        return load_dataset(self.name, self.data_dir)


class FashionMNIST(_FilesDataset):
    """``"fashion_mnist"``: Fashion-MNIST's four IDX files."""

    name, input_shape = "fashion_mnist", (1, 28, 28)


class MNIST(_FilesDataset):
    """``"mnist"``: MNIST's four IDX files."""

    name, input_shape = "mnist", (1, 28, 28)


class CIFAR10(_FilesDataset):
    """``"cifar10"``: CIFAR-10's python batches (a folder or the tarball)."""

    name, input_shape = "cifar10", (3, 32, 32)


class Synthetic(DatasetLoader):
    """``"synthetic"``: FedProx's Synthetic(learning.synthetic_alpha, learning.synthetic_beta), generated
    per device from the "synthetic" stream (learning.samples_per_device each): its own split."""

    Options = NoOptions
    own_split = True
    input_shape, num_classes = (60,), 10

    def __init__(self, num_devices: int, alpha: float, beta: float, samples_per_device: int, seed: int):
        self.num_devices, self.alpha, self.beta = num_devices, alpha, beta
        self.samples_per_device, self.seed = samples_per_device, seed

    @classmethod
    def from_scenario(cls, scenario, options) -> "Synthetic":
        """The generator with the scenario's learning.synthetic_* settings, devices and seed."""
        lc = scenario.learning
        return cls(scenario.devices.count, lc.synthetic_alpha, lc.synthetic_beta, lc.samples_per_device,
                   scenario.seed)

    def load(self) -> DeviceSplit:
        """The generated devices' data."""
        from .. import rng as rngs
        from .datasets import synthetic_federated

        fed = synthetic_federated(self.num_devices, self.alpha, self.beta, self.samples_per_device,
                                  rngs.stream(self.seed, "synthetic"))
        return DeviceSplit(fed.dataset, fed.train_indices, fed.test_indices)
