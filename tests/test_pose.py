"""PoSE: a fine-tune for L' that reads rows of L, their position ids skipping once. The rows are pinned against a
port of the authors' `train_preprocess_function_pose` (dwzhu-pku/PoSE at 43b43b3, src/train_pose.py), driven by
the same draws; the model reading skipped ids against transformers' Llama given the same `position_ids`."""

import random

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.core.config import ModelConfig, TrainConfig
from extrapolate.data import pose
from extrapolate.data.batches import Batch, BatchSource
from extrapolate.encodings import encoding_for
from extrapolate.model import TransformerLM
from extrapolate.training.train import make_optimizer, training_step

from .helpers import make_corpus, tiny_options, transformers_llama

runner = CliRunner()


class Scripted(random.Random):
    """Python's random whose randint returns the given integers in turn (checking each is in its range)."""

    def __init__(self, values):
        super().__init__()
        self.values = list(values)

    def randint(self, low, high):
        value = self.values.pop(0)
        assert low <= value <= high, (low, value, high)
        return value


def authors_rows(documents, scaled_max, model_max, rng):
    """The authors' preprocessing of tokenized documents (each already cut at 5 windows), `random` as `rng`."""
    input_ids, position_ids = [], []
    for ids in documents:
        len_chunk = min(len(ids), model_max)
        len_input = len(ids)
        lt1 = 0
        rt1 = rng.randint(1, (len_chunk + 1) // 2)
        rt2 = rng.randint(lt1 + len_chunk, len_input)
        lt2 = rt2 - (len_chunk - (rt1 - lt1))
        chunked_ids = ids[lt1:rt1] + ids[lt2:rt2]
        input_ids.append(chunked_ids)
        pos_ids = torch.arange(len(chunked_ids), dtype=torch.long)
        lt = 0
        rt = rng.randint(lt, scaled_max - len(pos_ids))
        pos_ids[: rt1 - lt1] += lt
        pos_ids[rt1 - lt1 :] += rt
        position_ids.append(pos_ids)
    return input_ids, position_ids


def draws(n, span, ids, count, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [pose.draw_skip(generator, n, span, ids) for _ in range(count)]


def agrees_with_authors(tokens=pose.skipped_tokens, ids=pose.skipped_ids, n=33, target=129) -> bool:
    """Rows of n tokens, ids below `target`, from spans of 5n tokens: ours against the authors' on the same draws."""
    span = pose.SPAN_WINDOWS * n
    skips = draws(n, span, target, 200)
    documents = [list(range(1000 * i, 1000 * i + span)) for i in range(len(skips))]
    scripted = Scripted(v for s in skips for v in (s.first, s.end, s.shift))
    their_ids, their_positions = authors_rows(documents, target, n, scripted)
    for document, skip, their_row, their_pos in zip(documents, skips, their_ids, their_positions):
        row = tokens(torch.tensor(document), n, skip)
        if row.tolist() != their_row or not torch.equal(ids(n, skip), their_pos):
            return False
    return True


def test_rows_and_ids_are_the_authors_on_the_same_draws():
    assert agrees_with_authors()
    assert agrees_with_authors(n=8, target=9)  # no room to skip: the ids are 0 … n-1, the chunks still cut
    assert agrees_with_authors(n=2, target=1000)


def test_a_mutated_cut_or_skip_fails_the_port():
    def skip_from_the_second(n, skip):  # the skip starting one token late
        ids = torch.arange(n)
        ids[skip.first + 1 :] += skip.shift
        return ids

    def second_chunk_from_the_end(span, n, skip):  # the second chunk taken at `end` instead of ending there
        return torch.cat([span[: skip.first], span[skip.end : skip.end + n - skip.first]])

    assert not agrees_with_authors(ids=skip_from_the_second)
    assert not agrees_with_authors(tokens=second_chunk_from_the_end)


def test_the_draws_reach_both_ends_of_the_authors_ranges():
    n, span, ids = 9, 45, 40
    skips = draws(n, span, ids, 3000)
    assert {s.first for s in skips} == set(range(1, (n + 1) // 2 + 1))
    assert {s.end for s in skips} == set(range(n, span + 1))
    assert {s.shift for s in skips} == set(range(0, ids - n + 1))


def test_a_pose_batch_is_two_chunks_of_the_stream_with_ids_below_l_prime():
    L, target = 16, 64
    stream = torch.arange(10_000)  # a token is its place in the stream
    source = BatchSource(stream, L, 64, seed=3, skip_to=target)
    batch = source.batch(5)
    assert batch.inputs.shape == batch.positions.shape == (64, L)
    again = source.batch(5)
    assert torch.equal(batch.inputs, again.inputs) and torch.equal(batch.positions, again.positions)
    rows = torch.cat([batch.inputs, batch.targets[:, -1:]], dim=1)  # (B, L + 1): the row's tokens
    for row, ids in zip(rows, batch.positions):
        steps = row.diff()
        jumps = (steps != 1).nonzero().flatten()
        assert len(jumps) <= 1  # one cut at most: the first chunk, then the second
        cut = int(jumps[0]) + 1 if len(jumps) else None
        if cut is not None:
            assert 1 <= cut <= (L + 2) // 2 and 0 < int(steps[cut - 1]) <= pose.SPAN_WINDOWS * (L + 1)
        gaps = ids.diff()
        assert (gaps >= 1).all() and int(ids[0]) == 0 and int(ids[-1]) <= target - 1
    assert int(batch.positions.max()) > 2 * L  # the ids do reach past L
    # and exactly to L' − 1 (the last input's id at the largest skip), never past it, over a few steps
    assert max(int(source.batch(step).positions.max()) for step in range(8)) == target - 1
    assert not torch.equal(BatchSource(stream, L, 64, seed=3).batch(5).inputs, batch.inputs)
    assert BatchSource(stream, L, 64, seed=3).batch(5).positions is None


@pytest.fixture()
def rope_model():
    config = ModelConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, encoding="rope", max_len=16)
    torch.manual_seed(0)
    model = TransformerLM(config).eval()
    for p in model.parameters():  # larger than the default init, so positions matter in the logits
        torch.nn.init.normal_(p, std=0.3)
    return model


def test_a_model_reading_skipped_ids_is_transformers_llama_given_them(rope_model):
    pytest.importorskip("transformers")
    from extrapolate.data.rope_config import hf_rope_parameters

    model, factor, L = rope_model, 4.0, 16
    model.set_encoding(encoding_for(model.config, "yarn", factor=factor, original_len=L))
    c = model.config
    rope = hf_rope_parameters("yarn", c.rope_base, factor, L, {}, head_dim=c.head_dim)
    theirs = transformers_llama(model, rope, int(L * factor))
    skip = pose.Skip(first=5, end=40, shift=37)
    ids = pose.skipped_ids(L, skip)  # 0 … 4, then 42 … 52: below L' = 64
    tokens = torch.randint(0, 64, (1, L))
    with torch.no_grad():
        ours = model(tokens, positions=ids)
        expected = theirs(tokens, position_ids=ids[None]).logits
        contiguous = model(tokens)
    assert expected.abs().max() > 1
    assert torch.allclose(ours, expected, atol=1e-4, rtol=0)
    assert not torch.allclose(contiguous[:, skip.first :], expected[:, skip.first :], atol=1e-2)


def test_rotary_angles_are_not_reused_for_other_ids_from_the_same_start(rope_model):
    rope = encoding_for(rope_model.config, "rope")
    q = torch.randn(1, 4, 6, 8)
    skipped = torch.tensor([0, 1, 2, 10, 11, 12])
    contiguous = torch.arange(6)
    first, _ = rope.rotate(q, q[:, :2], contiguous)
    second, _ = rope.rotate(q, q[:, :2], skipped)  # same first id, same count
    fresh, _ = encoding_for(rope_model.config, "rope").rotate(q, q[:, :2], skipped)
    assert torch.equal(second, fresh) and not torch.allclose(first, second)


def test_a_step_on_rows_with_their_own_contiguous_ids_is_the_plain_step(rope_model):
    config = TrainConfig(model=rope_model.config, seq_len=16, batch_size=4, lr=1e-3, dtype="float32")
    inputs = torch.randint(0, 64, (4, 16))
    targets = torch.randint(0, 64, (4, 16))
    mask = torch.ones(4, 16)
    after = []
    for positions in (None, torch.arange(16).expand(4, 16)):
        model = TransformerLM(rope_model.config)
        model.load_state_dict(rope_model.state_dict())
        model.train()
        optimizer = make_optimizer(model, config)
        loss = training_step(model, optimizer, config, Batch(inputs, targets, mask, positions), torch.device("cpu"))
        after.append((float(loss), model.state_dict()))
    assert abs(after[0][0] - after[1][0]) < 1e-5
    for name, value in after[0][1].items():
        assert torch.allclose(value, after[1][1][name], atol=1e-5), name


@pytest.fixture()
def cache(monkeypatch, tmp_path):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))


def test_a_pose_fine_tune_reads_rows_of_l_and_records_them(cache, tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    out = tmp_path / "out"
    args = ["run", "--encoding", "yarn", "--factor", "4", *tiny_options(), "--corpus", str(corpus), "--out", str(out)]
    pose_steps = ["--finetune-steps", "3", "--finetune-positions", "pose"]
    result = runner.invoke(app, [*args, "--tasks", "perplexity", *pose_steps])
    assert result.exit_code == 0, result.output
    rows = pd.read_csv(out / "results.csv")
    L = int(rows.train_len.iloc[0])
    assert set(rows.finetune_positions) == {"pose"} and set(rows.finetune_len) == {4 * L}
    assert "yarn+pose+ft3" in (out / "summary.md").read_text()
    (folder,) = (tmp_path / "cache" / "models").glob("yarn-*ft*")
    import json

    lineage = json.loads((folder / "finetune.json").read_text())
    assert lineage["pose_len"] == 4 * L and lineage["phase"]["seq_len"] == L


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--encoding", "yarn", "--factor", "4"], "give --finetune-steps"),
        (["--encoding", "dynamic-ntk", "--factor", "4", "--finetune-steps", "3"], "not dynamic-ntk"),
        (["--encoding", "alibi", "--finetune-steps", "3"], "not alibi"),
        (["--encoding", "yarn", "--factor", "4", "--finetune-steps", "3", "--finetune-positions", "skip"], "skip"),
    ],
)
def test_pose_where_it_cannot_apply_is_one_line(extra, said, cache):
    positions = [] if "--finetune-positions" in extra else ["--finetune-positions", "pose"]
    result = runner.invoke(app, ["run", *tiny_options(), *extra, *positions])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], result.output


def test_the_encodings_listing_names_pose_beside_the_encodings():
    result = runner.invoke(app, ["encodings"])
    assert result.exit_code == 0
    assert "--finetune-positions pose" in result.stderr and "pose" not in result.stdout.split()
    listed = runner.invoke(app, ["encodings", "--json"])
    import json

    assert all(row["name"] != "pose" for row in json.loads(listed.stdout))


def test_the_estimate_counts_the_rows_pose_reads_not_l_prime():
    """A PoSE fine-tune for L' = 8L reads rows of L: its tokens are those rows', an eighth of a plain one's."""
    import types
    from pathlib import Path

    from extrapolate.core.config import PRESETS
    from extrapolate.run.estimate import finetune_tokens
    from extrapolate.training.finetune import finetune_config

    base = TrainConfig(model=ModelConfig(vocab_size=256, max_len=32, **PRESETS["tiny"]), seq_len=32, batch_size=8)

    def tokens(pose: bool) -> int:
        tuned = finetune_config(base, "yarn", 8.0, 256, 10, batch_size=4, pose=pose)
        cell = types.SimpleNamespace(finetune=tuned, model_folder=Path("m"))
        return finetune_tokens([cell], {Path("m"): False})

    assert tokens(pose=False) == 10 * 4 * 256 and tokens(pose=True) == 10 * 4 * 32
