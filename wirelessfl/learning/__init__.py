"""Learning: datasets, partitioners, models, the batched training core and the algorithm seam.

This package knows nothing about time, SimPy or the channel (see README.md, "Layout", and
docs/extending.md, "When each method is called"). An algorithm fits
:class:`Algorithm`; ``ALGORITHMS`` names the built-ins that ``learning.algorithm`` accepts besides
installed plugins and import paths. ``MODELS`` (protocol ``models.Model``), ``DATASETS``
(``loaders.DatasetLoader``) and ``PARTITIONS`` (``partitioners.Partitioner``) do the same for
``learning.model``, ``learning.dataset`` and ``learning.partition``. Names are imported on first
use, so that reading a scenario does not import torch.
"""
from importlib import import_module

from ..plugins import Registry
# numpy only; imported here because the function shares its module's name
from .partition import partition, perfedavg_group_counts, perfedavg_test_unit, split_by_class_counts

ALGORITHMS = Registry("algorithm", "wirelessfl.learning:Algorithm", {
    "fedavg": "wirelessfl.learning.algorithms:FedAvg",
    "safari": "wirelessfl.learning.algorithms:Safari",
    "scaffold": "wirelessfl.learning.scaffold:Scaffold",
    "fedavg_rr": "wirelessfl.learning.fedshuffle:FedAvgRR",
    "fedavg_min": "wirelessfl.learning.fedshuffle:FedAvgMin",
    "fedavg_mean": "wirelessfl.learning.fedshuffle:FedAvgMean",
    "fednova": "wirelessfl.learning.fedshuffle:FedNova",
    "fedshuffle": "wirelessfl.learning.fedshuffle:FedShuffle",
    "fedshuffle_so": "wirelessfl.learning.fedshuffle:FedShuffleSO",
    "fedshuffle_mvr": "wirelessfl.learning.fedshuffle:FedShuffleMVR",
    "perfedavg_fo": "wirelessfl.learning.perfedavg:PerFedAvgFO",
    "perfedavg_hf": "wirelessfl.learning.perfedavg:PerFedAvgHF",
    "perfedavg_exact": "wirelessfl.learning.perfedavg:PerFedAvgExact",
}, adapter="wirelessfl.learning.flower:adapt_strategy")
"""Built-in algorithms by the name ``learning.algorithm`` gives them."""

MODELS = Registry("model", "wirelessfl.learning.models:Model", {
    name: f"wirelessfl.learning.models:{name}"
    for name in ("paper_cnn", "small_cnn", "mlp", "logreg", "mlp_80_60", "lenet")
})
"""Built-in models by the name ``learning.model`` gives them (functions of wirelessfl.learning.models)."""

DATASETS = Registry("dataset", "wirelessfl.learning.loaders:DatasetLoader", {
    "fashion_mnist": "wirelessfl.learning.loaders:FashionMNIST",
    "mnist": "wirelessfl.learning.loaders:MNIST",
    "cifar10": "wirelessfl.learning.loaders:CIFAR10",
    "synthetic": "wirelessfl.learning.loaders:Synthetic",
})
"""Built-in datasets by the name ``learning.dataset`` gives them."""

PARTITIONS = Registry("partition", "wirelessfl.learning.partitioners:Partitioner", {
    "dirichlet_per_device": "wirelessfl.learning.partitioners:DirichletPerDevice",
    "label_dirichlet": "wirelessfl.learning.partitioners:LabelDirichlet",
    "iid": "wirelessfl.learning.partitioners:IID",
    "perfedavg_groups": "wirelessfl.learning.partitioners:PerFedAvgGroups",
    "perfedavg_groups_single": "wirelessfl.learning.partitioners:PerFedAvgGroupsSingle",
    "classes_per_device": "wirelessfl.learning.partitioners:ClassesPerDevice",
})
"""Built-in partitions by the name ``learning.partition`` gives them."""
PARTITION_SCHEMES = tuple(PARTITIONS.builtins)


class TrainingDiverged(RuntimeError):
    """The global model stopped being finite (e.g. a learning rate far too large)."""


class DatasetError(ValueError):
    """A dataset's files are there but are not what they should be (damaged, incomplete, refused)."""

_EXPORTS = {
    "algorithms": ("AGGREGATIONS", "Algorithm", "FedAvg", "Safari", "ServerRound"),
    "loaders": ("DatasetLoader", "DeviceSplit", "FilesDataset"),
    "file_formats": ("CifarBatches", "FileFormat", "IdxFiles"),
    "partitioners": ("Partitioner",),
    "datasets": ("DATASET_NAMES", "Dataset", "DatasetNotFoundError", "SyntheticFederated", "load_dataset",
                 "read_idx", "synthetic_federated"),
    "fedshuffle": ("FEDSHUFFLE_METHODS", "FedShuffleGen", "make_fedshuffle_method"),
    "models": ("MODEL_NAMES", "Model", "build_model", "count_parameters", "init_parameters", "num_parameters"),
    "perfedavg": ("PERFEDAVG_VARIANTS", "PerFedAvg"),
    "scaffold": ("Scaffold",),
    "trainer": ("LocalDirection", "Trainer"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = ["ALGORITHMS", "DATASETS", "DatasetError", "MODELS", "PARTITIONS", "PARTITION_SCHEMES", "TrainingDiverged", "partition", "perfedavg_group_counts", "perfedavg_test_unit",
           "split_by_class_counts", *sorted(_WHERE)]


def __getattr__(name):
    if name in _WHERE:
        return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
