"""The test suite's own conventions: tensors and arrays are never compared through a test tool's generic
comparison (its handling of them changes between releases; tests/conftest.py enforces it)."""

import numpy as np
import pytest
import torch


@pytest.mark.parametrize(
    "compare",
    [
        lambda: torch.tensor(1.0) == pytest.approx(1.0),
        lambda: 1.0 == pytest.approx(torch.tensor(1.0)),
        lambda: [torch.tensor(1.0)] == pytest.approx([1.0]),
        lambda: np.array([1.0, 2.0]) == pytest.approx([1.0, 2.0]),
        lambda: {"a": 1.0} == pytest.approx({"a": np.array(1.0)}),
    ],
    ids=["tensor-actual", "tensor-expected", "tensor-in-list", "array-actual", "array-in-dict"],
)
def test_approx_refuses_tensors_and_arrays(compare):
    with pytest.raises(TypeError, match="compare Python numbers"):
        compare()


def test_approx_still_compares_numbers():
    assert np.float64(1.0 + 1e-9) == pytest.approx(1.0)
    assert [1.0, 2.0] == pytest.approx([1, 2]) and {"a": 1.0} == pytest.approx({"a": 1})
    assert 1.5 != pytest.approx(1.0)
