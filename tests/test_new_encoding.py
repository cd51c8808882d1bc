"""A new encoding is one class and one registry entry: a bias encoding defined here, registered for the test
only, goes through training, evaluation (in the fused bias kernel), the results table and the report with no
file of the package touched."""

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.encodings import ENCODINGS, EncodingSpec, PositionalEncoding
from extrapolate.encodings.base import SaturatingBias
from extrapolate.kernels.attention import causal_attention

from .helpers import make_corpus, tiny_options

CAP = 8  # the toy bias stops growing this many tokens back


class CappedLinear(PositionalEncoding):
    """-m_h·min(d, CAP): ALiBi's penalty, saturating at CAP tokens, so the fused kernel's saturating form holds."""

    name, kind, has_bias = "capped", "bias", True

    def __init__(self, n_heads: int):
        super().__init__()
        self.register_buffer("slopes", torch.linspace(0.5, 0.05, n_heads), persistent=False)

    def bias_table(self, n, device=None):
        distance = torch.arange(n, dtype=torch.float32, device=device or self.slopes.device).clamp(max=CAP)  # (n,)
        return -self.slopes.to(distance.device)[:, None] * distance[None, :]  # (H, n)

    def fused_form(self):
        return SaturatingBias(CAP)


SPEC = EncodingSpec(
    "capped",
    "bias",
    "ALiBi capped at 8 tokens (test only)",
    lambda shape: CappedLinear(shape.n_heads),
    colour="#123456",
)


@pytest.fixture()
def registered(monkeypatch, tmp_path):
    monkeypatch.setitem(ENCODINGS._items, SPEC.name, SPEC)  # removed again after the test
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))


def test_toy_bias_runs_in_the_fused_kernel_exactly():
    torch.manual_seed(0)
    encoding = CappedLinear(4)
    q, k, v = torch.randn(3, 1, 4, 300, 16).unbind(0)  # (B, H, T, Dh) each
    with torch.no_grad():
        fused = causal_attention(q, k, v, encoding, "fused-bias")
        reference = causal_attention(q, k, v, encoding, "reference")
    assert torch.allclose(fused, reference, atol=1e-5)


def test_toy_bias_goes_through_train_evaluate_report(registered, tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    out = tmp_path / "out"
    args = [
        "run",
        "--tasks",
        "perplexity",
        "--encoding",
        "capped",
        *tiny_options(),
        "--corpus",
        str(corpus),
        "--out",
        str(out),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "results.csv")
    ppl = table[table.metric == "ppl"]
    assert set(table.encoding) == {"capped"} and set(table.base_encoding) == {"capped"}
    assert sorted(ppl.eval_len) == [32, 64, 128] and (ppl.status == "ok").all() and (ppl.value > 1).all()
    assert set(ppl.kernel) == {"fused-bias"}  # its saturating form put it on the fused kernel
    models = list((tmp_path / "cache" / "models").iterdir())
    assert [m.name.split("-L")[0] for m in models] == ["capped"]  # trained as its own model

    assert CliRunner().invoke(app, ["report", str(out)]).exit_code == 0
    assert "capped" in (out / "report.md").read_text()
    from extrapolate.report.plots import colour

    assert colour("capped") == "#123456" and "capped" in ENCODINGS.names()
    listing = CliRunner().invoke(app, ["encodings"])
    assert "capped" in listing.output
