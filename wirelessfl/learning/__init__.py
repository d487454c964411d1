"""Learning: datasets, partitioners, models, the batched training core and the algorithm seam.

This package knows nothing about time, SimPy or the channel (see DESIGN.md).
"""
from wirelessfl.learning.algorithms import AGGREGATIONS, Algorithm, FedAvg, Safari
from wirelessfl.learning.datasets import (
    DATASET_NAMES,
    Dataset,
    DatasetNotFoundError,
    SyntheticFederated,
    load_dataset,
    read_idx,
    synthetic_federated,
)
from wirelessfl.learning.fedshuffle import FEDSHUFFLE_METHODS, FedShuffleGen, make_fedshuffle_method
from wirelessfl.learning.models import MODEL_NAMES, build_model, init_parameters, num_parameters
from wirelessfl.learning.partition import (
    PARTITION_SCHEMES,
    partition,
    perfedavg_group_counts,
    perfedavg_test_unit,
    split_by_class_counts,
)
from wirelessfl.learning.perfedavg import PERFEDAVG_VARIANTS, PerFedAvg
from wirelessfl.learning.trainer import LocalDirection, Trainer

__all__ = [
    "AGGREGATIONS",
    "Algorithm",
    "DATASET_NAMES",
    "Dataset",
    "DatasetNotFoundError",
    "FEDSHUFFLE_METHODS",
    "FedAvg",
    "FedShuffleGen",
    "LocalDirection",
    "Safari",
    "MODEL_NAMES",
    "PARTITION_SCHEMES",
    "PERFEDAVG_VARIANTS",
    "PerFedAvg",
    "SyntheticFederated",
    "Trainer",
    "build_model",
    "init_parameters",
    "load_dataset",
    "make_fedshuffle_method",
    "num_parameters",
    "partition",
    "perfedavg_group_counts",
    "perfedavg_test_unit",
    "read_idx",
    "split_by_class_counts",
    "synthetic_federated",
]
