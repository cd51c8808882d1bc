"""The fused bias kernels' variants, chosen once per machine by timing (kernels/tuning.py): every variant equals
the reference kernel, the fastest is kept, and the choice is remembered in the cache folder."""

import json

import pytest
import torch

from extrapolate.encodings import build_encoding
from extrapolate.kernels import tuning
from extrapolate.kernels.attention import causal_attention
from extrapolate.kernels.fused_bias import fused_bias_attention, fused_variant, fused_variants


def make(name: str, dim: int = 32):
    torch.manual_seed(0)
    encoding = build_encoding(name, d_model=4 * dim, n_heads=4, head_dim=dim, max_len=64)
    for p in encoding.parameters():  # T5's table starts at zero: a wrong lookup would pass unseen
        torch.nn.init.normal_(p, std=0.5)
    return encoding


@pytest.mark.parametrize("dim", [16, 32, 64])
@pytest.mark.parametrize("name", ["alibi", "t5"])
@pytest.mark.parametrize("dtype,tolerance", [(torch.float32, 5e-5), (torch.bfloat16, 2e-2)])
def test_every_variant_equals_the_reference(name, dim, dtype, tolerance):
    """In bf16 too: the reference is the float32 attention of the same bf16 inputs, so only the kernel's own
    rounding counts (a bias rounded to bf16 moves a logit by up to m·rows/256 and fails this)."""
    encoding = make(name, dim)
    q = torch.randn(1, 4, 300, dim).to(dtype)
    k, v = torch.randn(2, 1, 2, 400, dim).to(dtype).unbind(0)  # grouped-query, 100 cached keys before the queries
    variants = fused_variants(encoding)
    assert len(set(variants.values())) == len(variants) >= 2
    with torch.no_grad():  # the fused kernels evaluate
        want = causal_attention(q.float(), k.float(), v.float(), encoding, "reference")
        for rows, skip in variants.values():
            # small rows so a 300-query call crosses several blocks, as the chosen rows do at 16k
            got = fused_bias_attention(q, k, v, encoding, rows // 16, skip)
            assert got.dtype == dtype
            torch.testing.assert_close(got.float(), want, atol=tolerance, rtol=0)


def test_bf16_alibi_keeps_its_bias_in_float32_far_into_a_block():
    """Rows 1500 past a block's start: the float32 key bias keeps the logits exact where a bias in bf16 would
    round j - q0 to a multiple of 8 (m = 1/4: two logits)."""
    encoding = make("alibi")
    q, k, v = torch.randn(3, 1, 4, 1600, 32).to(torch.bfloat16).unbind(0)
    with torch.no_grad():
        want = causal_attention(q.float(), k.float(), v.float(), encoding, "reference")
        got = fused_bias_attention(q, k, v, encoding, 2048)
    torch.testing.assert_close(got.float(), want, atol=2e-2, rtol=0)


def test_the_default_variants_come_first():
    assert list(fused_variants(make("alibi")).values()) == [(1024, False), (2048, False), (1024, True), (2048, True)]
    assert [rows for rows, _ in fused_variants(make("t5")).values()] == [256, 128, 64, 512]


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
    assert chosen == list(fused_variants(encoding).values())[-1] and len(timed) == 4
    stored = json.loads((tuned / tuning.CHOICES_FILE).read_text())
    (key,) = stored
    assert "fused-bias|alibi float32 h4 d32" in key and tuning.machine_key() in key
    # another process on the machine reads the file and times nothing
    monkeypatch.setattr(tuning, "_CHOSEN", {})
    assert fused_variant(q, q, encoding) == chosen and len(timed) == 4


def test_small_calls_and_tuning_off_run_the_default_untimed(tuned, monkeypatch):
    monkeypatch.setattr(tuning, "best_of", lambda run, repeats=3: pytest.fail("timed"))
    encoding = make("t5")
    small = torch.randn(1, 4, 512, 32)
    assert fused_variant(small, small, encoding) == (256, False)
    monkeypatch.setenv("EXTRAPOLATE_KERNEL_TUNING", "off")
    large = torch.randn(1, 4, 4096, 32)
    assert fused_variant(large, large, encoding) == (256, False)
    assert not (tuned / tuning.CHOICES_FILE).exists()


def test_a_choice_made_among_other_candidates_is_timed_again(tuned, monkeypatch):
    """A release that adds a variant times the kernel again: a choice kept from fewer candidates could never
    be the new one."""
    monkeypatch.setattr(tuning, "best_of", lambda run, repeats=3: {"a": 2.0, "b": 1.0, "c": 0.5}[run])
    assert tuning.choose("k", "p", {"a": "a", "b": "b"}, "a") == "b"
    monkeypatch.setattr(tuning, "_CHOSEN", {})  # another process, a later release
    assert tuning.choose("k", "p", {"a": "a", "b": "b", "c": "c"}, "a") == "c"
    assert tuning.choose("k", "p", {"a": "a", "b": "b"}, "a") == "b"  # each set of candidates keeps its own
    assert len(json.loads((tuned / tuning.CHOICES_FILE).read_text())) == 2


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
    tuning.choose("fused-bias", "alibi float32 h4 d32", {"rows 1024, key bias": None, "rows 2048, key bias": None}, "x")
    assert variant_lines() == [
        "- kernel variants timed on this machine: fused-bias alibi float32 h4 d32: rows 1024, key bias"
    ]


@pytest.mark.parametrize("buckets,max_distance", [(32, 128), (8, 16), (2, 4)])  # saturation 113, 12, 1
@pytest.mark.parametrize(
    "queries,keys",
    # no cache; a cache shorter and longer than S; one decoding query before, at and past S; fewer keys than S
    [(300, 300), (150, 160), (40, 1000), (1, 500), (1, 113), (1, 114), (5, 5), (3, 2000)],
)
def test_t5_far_keys_are_exact_wherever_the_queries_start(buckets, max_distance, queries, keys):
    """T5's keys at least S back run as causal calls with the queries shifted S positions: where the first
    query sits before S, at it or past it (a cache), the kernel is the reference, the band split into blocks
    of a row count that divides nothing evenly."""
    from extrapolate.encodings.bias import T5Bias

    torch.manual_seed(queries + keys)
    encoding = T5Bias(4, buckets, max_distance)
    torch.nn.init.normal_(encoding.table.weight)
    q = torch.randn(1, 4, queries, 16)
    k, v = torch.randn(2, 1, 2, keys, 16).unbind(0)
    with torch.no_grad():
        want = causal_attention(q, k, v, encoding, "reference")
        torch.testing.assert_close(fused_bias_attention(q, k, v, encoding, 7), want, atol=5e-5, rtol=0)


@pytest.mark.parametrize("queries,keys", [(300, 300), (250, 400), (129, 129)])
def test_t5_in_chunks_of_queries_is_the_reference(monkeypatch, queries, keys):
    """Long calls run T5's far keys a chunk of queries at a time, each chunk continuing the keys before it:
    chunks of 64 (a last one short or of one row) give the reference."""
    from extrapolate.kernels import fused_bias

    monkeypatch.setattr(fused_bias, "FAR_CHUNK", 64)
    encoding = make("t5", 16)
    q = torch.randn(1, 4, queries, 16)
    k, v = torch.randn(2, 1, 2, keys, 16).unbind(0)
    with torch.no_grad():
        want = causal_attention(q, k, v, encoding, "reference")
        torch.testing.assert_close(fused_bias_attention(q, k, v, encoding, 32), want, atol=5e-5, rtol=0)
