"""The fused bias kernels' variants, chosen once per machine by timing (kernels/tuning.py): every variant equals
the reference kernel, the fastest is kept, and the choice is remembered in the cache folder."""

import json

import pytest
import torch

from extrapolate.encodings import build_encoding
from extrapolate.kernels import tuning
from extrapolate.kernels.attention import causal_attention, fused_bias_attention, fused_variant, fused_variants


def make(name: str, dim: int = 32):
    torch.manual_seed(0)
    encoding = build_encoding(name, d_model=4 * dim, n_heads=4, head_dim=dim, max_len=64)
    for p in encoding.parameters():  # T5's table starts at zero: a wrong lookup would pass unseen
        torch.nn.init.normal_(p, std=0.5)
    return encoding


@pytest.mark.parametrize("dim", [16, 32, 64])
@pytest.mark.parametrize("name", ["alibi", "t5"])
def test_every_variant_equals_the_reference(name, dim):
    encoding = make(name, dim)
    q = torch.randn(1, 4, 300, dim)
    k, v = torch.randn(2, 1, 2, 400, dim).unbind(0)  # grouped-query, 100 cached keys before the queries
    variants = fused_variants(encoding, dim)
    assert len(set(variants.values())) == len(variants) >= 3
    with torch.no_grad():  # the fused kernels evaluate
        want = causal_attention(q, k, v, encoding, "reference")
        for rows, extra in variants.values():
            # small rows so a 300-query call crosses several blocks, as the chosen rows do at 16k
            got = fused_bias_attention(q, k, v, encoding, rows // 16, extra)
            torch.testing.assert_close(got, want, atol=5e-5, rtol=0)


def test_alibi_widths_are_the_default_then_multiples_of_16_and_32():
    widths = {extra + 32 for _, extra in fused_variants(make("alibi"), 32).values()}
    assert widths == {40, 48, 64}
    assert next(iter(fused_variants(make("alibi"), 32).values())) == (1024, 8)  # the default comes first


@pytest.fixture
def tuned(monkeypatch, tmp_path):
    monkeypatch.setenv("EXTRAPOLATE_KERNEL_TUNING", "on")
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path))
    monkeypatch.setattr(tuning, "_CHOSEN", {})
    return tmp_path


def test_the_fastest_variant_is_chosen_and_remembered_on_disk(tuned, monkeypatch):
    timed = []

    def fake_best_of(run, repeats=3):  # the variant named last is the fastest
        timed.append(run)
        return 1.0 / len(timed)

    monkeypatch.setattr(tuning, "best_of", fake_best_of)
    encoding = make("alibi")
    q = torch.randn(1, 4, 2048, 32)
    chosen = fused_variant(q, q, encoding)
    assert chosen == list(fused_variants(encoding, 32).values())[-1] and len(timed) == 6
    stored = json.loads((tuned / tuning.CHOICES_FILE).read_text())
    (key,) = stored
    assert "fused-bias|alibi float32 h4 d32" in key and tuning.machine_key() in key
    # another process on the machine reads the file and times nothing
    monkeypatch.setattr(tuning, "_CHOSEN", {})
    assert fused_variant(q, q, encoding) == chosen and len(timed) == 6


def test_small_calls_and_tuning_off_run_the_default_untimed(tuned, monkeypatch):
    monkeypatch.setattr(tuning, "best_of", lambda run, repeats=3: pytest.fail("timed"))
    encoding = make("t5")
    small = torch.randn(1, 4, 512, 32)
    assert fused_variant(small, small, encoding) == (256, 0)
    monkeypatch.setenv("EXTRAPOLATE_KERNEL_TUNING", "off")
    large = torch.randn(1, 4, 4096, 32)
    assert fused_variant(large, large, encoding) == (256, 0)
    assert not (tuned / tuning.CHOICES_FILE).exists()


def test_an_unwritable_cache_keeps_the_choice_in_the_process(tuned, monkeypatch):
    monkeypatch.setattr(tuning, "best_of", lambda run, repeats=3: 1.0)
    monkeypatch.setattr(tuning, "_path", lambda: tuned / "file-not-a-folder" / tuning.CHOICES_FILE)
    (tuned / "file-not-a-folder").write_text("")
    chosen = tuning.choose("k", "p", {"a": lambda: None, "b": lambda: None}, "a")
    assert chosen == "a" and tuning.choose("k", "p", {"a": None, "b": None}, "b") == "a"


def test_bench_names_the_variants_this_machine_chose(tuned, monkeypatch):
    from extrapolate.bench.job import variant_lines

    assert variant_lines() == []
    monkeypatch.setattr(tuning, "best_of", lambda run, repeats=3: 1.0)
    tuning.choose("fused-bias", "alibi float32 h4 d32", {"rows 1024, head 40": None, "rows 2048, head 40": None}, "x")
    assert variant_lines() == [
        "- kernel variants timed on this machine: fused-bias alibi float32 h4 d32: rows 1024, head 40"
    ]
