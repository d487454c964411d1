"""The LTE uplink tables (wirelessfl.radio.lte_tables) against values of 3GPP TS 36.213 / 36.306."""
from __future__ import annotations

import numpy as np
import pytest

from wirelessfl.radio.lte_tables import (N_ITBS, N_PRB_MAX, TBS_TABLE, TBS_TABLE_NS3, UL_MCS_ITBS, UL_MCS_QM,
                                         tbs_bits)


def test_shapes():
    assert TBS_TABLE.shape == TBS_TABLE_NS3.shape == (N_ITBS, N_PRB_MAX) == (27, 110)
    assert UL_MCS_QM.shape == UL_MCS_ITBS.shape == (29,)
    assert TBS_TABLE.dtype.kind == "i" and TBS_TABLE.min() > 0
    # every transport block size is a whole number of bytes
    assert np.all(TBS_TABLE % 8 == 0)


@pytest.mark.parametrize("i_tbs, n_prb, bits", [
    (0, 1, 16),        # TS 36.213 Table 7.1.7.2.1-1: the smallest block
    (26, 100, 75376),  # the largest one-layer block; TS 36.306 Table 4.1-2, category 5 uplink maximum
    (26, 110, 75376),
    (21, 100, 51024),  # TS 36.306 Table 4.1-2: maximum UL-SCH bits in a TTI, categories 3 and 4
    (26, 6, 4392),     # one-layer peaks per channel bandwidth: 1.4 MHz (6 PRB)
    (26, 15, 11064),   # 3 MHz
    (26, 25, 18336),   # 5 MHz
    (26, 50, 36696),   # 10 MHz
    (26, 75, 55056),   # 15 MHz
    (6, 1, 328),       # the standard's out-of-sequence entry (kept verbatim)
])
def test_tbs_entries(i_tbs, n_prb, bits):
    assert TBS_TABLE[i_tbs, n_prb - 1] == bits


def test_ns3_table_differs_only_at_itbs6_nprb1():
    diff = np.argwhere(TBS_TABLE != TBS_TABLE_NS3)
    assert diff.tolist() == [[6, 0]]
    assert TBS_TABLE_NS3[6, 0] == 88
    assert tbs_bits(6, 1) == 328 and tbs_bits(6, 1, ns3=True) == 88


def test_monotone_in_both_indices():
    # more resource blocks never carry fewer bits, a higher TBS index never fewer bits
    assert np.all(np.diff(TBS_TABLE_NS3, axis=0) >= 0) and np.all(np.diff(TBS_TABLE_NS3, axis=1) >= 0)
    # the standard's one exception: 328 at I_TBS 6, N_PRB 1 exceeds 104 (I_TBS 7) and 176 (N_PRB 2)
    assert np.argwhere(np.diff(TBS_TABLE, axis=0) < 0).tolist() == [[6, 0]]
    assert np.argwhere(np.diff(TBS_TABLE, axis=1) < 0).tolist() == [[6, 0]]
    assert np.all(np.diff(UL_MCS_ITBS) >= 0) and np.all(np.diff(UL_MCS_QM) >= 0)
    ns3_tbs = tbs_bits(np.arange(29)[:, None], np.arange(1, 111)[None, :], ns3=True)
    assert np.all(np.diff(ns3_tbs, axis=0) >= 0) and np.all(np.diff(ns3_tbs, axis=1) >= 0)


def test_pusch_mcs_table():
    # TS 36.213 Table 8.6.1-1: QPSK 0..10 (I_TBS 0..10), 16-QAM 11..20 (10..19), 64-QAM 21..28 (19..26)
    assert UL_MCS_QM.tolist() == [2] * 11 + [4] * 10 + [6] * 8
    assert UL_MCS_ITBS.tolist() == list(range(11)) + list(range(10, 20)) + list(range(19, 27))
    assert (UL_MCS_ITBS[10], UL_MCS_QM[10]) == (10, 2) and (UL_MCS_ITBS[11], UL_MCS_QM[11]) == (10, 4)
    assert (UL_MCS_ITBS[20], UL_MCS_QM[20]) == (19, 4) and (UL_MCS_ITBS[21], UL_MCS_QM[21]) == (19, 6)
    assert (UL_MCS_ITBS[28], UL_MCS_QM[28]) == (26, 6)


def test_tbs_bits_lookup():
    assert tbs_bits(0, 1) == 16 and isinstance(tbs_bits(0, 1), int)
    assert tbs_bits(28, 100) == 75376
    assert tbs_bits(11, 25) == tbs_bits(10, 25) == TBS_TABLE[10, 24]  # MCS 10 and 11 share I_TBS 10
    row = tbs_bits(np.arange(29), 25)
    assert row.shape == (29,) and row[0] == 680 and row[-1] == 18336
    assert tbs_bits(5.0, 10) == tbs_bits(5, 10)
    for mcs, n_prb in ((29, 1), (-1, 1), (0, 0), (0, 111), (1.5, 1)):
        with pytest.raises(ValueError):
            tbs_bits(mcs, n_prb)
