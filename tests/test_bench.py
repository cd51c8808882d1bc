"""The benchmark's pieces measure what they say: FLOP accounting, and both implementations timed side by side."""

import math

import pytest

from extrapolate import bench


def test_train_flops_follow_the_palm_accounting():
    config = bench.model_config("tiny", "rope", 128)
    d, ff, layers, vocab = config.d_model, config.ff_dim, config.n_layers, config.vocab_size
    assert config.kv_heads == config.n_heads and config.mlp == "swiglu" and config.norm == "rmsnorm"
    per_layer = 4 * d * d + 3 * d * ff + 2 * d  # q, k, v, o; gate, up, down; two norm weights
    weights = layers * per_layer + d + vocab * d  # final norm, output head (the embedding is not counted)
    assert bench.train_flops_per_token(config, 128) == 6 * weights + 12 * layers * 128 * d


def test_paired_speed_rows_time_both_implementations_in_one_process():
    pytest.importorskip("transformers")
    pairs = [("extrapolate", "rope"), ("transformers", "rope"), ("extrapolate", "alibi")]
    rows = bench._paired_worker(("tiny", 256, "cpu", "float32", 1, pairs))
    assert [(r["implementation"], r["encoding"]) for r in rows] == pairs
    assert rows[2]["kernel"] == "fused-bias"
    assert all(r["what"] == "eval-paired" and r["tokens_per_second"] > 0 and math.isnan(r["peak_memory_mb"]) for r in rows)
