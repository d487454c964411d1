"""A user's own parts for wirelessfl: a dataset read from a CSV file, a model and a partition.

scenario.toml names them by import path ("my_parts:PumpFaults", ...); this folder is searched first.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from torch import nn

from wirelessfl.config import ConfigError, FilePath, option
from wirelessfl.learning import Dataset, DatasetLoader, Partitioner


@dataclass(frozen=True)
class PumpFaultsOptions:
    csv: FilePath = option(doc="the table make_data.py writes (relative to the scenario's folder)")
    test_fraction: float = option(0.2, gt=0, lt=1, doc="the last rows, kept for testing")


class PumpFaults(DatasetLoader):
    """Pump-hours with their fault (4 classes): features standardised with the training rows' statistics."""

    Options = PumpFaultsOptions
    num_classes = 4

    def __init__(self, options: PumpFaultsOptions):
        self.options = options

    @classmethod
    def from_scenario(cls, scenario, options):
        return cls(options)

    @classmethod
    def shape(cls, scenario, options):  # from the header alone: timing-only runs do not read the rows
        with open(options.csv, encoding="utf-8") as f:
            return (len(f.readline().split(",")) - 1,), cls.num_classes

    @classmethod
    def check(cls, scenario, options):
        if not Path(options.csv).is_file():
            raise ConfigError(f"learning.dataset_options.csv = {options.csv!r}: no such file (run make_data.py)")

    def load(self) -> Dataset:
        table = np.loadtxt(self.options.csv, delimiter=",", skiprows=1)
        x, y = table[:, :-1], table[:, -1].astype(np.int64)
        cut = int(len(y) * (1 - self.options.test_fraction))
        mean, std = x[:cut].mean(axis=0), x[:cut].std(axis=0)
        x = (x - mean) / std
        return Dataset.from_arrays("pump_faults", x[:cut], y[:cut], x[cut:], y[cut:], self.num_classes)


@dataclass(frozen=True)
class TabularMLPOptions:
    hidden: int = option(64, ge=1, doc="units of each of the two hidden layers")


class TabularMLP(nn.Sequential):
    """Two hidden ReLU layers; built as TabularMLP(input_shape, num_classes, hidden=...)."""

    Options = TabularMLPOptions

    def __init__(self, input_shape, num_classes, hidden=64):
        super().__init__(nn.Linear(input_shape[0], hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, num_classes))


@dataclass(frozen=True)
class ShardsOptions:
    shards_per_device: int = option(2, ge=1, doc="label-sorted shards each device gets")


class Shards(Partitioner):
    """FedAvg's pathological non-iid split: the rows sorted by label, cut into equal shards, dealt at random."""

    Options = ShardsOptions

    def __init__(self, shards_per_device: int):
        self.shards_per_device = shards_per_device

    @classmethod
    def from_scenario(cls, scenario, options):
        return cls(options.shards_per_device)

    def split(self, labels, num_devices, rng, *, num_classes):
        order = np.argsort(labels, kind="stable")
        shards = np.array_split(order, num_devices * self.shards_per_device)
        dealt = rng.permutation(len(shards)).reshape(num_devices, self.shards_per_device)
        return [np.sort(np.concatenate([shards[s] for s in row])) for row in dealt]
