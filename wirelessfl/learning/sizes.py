"""Parameter counts of the built-in models on each dataset, without building them (no torch): what
a timing-only run uploads (32 bits a parameter) and what memory guards assume. A test checks every
entry against the models themselves."""
from __future__ import annotations

__all__ = ["PARAMETERS", "parameter_count"]

PARAMETERS: dict[tuple[str, str], int] = {
    ("paper_cnn", "fashion_mnist"): 430698, ("paper_cnn", "mnist"): 430698, ("paper_cnn", "cifar10"): 555178,
    ("small_cnn", "fashion_mnist"): 28938, ("small_cnn", "mnist"): 28938, ("small_cnn", "cifar10"): 34538,
    ("mlp", "fashion_mnist"): 199210, ("mlp", "mnist"): 199210, ("mlp", "cifar10"): 656810,
    ("mlp", "synthetic"): 54410,
    ("logreg", "fashion_mnist"): 7850, ("logreg", "mnist"): 7850, ("logreg", "cifar10"): 30730,
    ("logreg", "synthetic"): 610,
    ("mlp_80_60", "fashion_mnist"): 68270, ("mlp_80_60", "mnist"): 68270, ("mlp_80_60", "cifar10"): 251310,
    ("mlp_80_60", "synthetic"): 10350,
    ("lenet", "fashion_mnist"): 44426, ("lenet", "mnist"): 44426, ("lenet", "cifar10"): 62006,
}
"""(model, dataset) -> number of parameters (10 classes)."""


def parameter_count(model: str, dataset: str) -> int:
    """The number of parameters of ``model`` on ``dataset`` (KeyError for a pair that does not exist)."""
    return PARAMETERS[(model, dataset)]
