"""LongRoPE against its reference, transformers' `longrope` type (`_compute_longrope_parameters` and the
Llama forward): frequencies bit for bit, logits to 1e-4; hand-computed values for `encodings show`."""

import json
import math

import pytest
import torch
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.core.errors import UserError
from extrapolate.encodings import build_encoding
from extrapolate.encodings.frequencies import longrope, longrope_attention_factor, rope_inv_freq

runner = CliRunner()


def test_attention_factor_values():
    """√(1 + ln s / ln L): s = 8, L = 256 gives √(1 + 3/8); s = 4, L = 64 gives √(4/3); s ≤ 1 gives 1."""
    assert longrope_attention_factor(8.0, 256) == pytest.approx(math.sqrt(1.375), abs=1e-15)
    assert longrope_attention_factor(4.0, 64) == pytest.approx(math.sqrt(4 / 3), abs=1e-15)
    assert longrope_attention_factor(1.0, 64) == 1.0


def test_short_factors_up_to_L_long_beyond_and_the_factor_at_every_length():
    short, long = [1.0, 1.5, 2.0, 2.5], [1.0, 2.0, 3.0, 4.0]
    theta = rope_inv_freq(8, 10000.0)
    at_l, factor_l = longrope(8, 10000.0, 4.0, 64, 64, short_factor=short, long_factor=long)
    past_l, factor_past = longrope(8, 10000.0, 4.0, 64, 65, short_factor=short, long_factor=long)
    assert torch.allclose(at_l, theta / torch.tensor(short)) and torch.allclose(past_l, theta / torch.tensor(long))
    assert factor_l == factor_past == pytest.approx(math.sqrt(4 / 3))


def test_default_factors_are_one_and_yarns_ramp():
    """Without lists: short all 1 (plain RoPE frequencies up to L), long θ/θ'_yarn (1 for fast pairs, s for slow)."""
    from extrapolate.encodings.frequencies import yarn

    short, _ = longrope(64, 10000.0, 8.0, 256, 256)
    long, _ = longrope(64, 10000.0, 8.0, 256, 257)
    assert torch.equal(short, rope_inv_freq(64, 10000.0))
    assert torch.allclose(long, yarn(64, 10000.0, 8.0, 256, 256)[0], rtol=1e-6, atol=0)
    assert long[0].item() == 1.0 and long[-1].item() == pytest.approx(
        rope_inv_freq(64, 10000.0)[-1].item() / 8, rel=1e-6
    )


def show_longrope(*options: str) -> dict:
    """`encodings show longrope --json` for head size 8, s = 4 from L = 64, with `options`."""
    common = ["encodings", "show", "longrope", "--head-dim", "8", "--factor", "4", "--original-len", "64"]
    result = runner.invoke(app, [*common, *options, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_show_json_values():
    info = show_longrope("--short-factor", "1,1,1,1", "--long-factor", "1,2,3,4", "--seq-len", "100")
    assert info["ratio"] == pytest.approx([1, 1 / 2, 1 / 3, 1 / 4], rel=1e-6)
    assert info["attention_factor"] == pytest.approx(math.sqrt(4 / 3))
    short = show_longrope("--long-factor", "1,2,3,4", "--seq-len", "64")
    assert short["ratio"] == [1.0, 1.0, 1.0, 1.0]  # n ≤ L: the short factors (default all 1)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--head-dim", "8", "--short-factor", "1,2"], "short factors: need 4 (head_dim/2), got 2"),
        (["--head-dim", "8", "--long-factor", "1,2,3,4,5"], "long factors: need 4 (head_dim/2), got 5"),
        (["--head-dim", "8", "--long-factor", "1,0,1,1"], "long factors must be finite numbers > 0"),
        (["--long-factor", "1,two"], "--long-factor: 'two' is not a number"),
        (["--short-factor", "1,nan"], "--short-factor: 'nan' is not a finite number"),
    ],
)
def test_bad_factor_lists_are_one_line_exit_2(args, needle):
    result = runner.invoke(app, ["encodings", "show", "longrope", *args])
    assert result.exit_code == 2 and needle in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_wrong_length_fails_when_the_encoding_is_built():
    with pytest.raises(UserError, match="need 8"):
        build_encoding(
            "longrope", d_model=64, n_heads=4, head_dim=16, max_len=32, factor=2.0, options={"long_factor": [1.0] * 7}
        )


def test_frequencies_equal_transformers_bit_for_bit():
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from extrapolate.data.rope_config import hf_rope_parameters

    torch.manual_seed(0)
    options = {"short_factor": (1 + torch.rand(8)).tolist(), "long_factor": (1 + 7 * torch.rand(8)).tolist()}
    for opts in (options, {}):
        params = hf_rope_parameters("longrope", 500.0, 4.0, 32, opts, head_dim=16)
        config = transformers.LlamaConfig(
            hidden_size=64, num_attention_heads=4, head_dim=16, max_position_embeddings=32, rope_parameters=params
        )
        for seq_len in (None, 32, 33, 200):
            theirs, their_factor = ROPE_INIT_FUNCTIONS["longrope"](config, None, seq_len=seq_len)
            ours, our_factor = longrope(16, 500.0, 4.0, 32, seq_len or 1, **opts)
            assert torch.equal(ours, theirs) and our_factor == their_factor
