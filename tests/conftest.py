import os

import pytest

# Tests never reach a hub: everything they load is a local file.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# the fused bias kernels run their default variant: no per-machine timing inside the tests (tests/test_tuning.py
# turns it on where it is tested)
os.environ.setdefault("EXTRAPOLATE_KERNEL_TUNING", "off")


# How a test tool compares a tensor or an array is that tool's choice and has changed between its releases
# (pytest 9.2's `approx` iterates its argument, so a 0-d tensor raises). Tests compare Python numbers
# (`.item()`, `.tolist()`, `float()`; NumPy scalars are numbers) or use `torch.testing.assert_close` /
# `numpy.testing`; this guard makes `pytest.approx` refuse tensors and arrays, on either side of the
# comparison, under every pytest version.
def _refuse_arrays(value, side: str) -> None:
    if type(value).__module__.startswith("torch") or type(value).__name__ == "ndarray":
        raise TypeError(
            f"pytest.approx got a {type(value).__module__}.{type(value).__name__} as its {side}: "
            "compare Python numbers (.item(), .tolist()) or use torch.testing.assert_close"
        )
    if isinstance(value, (list, tuple)):
        for item in value:
            _refuse_arrays(item, side)
    elif isinstance(value, dict):
        for item in value.values():
            _refuse_arrays(item, side)


class _PlainApprox:
    """`pytest.approx` for Python numbers, lists and dicts of them only."""

    def __init__(self, inner):
        self.inner = inner

    def __eq__(self, actual):
        _refuse_arrays(actual, "compared value")
        return self.inner == actual

    def __ne__(self, actual):
        return not self == actual

    __hash__ = None
    __array_ufunc__ = None  # numpy hands the whole array to __eq__ instead of comparing element by element
    __array_priority__ = 100

    def __repr__(self):
        return repr(self.inner)


_approx = pytest.approx


def _plain_approx(expected, *args, **kwargs):
    _refuse_arrays(expected, "expected value")
    return _PlainApprox(_approx(expected, *args, **kwargs))


pytest.approx = _plain_approx
