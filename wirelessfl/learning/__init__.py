"""Learning: datasets, partitioners, models, the batched training core and the algorithm seam.

This package knows nothing about time, SimPy or the channel (see DESIGN.md).
"""
from wirelessfl.learning.algorithms import Algorithm, FedAvg, Safari, SelectedMean
from wirelessfl.learning.datasets import (
    DATASET_NAMES,
    Dataset,
    DatasetNotFoundError,
    SyntheticFederated,
    load_dataset,
    read_idx,
    synthetic_federated,
)
from wirelessfl.learning.models import MODEL_NAMES, build_model, init_parameters, num_parameters
from wirelessfl.learning.partition import PARTITION_SCHEMES, partition
from wirelessfl.learning.trainer import Trainer

__all__ = [
    "Algorithm",
    "DATASET_NAMES",
    "Dataset",
    "DatasetNotFoundError",
    "FedAvg",
    "Safari",
    "SelectedMean",
    "MODEL_NAMES",
    "PARTITION_SCHEMES",
    "SyntheticFederated",
    "Trainer",
    "build_model",
    "init_parameters",
    "load_dataset",
    "num_parameters",
    "partition",
    "read_idx",
    "synthetic_federated",
]
