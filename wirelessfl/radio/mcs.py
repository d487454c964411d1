"""Modulation and coding schemes and transport block sizes of NR (3GPP TS 38.214) and LTE
(3GPP TS 36.213): what one slot of so many resource blocks carries at a given MCS.

- NR PUSCH MCS tables: TS 38.214 Table 5.1.3.1-1 (``qam64``, MCS 0..28) and Table 5.1.3.1-2
  (``qam256``, MCS 0..27); each entry is (modulation order Q_m, target code rate R x 1024).
- NR transport block size: TS 38.214 Sec. 5.1.3.2 (:func:`nr_tbs`), with the resource elements of a
  resource block in a slot N'_RE = 12 x 14 x (1 - overhead), at most 156.
- LTE PUSCH: TS 36.213 Table 8.6.1-1 (MCS -> Q_m, I_TBS) and Table 7.1.7.2.1-1 (the TBS of I_TBS
  and N_PRB), in :mod:`wirelessfl.radio.lte_tables`.
"""
from __future__ import annotations

import math
from bisect import bisect_left

import numpy as np

__all__ = ["NR_MCS_TABLES", "NR_TBS_SMALL", "McsTable", "nr_tbs"]

_QAM64 = ((2, 120), (2, 157), (2, 193), (2, 251), (2, 308), (2, 379), (2, 449), (2, 526), (2, 602), (2, 679),
          (4, 340), (4, 378), (4, 434), (4, 490), (4, 553), (4, 616), (4, 658),
          (6, 438), (6, 466), (6, 517), (6, 567), (6, 616), (6, 666), (6, 719), (6, 772), (6, 822), (6, 873),
          (6, 910), (6, 948))
"""TS 38.214 Table 5.1.3.1-1, MCS 0..28 (29..31 are reserved for retransmissions)."""

_QAM256 = ((2, 120), (2, 193), (2, 308), (2, 449), (2, 602),
           (4, 378), (4, 434), (4, 490), (4, 553), (4, 616), (4, 658),
           (6, 466), (6, 517), (6, 567), (6, 616), (6, 666), (6, 719), (6, 772), (6, 822), (6, 873),
           (8, 682.5), (8, 711), (8, 754), (8, 797), (8, 841), (8, 885), (8, 916.5), (8, 948))
"""TS 38.214 Table 5.1.3.1-2, MCS 0..27 (28..31 are reserved for retransmissions)."""

NR_TBS_SMALL = (24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128, 136, 144, 152, 160, 168, 176, 184,
                192, 208, 224, 240, 256, 272, 288, 304, 320, 336, 352, 368, 384, 408, 432, 456, 480, 504, 528,
                552, 576, 608, 640, 672, 704, 736, 768, 808, 848, 888, 928, 984, 1032, 1064, 1128, 1160, 1192,
                1224, 1256, 1288, 1320, 1352, 1416, 1480, 1544, 1608, 1672, 1736, 1800, 1864, 1928, 2024, 2088,
                2152, 2216, 2280, 2408, 2472, 2536, 2600, 2664, 2728, 2792, 2856, 2976, 3104, 3240, 3368, 3496,
                3624, 3752, 3824)
"""TS 38.214 Table 5.1.3.2-1: the transport block sizes for N_info <= 3824."""


class McsTable:
    """An MCS table: each MCS's modulation order ``qm`` (bits per symbol) and code rate ``rate``
    (information bits per coded bit); ``efficiency`` = qm x rate bits per resource element."""

    def __init__(self, name: str, entries):
        self.name = name
        self.qm = np.array([q for q, _ in entries], dtype=np.int64)
        self.rate = np.array([r / 1024.0 for _, r in entries])
        self.efficiency = self.qm * self.rate

    def __len__(self) -> int:
        return self.qm.size


NR_MCS_TABLES = {"qam64": McsTable("qam64", _QAM64), "qam256": McsTable("qam256", _QAM256)}
"""The NR PUSCH MCS tables by the name ``mcs_table`` gives them."""


def nr_tbs(n_prb: int, qm: int, rate: float, re_per_prb: int, layers: int = 1) -> int:
    """The transport block size in bits of TS 38.214 Sec. 5.1.3.2 for ``n_prb`` resource blocks of
    ``re_per_prb`` data resource elements each (N'_RE, capped at 156), modulation order ``qm``
    and code rate ``rate`` (0 for no resource blocks)."""
    n_re = min(156, int(re_per_prb)) * int(n_prb)
    n_info = n_re * rate * qm * layers
    if n_info <= 0:
        return 0
    if n_info <= 3824:
        n = max(3, math.floor(math.log2(n_info)) - 6)
        n_info_q = max(24, 2 ** n * math.floor(n_info / 2 ** n))
        return NR_TBS_SMALL[bisect_left(NR_TBS_SMALL, n_info_q)]
    n = math.floor(math.log2(n_info - 24)) - 5
    n_info_q = max(3840, 2 ** n * math.floor((n_info - 24) / 2 ** n + 0.5))  # round half up
    if rate <= 0.25:
        c = math.ceil((n_info_q + 24) / 3816)
    elif n_info_q > 8424:
        c = math.ceil((n_info_q + 24) / 8424)
    else:
        c = 1
    return 8 * c * math.ceil((n_info_q + 24) / (8 * c)) - 24
