"""The MLP's size as the docs, headers and recipes state it: 784-200-200-10 on Fashion-MNIST is
784*200+200 + 200*200+200 + 200*10+10 = 199,210 parameters, and every sentence of the repository that
gives an MLP's parameter count gives that one (or that of another MLP it names)."""
from __future__ import annotations

import re
from pathlib import Path

from wirelessfl.learning.compression import COMPRESSORS
from wirelessfl.learning.models import mlp

ROOT = Path(__file__).resolve().parents[1]
BY_HAND = 784 * 200 + 200 + 200 * 200 + 200 + 200 * 10 + 10
OTHER_MLPS = {"68,270", "251,310", "4,996"}  # mlp_80_60 on (1, 28, 28) and (3, 32, 32); own_data's TabularMLP
COUNT = r"(\d{1,3}(?:,\d{3})+) (?:parameters|entries)"
CLAIMS = (re.compile(r"\bMLP\b[^.\n]{0,40}?" + COUNT), re.compile(COUNT + r" of the [\w -]{0,30}\bMLP\b"),
          re.compile(r"\bMLP's " + COUNT))


def test_the_mlp_has_199210_parameters_on_fashion_mnist():
    assert BY_HAND == 199_210
    assert mlp.parameter_count((1, 28, 28), 10) == BY_HAND


def test_every_stated_mlp_size_is_the_mlps():
    files = [p for pattern in ("*.md", "docs/**/*.md", "figures/*.md", "wirelessfl/**/*.toml", "wirelessfl/**/*.py",
                               "benchmarks/*.py", "examples/**/*.toml", "examples/**/*.py")
             for p in ROOT.glob(pattern)]
    claims = [(p.relative_to(ROOT), m.group(1)) for p in files for line in p.read_text(encoding="utf-8").splitlines()
              for rx in CLAIMS for m in rx.finditer(line)]
    assert len(claims) >= 5
    wrong = [(str(path), n) for path, n in claims if n != f"{BY_HAND:,}" and n not in OTHER_MLPS]
    assert not wrong


def test_the_energy_recipes_share_of_the_bits_is_at_the_mlps_size():
    from wirelessfl.papers.energy import bits_share

    topk = COMPRESSORS.load("topk")()
    assert bits_share("topk") == topk.bits(BY_HAND) / (32 * BY_HAND)
