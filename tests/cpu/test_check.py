"""``--check``: the documented differences from SciPy honoured, what it skipped said truly, a sample above its
size limit (said so), and never "yes" for what it did not compare."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from semiring.cli import commands as cli


def _run(argv, capsys):
    status = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def _verdict(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("check against")).split(": ", 1)[1]


@pytest.fixture
def with_empty_rows(tmp_path):
    """Rows 0 and 3 all zero: jensenshannon is NaN there (documented; cdist's loop gives inf), dice 0 between
    two of them (documented; SciPy NaN)."""
    X = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 0.0], [0.5, 0.0, 3.0], [0.0, 0.0, 0.0], [2.0, 1.0, 1.0]])
    path = tmp_path / "e.npy"
    np.save(path, X)
    return path


@pytest.mark.parametrize("metric", ["jensenshannon", "dice"])
def test_check_honours_the_documented_differences(with_empty_rows, capsys, metric):
    status, out, err = _run(["pairwise", with_empty_rows, "-m", metric, "--check"], capsys)
    assert status == 0, out + err
    assert _verdict(out) == "yes"


def test_check_knn_honours_the_documented_differences(with_empty_rows, capsys):
    status, out, err = _run(["knn", with_empty_rows, "-k", 2, "-m", "jensenshannon", "--check"], capsys)
    assert status == 0, out + err
    assert _verdict(out).startswith("yes")


def test_above_the_limit_a_sample_is_checked_and_said(tmp_path, capsys, monkeypatch):
    """Above the densifying limit: a sample of rows and columns, never a bare 'yes' nor 'skipped'."""
    X = sp.random(300, 40, density=0.2, format="csr", random_state=2) + sp.eye(300, 40, format="csr")
    path = tmp_path / "x.npz"
    sp.save_npz(path, X.tocsr())
    monkeypatch.setattr(cli, "CHECK_MAX_ENTRIES", 40 * 100)
    status, out, err = _run(["pairwise", path, "-m", "cosine", "--check"], capsys)
    assert status == 0, out + err
    verdict = _verdict(out)
    assert verdict.startswith("yes (a sample: ") and "of 300 columns" in verdict
    status, out, err = _run(["knn", path, "-k", 3, "-m", "cosine", "--check"], capsys)
    assert status == 0, out + err
    assert _verdict(out).startswith("yes (a sample: ") and "of 300 rows" in _verdict(out)


def test_a_sampled_check_still_finds_a_wrong_result(tmp_path, capsys, monkeypatch):
    X = sp.random(200, 30, density=0.3, format="csr", random_state=5) + sp.eye(200, 30, format="csr")
    path = tmp_path / "x.npz"
    sp.save_npz(path, X.tocsr())
    monkeypatch.setattr(cli, "CHECK_MAX_ENTRIES", 30 * 80)
    real = cli.pairwise_distances
    monkeypatch.setattr(cli, "pairwise_distances", lambda *a, **k: real(*a, **k) * 1.01)
    status, out, _ = _run(["pairwise", path, "-m", "euclidean", "--check"], capsys)
    assert status == cli.EXIT_CHECK_FAILED and _verdict(out).startswith("NO (")


def test_nothing_compared_is_never_yes(tmp_path, capsys, monkeypatch):
    X = np.array([[1.0, 0.0], [843.5, 0.0]])  # SciPy: NaN off the diagonal (rounding below 0 under a root)
    path = tmp_path / "p.npy"
    np.save(path, X)
    monkeypatch.setattr(cli, "scipy_reference", lambda metric, params, A, B: np.full((A.shape[0], B.shape[0]), np.nan))
    status, out, _ = _run(["pairwise", path, "-m", "jensenshannon", "--check"], capsys)
    assert status == 0 and _verdict(out).startswith("nothing compared (")


def test_too_wide_rows_are_not_compared_and_said(tmp_path, capsys, monkeypatch):
    X = sp.random(10, 50, density=0.3, format="csr", random_state=1)
    path = tmp_path / "x.npz"
    sp.save_npz(path, X.tocsr())
    monkeypatch.setattr(cli, "CHECK_MAX_ENTRIES", 60)
    status, out, _ = _run(["pairwise", path, "--check"], capsys)
    assert status == 0 and _verdict(out) == "not compared (rows of 50 columns are too wide to densify for SciPy)"
