"""The bf16 linear path for CPUs without native bf16: bf16 arithmetic (rounded inputs, float32 sums, one rounding
of the output), computed with float32 kernels, engaged only where a bf16 GEMM would run on such a CPU."""

import pytest
import torch
import torch.nn.functional as F

import extrapolate.kernels.linear as linear
from extrapolate.core.device import autocast
from extrapolate.kernels.linear import Linear, bf16_linear_in_float32

CPU = torch.device("cpu")


@pytest.fixture
def slow_cpu(monkeypatch):
    monkeypatch.setattr(linear, "cpu_has_fast_bf16", lambda: False)


def test_matches_the_native_bf16_kernel_within_one_rounding():
    torch.manual_seed(0)
    x, w, b = torch.randn(64, 96), torch.randn(40, 96), torch.randn(40)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        native = F.linear(x, w, b)  # (64, 40) bf16, whichever kernel this CPU has
    ours = bf16_linear_in_float32(x, w, b)
    assert ours.dtype == native.dtype == torch.bfloat16
    # both sum exact products in float32 and round once: they differ by at most one bf16 step (2^-7 relative)
    step = 2.0**-7 * native.float().abs().clamp_min(1e-3)
    assert ((ours.float() - native.float()).abs() <= step).all()


def test_exact_where_the_float32_sums_are_exact():
    # small integers are exact in bf16, and so are their products and sums in float32: the result is the exact
    # product, rounded to bf16 once (sums up to 2^8 are exact in bf16 too)
    gen = torch.Generator().manual_seed(1)
    x = torch.randint(-3, 4, (8, 16), generator=gen).float()
    w = torch.randint(-3, 4, (5, 16), generator=gen).float()
    exact = (x.double() @ w.double().T).to(torch.bfloat16)
    assert torch.equal(bf16_linear_in_float32(x, w), exact)


def test_inputs_are_rounded_to_bf16_first():
    # a = 1 + 2^-8 - 2^-12 rounds to 1 in bf16. 255 of them and 1.875 sum to 256.875 after rounding, which rounds
    # to 256 (bf16 steps by 2 between 256 and 512); unrounded they sum to 257.81, which would round to 258
    x = torch.full((1, 256), 1 + 2.0**-8 - 2.0**-12)
    x[0, -1] = 1.875
    w = torch.ones(1, 256)
    assert F.linear(x, w).to(torch.bfloat16).item() == 258.0
    assert bf16_linear_in_float32(x, w).item() == 256.0
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert F.linear(x, w).item() == 256.0


def test_layer_takes_the_float32_kernels_only_for_bf16_on_a_slow_cpu(monkeypatch):
    torch.manual_seed(2)
    layer, x = Linear(24, 12, bias=True), torch.randn(3, 7, 24)
    calls = []
    monkeypatch.setattr(linear, "bf16_linear_in_float32", lambda *a: calls.append(a) or torch.zeros(3, 7, 12))
    monkeypatch.setattr(linear, "cpu_has_fast_bf16", lambda: True)
    with autocast(CPU, "bfloat16"):
        layer(x)
    assert torch.equal(layer(x), F.linear(x, layer.weight, layer.bias))  # float32: nn.Linear's own path
    assert not calls
    monkeypatch.setattr(linear, "cpu_has_fast_bf16", lambda: False)
    layer(x)  # float32 on a slow CPU: still nn.Linear's path
    assert not calls
    with autocast(CPU, "bfloat16"):
        layer(x)
    layer.to(torch.bfloat16)(x.to(torch.bfloat16))  # a model cast to bf16, no autocast
    assert len(calls) == 2


def test_gradients_flow_through_the_float32_kernels(slow_cpu):
    torch.manual_seed(3)
    layer, x = Linear(32, 16), torch.randn(4, 32, requires_grad=True)
    with autocast(CPU, "bfloat16"):
        out = layer(x)
    assert out.dtype == torch.bfloat16
    out.float().square().sum().backward()
    with torch.no_grad():
        y = F.linear(
            x.to(torch.bfloat16).float(), layer.weight.to(torch.bfloat16).float(), layer.bias.to(torch.bfloat16).float()
        )
    expected = 2 * y.to(torch.bfloat16).float()  # d(sum y^2)/dy
    assert torch.allclose(layer.bias.grad, expected.sum(0), rtol=1e-2, atol=1e-2)
    assert torch.allclose(x.grad, expected @ layer.weight.to(torch.bfloat16).float(), rtol=1e-2, atol=1e-2)
