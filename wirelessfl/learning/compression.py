"""Compressed updates: what a device puts on the air instead of its 32-bit update, and what the server
decodes from it (``learning.compression``; docs/compression.md).

A compressor fits :class:`Compressor`: ``bits(d)`` is the exact length in bits of one encoded vector
of d entries (the upload's size on the air: every built-in uses a fixed-width code, so it does not
depend on the values), ``encode(vector, rng)`` writes the bits (a uint8 array of 0/1, one per bit)
and ``decode(bits, d)`` reads them back. The server applies exactly what the bits say: the
update it aggregates is ``decode(encode(v))``, and a test holds every built-in's output length to
``bits(d)``. With ``error_feedback`` a device keeps what its encoding dropped, e = (v + e) - decoded,
and adds it to its next update (Stich et al., NeurIPS 2018; Karimireddy et al., ICML 2019); the
memory is per-device state, checkpointed with the run.

Built-ins (``COMPRESSORS``, besides installed plugins in the entry-point group
``wirelessfl.compressors`` and import paths ``"module:Class"``):

- ``none``: the 32-bit floats, 32 d bits.
- ``float16``: half-precision floats, 16 d bits.
- ``topk``: the k entries of largest magnitude, each a ceil(log2 d)-bit index and a 32-bit value;
  with error feedback by default.
- ``randk``: k entries drawn uniformly without replacement, scaled by d / k (unbiased), each a
  32-bit value, plus the 64-bit seed that lets the server draw the same indices.
- ``qsgd``: Alistarh et al. (NeurIPS 2017) with s levels: the 32-bit norm, then per entry a sign bit
  and a level in 0..s in ceil(log2(s + 1)) bits, rounded up or down at random so that the decoded
  vector is unbiased, with variance at most min(d / s^2, sqrt(d) / s) ||v||^2.
- ``sign``: the 32-bit scale ||v||_1 / d and one sign bit per entry; with error feedback by default.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Protocol

import numpy as np

from ..fields import ConfigError, NoOptions, option
from ..plugins import Registry

__all__ = ["COMPRESSORS", "Compressor", "Float16", "NoCompression", "QSGD", "RandK", "ScaledSign", "TopK", "Uplink",
           "bits_of_floats", "floats_of_bits", "sends_floats", "upload_bits"]


def bits_of_floats(values: np.ndarray, dtype=np.float32) -> np.ndarray:
    """The bits (0/1, most significant first) of ``values`` stored as ``dtype``, in order."""
    big_endian = np.dtype(dtype).newbyteorder(">")
    return np.unpackbits(np.ascontiguousarray(np.asarray(values, dtype=big_endian)).view(np.uint8))


def floats_of_bits(bits: np.ndarray, count: int, dtype=np.float32) -> np.ndarray:
    """The ``count`` values of ``dtype`` that ``bits_of_floats`` wrote, as float64."""
    big_endian = np.dtype(dtype).newbyteorder(">")
    return np.packbits(bits[:count * big_endian.itemsize * 8]).view(big_endian).astype(np.float64)


def bits_of_ints(values: np.ndarray, width: int) -> np.ndarray:
    """Each of ``values`` (non-negative integers) in ``width`` bits, most significant first."""
    values = np.asarray(values, dtype=np.int64)
    if width <= 8:  # one byte each: numpy unpacks them at once
        return np.unpackbits(values.astype(np.uint8)).reshape(-1, 8)[:, 8 - width:].reshape(-1)
    shifts = np.arange(width - 1, -1, -1, dtype=np.int64)
    return ((values[:, None] >> shifts) & 1).astype(np.uint8).reshape(-1)


def ints_of_bits(bits: np.ndarray, count: int, width: int) -> np.ndarray:
    """The ``count`` integers of ``width`` bits that ``bits_of_ints`` wrote."""
    rows = bits[:count * width].reshape(count, width)
    if width <= 8:
        padded = np.zeros((count, 8), dtype=np.uint8)
        padded[:, 8 - width:] = rows
        return np.packbits(padded.reshape(-1)).astype(np.int64)
    weights = np.int64(1) << np.arange(width - 1, -1, -1, dtype=np.int64)
    return rows.astype(np.int64) @ weights


def index_width(d: int) -> int:
    """Bits of an index into d entries (0 for a single entry)."""
    return max(int(d) - 1, 0).bit_length()


class Compressor(Protocol):
    """A compressor. Required: ``bits``, ``encode`` and ``decode``; subclass to inherit the rest."""

    Options: ClassVar[type | None] = None
    """A dataclass of the compressor's own options, or None (options handed over as a dict)."""
    error_feedback: bool = False
    """True: each device adds what its last encoding dropped to its next update."""

    @classmethod
    def from_scenario(cls, scenario, options) -> "Compressor":
        """Build it with its options (default: ``cls()``)."""
        return cls()

    @classmethod
    def check(cls, scenario, options) -> None:
        """Raise ConfigError if the scenario cannot run with it. Default: it needs the updates one by
        one, so an uplink that delivers only their sum (over the air) is refused."""
        if scenario.facts.over_the_air:
            raise ConfigError(f"learning.compression = {scenario.learning.compression!r}: link.access = "
                              f"{scenario.link.access!r} sends analog sums over the air, not encoded bits; use "
                              "learning.compression = 'none' or another access scheme")

    def bits(self, d: int) -> int:
        """The length in bits of one encoded vector of ``d`` entries."""
        ...

    def encode(self, vector: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The bits (uint8, 0 or 1) of ``vector`` (float64, (d,)), exactly ``bits(d)`` of them."""
        ...

    def decode(self, bits: np.ndarray, d: int) -> np.ndarray:
        """The vector (float64, (d,)) that ``bits`` encode."""
        ...


class NoCompression(Compressor):
    """``"none"``: the 32-bit floats (and over the air, the analog values: nothing is encoded)."""

    Options = NoOptions

    @classmethod
    def check(cls, scenario, options) -> None:
        """Any scenario: nothing is encoded."""

    def bits(self, d: int) -> int:
        return 32 * int(d)

    def encode(self, vector, rng):
        return bits_of_floats(vector)

    def decode(self, bits, d):
        return floats_of_bits(bits, d)


class Float16(Compressor):
    """``"float16"``: half-precision floats (entries beyond its range become infinite)."""

    Options = NoOptions

    def bits(self, d: int) -> int:
        return 16 * int(d)

    def encode(self, vector, rng):
        with np.errstate(over="ignore"):
            return bits_of_floats(vector, np.float16)

    def decode(self, bits, d):
        return floats_of_bits(bits, d, np.float16)


class _WithOptions(Compressor):
    """A compressor built from its Options (``error_feedback`` among them, where it has one)."""

    def __init__(self, options=None):
        self.options = self.Options() if options is None else options
        self.error_feedback = bool(getattr(self.options, "error_feedback", False))

    @classmethod
    def from_scenario(cls, scenario, options) -> "_WithOptions":
        return cls(options)


@dataclass(frozen=True)
class SparseOptions:
    """How many entries a sparse update keeps."""

    fraction: float = option(0.01, gt=0, le=1, doc="the share of the d entries kept (k = max(1, round(fraction d)))")
    k: int | None = option(None, ge=1, doc="the number of entries kept (instead of fraction)")


def _kept(options: SparseOptions, d: int) -> int:
    return min(int(d), options.k if options.k is not None else max(1, round(options.fraction * d)))


@dataclass(frozen=True)
class TopKOptions(SparseOptions):
    """Options of top-k."""

    error_feedback: bool = option(True, doc="keep what was dropped and add it to the next update")


class TopK(_WithOptions):
    """``"topk"``: the k entries of largest magnitude (ties: the lower index), ceil(log2 d)-bit
    indices and 32-bit values."""

    Options = TopKOptions

    def bits(self, d: int) -> int:
        return _kept(self.options, d) * (index_width(d) + 32)

    def encode(self, vector, rng):
        d = vector.size
        k = _kept(self.options, d)
        magnitude = np.abs(np.asarray(vector, dtype=np.float32))
        kth = np.partition(magnitude, d - k)[d - k]  # the k-th largest magnitude: O(d), no sort
        above = np.flatnonzero(magnitude > kth)
        index = np.union1d(above, np.flatnonzero(magnitude == kth)[:k - above.size])
        return np.concatenate([bits_of_ints(index, index_width(d)), bits_of_floats(vector[index])])

    def decode(self, bits, d):
        k, width = _kept(self.options, d), index_width(d)
        out = np.zeros(d)
        out[ints_of_bits(bits, k, width)] = floats_of_bits(bits[k * width:], k)
        return out


@dataclass(frozen=True)
class RandKOptions(SparseOptions):
    """Options of rand-k."""

    error_feedback: bool = option(False, doc="keep what was dropped and add it to the next update")


class RandK(_WithOptions):
    """``"randk"``: k entries drawn uniformly without replacement, scaled by d / k; the indices are
    drawn again by the server from the 64-bit seed that precedes the values."""

    Options = RandKOptions

    def bits(self, d: int) -> int:
        return 64 + 32 * _kept(self.options, d)

    def _index(self, seed: int, d: int) -> np.ndarray:
        return np.sort(np.random.default_rng(seed).choice(d, size=_kept(self.options, d), replace=False))

    def encode(self, vector, rng):
        d = vector.size
        seed = int(rng.integers(0, 2 ** 63))
        index = self._index(seed, d)
        values = np.asarray(vector, dtype=np.float64)[index] * (d / index.size)
        return np.concatenate([bits_of_ints(np.array([seed]), 64), bits_of_floats(values)])

    def decode(self, bits, d):
        seed = int(ints_of_bits(bits, 1, 64)[0])
        index = self._index(seed, d)
        out = np.zeros(d)
        out[index] = floats_of_bits(bits[64:], index.size)
        return out


@dataclass(frozen=True)
class QSGDOptions:
    """Options of QSGD."""

    levels: int = option(16, ge=1, le=2 ** 20, doc="s: the quantisation levels of |v_i| / ||v||")


class QSGD(_WithOptions):
    """``"qsgd"``: ||v|| sign(v_i) xi_i / s with xi_i = floor(s |v_i| / ||v||) or that + 1, the latter
    with probability s |v_i| / ||v|| - floor(.) (unbiased); a 32-bit norm, then a sign bit and a
    ceil(log2(s + 1))-bit level per entry."""

    Options = QSGDOptions

    def bits(self, d: int) -> int:
        return 32 + int(d) * (1 + self.options.levels.bit_length())

    def encode(self, vector, rng):
        v = np.asarray(vector, dtype=np.float64)
        norm = float(np.float32(np.linalg.norm(v)))  # the norm as it goes on the air
        scaled = self.options.levels * np.abs(v) / norm if norm > 0 else np.zeros(v.size)
        low = np.floor(scaled)
        level = np.minimum(low + (rng.random(v.size) < scaled - low), self.options.levels).astype(np.int64)
        return np.concatenate([bits_of_floats(np.array([norm])), (v < 0).astype(np.uint8),
                               bits_of_ints(level, self.options.levels.bit_length())])

    def decode(self, bits, d):
        norm = floats_of_bits(bits, 1)[0]
        negative = bits[32:32 + d].astype(bool)
        level = ints_of_bits(bits[32 + d:], d, self.options.levels.bit_length())
        return np.where(negative, -1.0, 1.0) * norm * level / self.options.levels


@dataclass(frozen=True)
class SignOptions:
    """Options of scaled sign."""

    error_feedback: bool = option(True, doc="keep what was dropped and add it to the next update")


class ScaledSign(_WithOptions):
    """``"sign"``: (||v||_1 / d) sign(v_i) (a zero entry sends +), a 32-bit scale and a bit per entry
    (Karimireddy et al., ICML 2019, with error feedback)."""

    Options = SignOptions

    def bits(self, d: int) -> int:
        return 32 + int(d)

    def encode(self, vector, rng):
        v = np.asarray(vector, dtype=np.float64)
        scale = np.abs(v).sum() / max(v.size, 1)
        return np.concatenate([bits_of_floats(np.array([scale])), (v < 0).astype(np.uint8)])

    def decode(self, bits, d):
        return np.where(bits[32:32 + d].astype(bool), -1.0, 1.0) * floats_of_bits(bits, 1)[0]


def sends_floats(compressor: Compressor) -> bool:
    """Whether ``compressor`` is ``none``: the update goes as it is (nothing to encode)."""
    return type(compressor) is NoCompression


def upload_bits(compressor: Compressor, model_bits: int) -> int:
    """One model-sized vector's bits on the air: ``model_bits`` as it is without compression, else the
    compressor's for d = ceil(model_bits / 32) entries."""
    return int(model_bits) if sends_floats(compressor) else int(compressor.bits(math.ceil(model_bits / 32)))


class Uplink:
    """The devices' side of compression: each device's vector encoded and decoded (what the server
    receives), with its error-feedback memory (per-device state ``compression_memory_<vector>``)
    and its own random stream, keyed by (round or work key, device, vector) so that the draws do not
    depend on which devices are computed together."""

    def __init__(self, compressor: Compressor, root_seed: int, device_state: Callable[[str], Any]):
        self.compressor, self.root_seed, self.device_state = compressor, int(root_seed), device_state
        self.overflowed: tuple[int, int] | None = None  # the first (device, round) whose finite update decoded to inf

    def send(self, devices, vectors, round_idx: int, vector: int = 0):
        """The decoded rows of ``vectors`` (a (k, d) tensor), one per device of ``devices``."""
        import torch

        from ..rng import stream

        c, d = self.compressor, int(vectors.shape[1])
        memory = self.device_state(f"compression_memory_{vector}") if c.error_feedback else None
        rows = vectors.detach().cpu().numpy().astype(np.float64)
        out = np.empty_like(rows)
        for j, n in enumerate(int(n) for n in devices):  # one at a time: a device listed twice uses its new memory
            v = rows[j] + memory[n].cpu().numpy() if memory is not None else rows[j]
            if not np.isfinite(v).all():  # a diverged update: no code can carry it; the server gets it as it
                out[j] = v                # is, and the learner's divergence check says where it began
                continue
            bits = c.encode(v, stream(self.root_seed, "compression", int(round_idx), n, vector))
            check_length(c, bits, d)
            out[j] = c.decode(bits, d)
            if not np.isfinite(out[j]).all():  # beyond the code's range (float16 past 65504): where the learner looks
                self.overflowed = self.overflowed or (n, int(round_idx))
            elif memory is not None:  # an encoding that overflowed leaves the memory as it was
                memory[n] = torch.from_numpy(v - out[j])
        return torch.as_tensor(out, dtype=torch.float32, device=vectors.device)


def check_length(compressor: Compressor, bits: np.ndarray, d: int) -> None:
    """A compressor's output must be as long as it says: the airtime was computed from ``bits(d)``."""
    if bits.size != compressor.bits(d):
        raise ValueError(f"learning.compression: {type(compressor).__name__}.encode wrote {bits.size} bits for "
                         f"{d} entries, and its bits({d}) says {compressor.bits(d)}")


COMPRESSORS = Registry("compression", "wirelessfl.learning.compression:Compressor", {
    "none": "wirelessfl.learning.compression:NoCompression",
    "float16": "wirelessfl.learning.compression:Float16",
    "topk": "wirelessfl.learning.compression:TopK",
    "randk": "wirelessfl.learning.compression:RandK",
    "qsgd": "wirelessfl.learning.compression:QSGD",
    "sign": "wirelessfl.learning.compression:ScaledSign",
})
"""Built-in compressors by the name ``learning.compression`` gives them."""
