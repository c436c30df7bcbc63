"""The GPU engine reads what validation proved (``DeviceCSR.facts``) before it scans, without a GPU: host arrays
stand in for device ones in a ``DeviceCSR`` (the questions read only the values and the facts).  The GPU tier
checks the same on a device (``tests/gpu/test_facts_gpu.py``)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from spies import Calls

import semiring
from semiring import validation
from semiring.kernels.cuda import launch, planner, strategies
from semiring.validation import Facts


def device(A: sp.csr_matrix, facts: Facts | None = None) -> launch.DeviceCSR:
    return launch.DeviceCSR(A.indptr, A.indices, A.data, A.shape, facts)


def test_the_margin_splits_sign_is_read_from_the_facts(monkeypatch):
    signs = Calls(planner.all_nonnegative)
    monkeypatch.setattr(planner, "all_nonnegative", signs)
    A = sp.random(6, 9, density=0.4, format="csr", random_state=1)
    known = Facts(finite=True, nonnegative=True)
    split = strategies.Product(device(A, known), device(A, known), semiring.plus_sqdiff, np.float64).margin_split
    assert split is not None and signs.count == 0
    assert strategies.Product(device(A), device(A), semiring.plus_sqdiff, np.float64).margin_split == split
    assert signs.count == 1  # no facts: one scan of both
    negative = device(-A, Facts(finite=True, nonnegative=False))
    assert strategies.Product(negative, device(A), semiring.plus_sqdiff, np.float64).margin_split is None
    assert signs.count == 1  # one side known to hold a negative value: the split's answer without a scan
    narrowed = strategies.Product(device(A, known), device(A, known), semiring.plus_sqdiff, np.float32)
    assert narrowed.margin_split == split and signs.count == 2  # values cast to float32: not what was proved


def test_the_finiteness_the_planner_asks_is_read_from_the_facts(monkeypatch):
    finite = Calls(planner.all_finite)
    monkeypatch.setattr(planner, "all_finite", finite)
    A = sp.random(6, 9, density=0.4, format="csr", random_state=2)
    known = Facts(finite=True)
    assert planner.facts(semiring.plus_times, device(A, known), device(A, known)).finite() is True
    assert finite.count == 0
    assert planner.facts(semiring.plus_times, device(A), device(A)).finite() is True
    assert finite.count == 2  # X's, then Y's (kept for the call where one is open: launch.derived)
    B = A.copy()
    B.data[0] = np.inf
    assert planner.facts(semiring.plus_times, device(B, Facts(finite=False)), device(A, known)).finite() is False
    assert finite.count == 2
    x32 = A.data.astype(np.float32)
    assert planner.facts(semiring.plus_times, device(A, known), device(A, known), x32, x32).finite() is True
    assert finite.count == 4  # float64 values read as float32: not what was proved, scanned


def test_a_row_slice_of_a_device_matrix_keeps_what_holds_of_every_part():
    A = sp.csr_matrix(np.array([[1.0, -2.0], [3.0, 0.0], [0.0, 4.0]]))
    Ad = device(A, Facts(finite=True, nonnegative=False))
    part = launch.row_slice(Ad, 1, 3)
    assert part.facts == Facts(finite=True, nonnegative=None)  # rows 1 and 2 hold no negative value
    assert launch.row_slice(device(A), 0, 2).facts is None
    assert validation.all_hold("nonnegative", planner.all_nonnegative, (part, part.data)) is True
