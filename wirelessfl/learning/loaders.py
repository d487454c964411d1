"""Dataset parts: what ``learning.dataset`` names (registry ``wirelessfl.learning.DATASETS``).

A dataset part loads a train/test split (a :class:`wirelessfl.learning.datasets.Dataset`, which
``Dataset.from_arrays`` builds from numpy arrays) from the user's files. It may bring its own split
over devices (``own_split = True``: ``load`` returns a :class:`DeviceSplit`, and the partition is not
used), and may declare its input shape and class count, so that a timing-only run sizes the model
without loading the data. A dataset read from files in a known format subclasses
:class:`FilesDataset` and declares its folders, its file format, its normalisation and where to get
it, as the built-ins do. This module imports torch only when data is loaded.
"""
from __future__ import annotations

from typing import ClassVar, NamedTuple, Protocol, Sequence

import numpy as np

from ..fields import NoOptions
from .file_formats import CifarBatches, FileFormat, IdxFiles

__all__ = ["CIFAR10", "DatasetLoader", "DeviceSplit", "FashionMNIST", "FilesDataset", "MNIST", "Synthetic"]


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


class FilesDataset(DatasetLoader):
    """A dataset of images read from files under learning.data_dir, else ``$WIRELESSFL_DATA``, else
    ``/usr/share/datasets`` (wirelessfl.learning.datasets.load_files). A subclass declares what the
    loader needs to know, instead of being known by its name: ``name``, ``folders``, ``files``,
    ``normalisation``, ``how_to_get`` (and, as every dataset, ``input_shape`` and ``num_classes``)."""

    Options = NoOptions
    name: ClassVar[str] = ""
    """The dataset's name, in messages and in the cache of decoded arrays."""
    folders: ClassVar[tuple[str, ...]] = ()
    """Folders under a data root that may hold its files, in the order looked at (a data root given
    by learning.data_dir or $WIRELESSFL_DATA is looked at itself too, last)."""
    files: ClassVar[FileFormat] = IdxFiles()
    """Where its files are in a folder and how they are read (wirelessfl.learning.file_formats):
    ``IdxFiles()`` (MNIST's four IDX files), ``CifarBatches()`` (CIFAR-10's python batches)."""
    normalisation: ClassVar[tuple[tuple[float, ...], tuple[float, ...]]] = ((0.0,), (1.0,))
    """(mean, std) per channel of the images scaled to [0, 1]: a pixel becomes (x / 255 - mean) / std."""
    how_to_get: ClassVar[str] = "put its files in a folder and set WIRELESSFL_DATA or the scenario's data_dir"
    """Said when its files are not found."""
    num_classes = 10

    def __init__(self, data_dir: str | None = None):
        self.data_dir = data_dir or None

    @classmethod
    def from_scenario(cls, scenario, options) -> "FilesDataset":
        """The loader of the files under learning.data_dir (default: the standard places)."""
        return cls(scenario.learning.data_dir)

    def load(self):
        """The dataset's normalised tensors (DatasetNotFoundError lists where it looked)."""
        from .datasets import load_files

        return load_files(self, self.data_dir)


_IN_DATA_DIR = "set WIRELESSFL_DATA or the scenario's data_dir"


class FashionMNIST(FilesDataset):
    """``"fashion_mnist"``: Fashion-MNIST's four IDX files."""

    name, input_shape = "fashion_mnist", (1, 28, 28)
    folders = ("fashion-mnist", "fashion_mnist")
    normalisation = ((0.2860,), (0.3530,))  # the usual published values, as for the others
    how_to_get = ("on Debian/Ubuntu `apt-get install dataset-fashion-mnist`, or put the four IDX files "
                  f"(train-images-idx3-ubyte.gz, ...) in a folder and {_IN_DATA_DIR}")


class MNIST(FilesDataset):
    """``"mnist"``: MNIST's four IDX files."""

    name, input_shape = "mnist", (1, 28, 28)
    folders = ("mnist",)
    normalisation = ((0.1307,), (0.3081,))
    how_to_get = f"put the four MNIST IDX files in a folder (e.g. $WIRELESSFL_DATA/mnist) and {_IN_DATA_DIR}"


class CIFAR10(FilesDataset):
    """``"cifar10"``: CIFAR-10's python batches (a folder or the tarball)."""

    name, input_shape = "cifar10", (3, 32, 32)
    folders = ("cifar10", "cifar-10")
    files = CifarBatches()
    normalisation = ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))
    how_to_get = ("download cifar-10-python.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html into a "
                  f"data directory (extracting it is optional) and {_IN_DATA_DIR}")


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
