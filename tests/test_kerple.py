"""KERPLE log and power: bias values from the paper's formulas, the reference code's initial ranges, the
positive parametrisation, monotone decay with distance, and the blocked kernel against the full matrix."""

import pytest
import torch

from extrapolate.core.errors import UserError
from extrapolate.encodings.kerple import Kerple
from extrapolate.kernels.attention import causal_attention, kernel_for


def test_log_bias_values():
    encoding = Kerple(3, "log", r1=[1.0, 1.0, 0.5], r2=[1.0, 1.0, 0.25])
    table = encoding.bias_table(101)  # (H, n)
    # -r1·log(1 + r2·d) by hand: r1 = r2 = 1, d = 1 → -ln 2; d = 10 → -ln 11; r1 = 0.5, r2 = 0.25, d = 100 → -0.5·ln 26
    assert table[0, 1].item() == pytest.approx(-0.6931471805599453, rel=1e-6)
    assert table[1, 10].item() == pytest.approx(-2.3978952727983707, rel=1e-6)
    assert table[2, 100].item() == pytest.approx(-1.629048269010741, rel=1e-6)
    assert (table[:, 0] == 0).all()


def test_power_bias_values():
    encoding = Kerple(2, "power", r1=[0.5, 2.0], r2=[1.5, 0.5])
    table = encoding.bias_table(5)
    # -r1·d^r2 by hand: 0.5·4^1.5 = 4; 2·3^0.5 = 3.4641016
    assert table[0, 4].item() == pytest.approx(-4.0, rel=1e-6)
    assert table[1, 3].item() == pytest.approx(-3.4641016151377544, rel=1e-6)
    assert (table[:, 0] == 0).all()


@pytest.mark.parametrize("variant,tops", [("log", (2.0, 1.0)), ("power", (1.0, 2.0))])
def test_initial_values_follow_the_reference_ranges(variant, tops):
    # chijames/KERPLE: log bias_p (r1) = U(0,1)·2, bias_a (r2) = U(0,1)·1; power bias_a (r1) = U(0,1)·1,
    # bias_p (r2, the exponent) = U(0,1)·2; every value clamped to ≥ 0.01
    torch.manual_seed(0)
    r1, r2 = Kerple(512, variant).coefficients()
    for values, top in zip((r1, r2), tops):
        assert values.min() >= 0.01 - 1e-6 and values.max() <= top + 1e-5
        assert values.mean().item() == pytest.approx(top / 2, rel=0.1)


@pytest.mark.parametrize("variant", ["log", "power"])
def test_bias_is_monotone_in_distance_and_stays_positive_under_any_raw_value(variant):
    torch.manual_seed(1)
    encoding = Kerple(4, variant)
    with torch.no_grad():
        encoding.raw_r1.uniform_(-30, 30)
        encoding.raw_r2.uniform_(-30, 30)
    r1, r2 = encoding.coefficients()
    assert (r1 > 0).all() and (r2 > 0).all() and (variant == "log" or (r2 <= 2).all())
    table = encoding.bias_table(2000)
    assert (table.diff(dim=-1) <= 0).all()  # a farther key never gets a larger bias


def test_bad_coefficients_are_user_errors():
    with pytest.raises(UserError, match="r1 must be > 0"):
        Kerple(2, "log", r1=[1.0, -1.0], r2=[1.0, 1.0])
    with pytest.raises(UserError, match="at most 2"):
        Kerple(1, "power", r1=[1.0], r2=[2.5])


@pytest.mark.parametrize("variant", ["log", "power"])
def test_blocked_kernel_equals_the_reference(variant):
    torch.manual_seed(2)
    encoding = Kerple(4, variant)
    assert kernel_for(encoding).name == "blocked"  # neither linear nor saturating: no fused form
    q, k, v = torch.randn(3, 2, 4, 333, 16).unbind(0)
    with torch.no_grad():
        blocked = causal_attention(q, k, v, encoding, "blocked", block_elements=2 * 4 * 333 * 48)
        reference = causal_attention(q, k, v, encoding, "reference")
    assert torch.allclose(blocked, reference, atol=1e-5)


def test_power_gradients_are_finite_at_distance_zero():
    encoding = Kerple(2, "power")
    q, k, v = torch.randn(3, 1, 2, 40, 8).unbind(0)
    causal_attention(q, k, v, encoding, "blocked").sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in encoding.parameters())
