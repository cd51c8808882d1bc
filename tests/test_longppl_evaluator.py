"""LongPPL with another model as the evaluator (`--evaluator`) against a port of the authors' compute_longppl
with `evaluator_model` (PKU-ML/LongPPL at 1decd2a, longppl/longppl.py): key tokens chosen by the evaluator in its
own tokens, carried to the evaluated model's tokens by their text, and the evaluated model's loss on them."""

import math

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.core.config import ModelConfig
from extrapolate.data.tokenizers import BPETokenizer, ByteTokenizer, train_bpe
from extrapolate.model import TransformerLM
from extrapolate.tasks import key_tokens, longppl
from extrapolate.tasks.longppl_evaluator import Evaluator, char_spans, merged, tokens_inside
from tests.test_longppl import Logits, authors_key_tokens

runner = CliRunner()
WORDS = "the cat sat on a mat while seven dogs ran far from home and a bird sang over the quiet river".split()


def merge_intervals(intervals):  # the authors', ported
    if intervals.size(0) == 0:
        return intervals
    start, end = intervals[:, 0], intervals[:, 1]
    adjacent = (start[1:] - end[:-1]) == 0
    merged_start = start[torch.cat([torch.tensor([True]), ~adjacent])]
    merged_end = end[torch.cat([~adjacent, torch.tensor([True])])]
    return torch.stack([merged_start, merged_end], dim=1)


def cal_overlap(offset_mapping, key_text_slices):  # the authors', ported
    key_tokens, i, j = [], 0, 0
    while i < len(offset_mapping) and j < len(key_text_slices):
        a_start, a_end = offset_mapping[i]
        b_start, b_end = key_text_slices[j]
        if a_start >= b_start and a_end <= b_end:
            key_tokens.append(i - 1)
            i += 1
        elif a_start < b_start:
            i += 1
        else:
            j += 1
    return key_tokens


def compute_offsets(tokenizer, ids):  # the authors' fallback for a tokenizer without offsets, ported
    offsets, pointer = [], 0
    for i in range(len(ids)):
        if i == 0:
            size = len(tokenizer.decode(ids[:1]))
        else:
            size = len(tokenizer.decode(ids[i - 1 : i + 1])) - len(tokenizer.decode(ids[i - 1 : i]))
        offsets.append([pointer, pointer + size])
        pointer += size
    return offsets


def authors_with_evaluator(model, tokenizer, evaluator, evaluator_tokenizer, text, trunc_len, window, alpha, beta):
    """find_key_token on the evaluator (its tokenizer's offset mapping), then compute_longppl's selection."""
    encoded = evaluator_tokenizer(text, return_tensors="pt", return_offsets_mapping=True)
    key_tokens = authors_key_tokens(Logits(evaluator), encoded["input_ids"], trunc_len, window, alpha, beta)
    loss_f = torch.nn.CrossEntropyLoss(reduction="none")
    slices = merge_intervals(encoded["offset_mapping"][0, key_tokens]).tolist()
    ids = tokenizer.encode(text)
    chosen = cal_overlap(compute_offsets(tokenizer, ids), slices)
    ids = torch.tensor([ids])
    losses = loss_f(model(ids)[0, :-1], ids[0, 1:]).numpy()
    return (float(np.exp(losses[chosen].mean())) if chosen else None), len(chosen)


def sharp(vocab, seed):
    torch.manual_seed(seed)
    model = TransformerLM(
        ModelConfig(vocab_size=vocab, d_model=32, n_layers=2, n_heads=4, encoding="rope", max_len=512)
    )
    for p in model.parameters():  # sharp enough that the context moves the losses by nats
        torch.nn.init.normal_(p, std=0.4)
    return model.eval()


def story(seed, words=60):
    rng = np.random.default_rng(seed)
    return " ".join(rng.choice(WORDS, size=words))


@pytest.fixture(scope="module")
def bpe():
    texts = [story(s, 200) for s in range(20)]
    return BPETokenizer(train_bpe(texts, 300), 300)


@pytest.mark.parametrize(("short", "window", "alpha", "beta"), [(12, 6, 0.3, -6.0), (20, 9, 0.5, -5.0)])
def test_key_tokens_across_tokenizers_are_the_authors(bpe, monkeypatch, short, window, alpha, beta):
    monkeypatch.setattr(key_tokens, "ALPHA", alpha)
    monkeypatch.setattr(key_tokens, "BETA", beta)
    words, model, judge = ByteTokenizer(), sharp(256, 0), sharp(bpe.vocab_size, 1)
    evaluator = Evaluator(judge, bpe, "judge", window_tokenizer=words)
    hf = bpe.to_transformers()
    total = 0
    for seed in range(3):
        text = story(10 + seed)
        doc = torch.tensor(words.encode(text))
        n = doc.numel() - 1
        with torch.no_grad():
            ours = longppl.evaluate_longppl(
                model, [doc], n, budget=n, short=short, window=window, device="cpu", evaluator=evaluator
            )
            value, count = authors_with_evaluator(model, words, judge, hf, text, short, window, alpha, beta)
        assert ours.key_tokens == [count]
        first = hf(text, return_offsets_mapping=True)["offset_mapping"][short][0]  # the first target it judges
        assert ours.candidates == [n + 1 - max(first, 1)]  # byte tokens from there on (one character each)
        if count:
            assert math.isclose(math.exp(ours.key_nll[0] / count), value, rel_tol=1e-4)
        total += count
    assert total > 10  # the comparison has key tokens to compare


def test_the_evaluated_model_as_its_own_evaluator_is_the_plain_longppl(monkeypatch):
    monkeypatch.setattr(key_tokens, "ALPHA", 0.3)
    monkeypatch.setattr(key_tokens, "BETA", -6.0)
    model = sharp(64, 0)
    doc = torch.randint(0, 64, (97,), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        plain = longppl.evaluate_longppl(model, [doc], 96, budget=96, short=16, window=8, device="cpu")
        judged = longppl.evaluate_longppl(
            model, [doc], 96, budget=96, short=16, window=8, device="cpu", evaluator=Evaluator(model, None, "x")
        )
        other = longppl.evaluate_longppl(
            model, [doc], 96, budget=96, short=16, window=8, device="cpu", evaluator=Evaluator(sharp(64, 5), None, "y")
        )
    assert (plain.key_nll, plain.key_tokens, plain.candidates) == (judged.key_nll, judged.key_tokens, judged.candidates)
    assert other.key_tokens != plain.key_tokens  # another evaluator chooses other tokens


@pytest.mark.parametrize("seed", range(20))
def test_spans_merge_and_overlap_as_the_authors(seed):
    rng = np.random.default_rng(seed)
    cuts = np.cumsum(rng.integers(0, 4, size=40))
    spans = [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:])]
    keys = [spans[i] for i in sorted(rng.choice(len(spans), size=12, replace=False))]
    theirs = merge_intervals(torch.tensor(keys)).tolist()
    assert [list(s) for s in merged(keys)] == theirs
    other = np.cumsum(rng.integers(0, 3, size=60))
    tokens = [(int(a), int(b)) for a, b in zip(other[:-1], other[1:])]
    assert [i - 1 for i in tokens_inside(tokens, merged(keys))] == cal_overlap(tokens, theirs)


def test_a_tokens_span_is_what_it_adds_to_the_text(bpe):
    text = story(3)
    ids = bpe.encode(text)
    spans = char_spans(bpe, ids)
    assert spans[-1][1] == len(text) and all(a <= b for a, b in spans)
    assert "".join(text[a:b] for a, b in spans) == text


@pytest.mark.parametrize(
    "evaluator,said",
    [
        ("nothing", "no such folder or file"),
        ("someone/no-such-model", "--evaluator: model 'someone/no-such-model' is neither a preset"),  # hub offline
        ("", "--evaluator names no model"),
        ("weightless", "has a config.json but no weights"),  # a folder its weights never reached
        ("weightless/config.json", "a file, not a GGUF checkpoint"),
    ],
)
def test_an_evaluator_that_cannot_be_loaded_is_one_line_before_training(tmp_path, monkeypatch, evaluator, said):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = ["--model", "tiny", "--steps", "2", "--batch-size", "2", "--train-len", "32", "--eval-tokens", "128"]
    args = ["--tasks", "longppl", "--eval-lens", "64", "--longppl-short", "16", "--longppl-window", "16"]
    out = tmp_path / "out"
    (tmp_path / "weightless").mkdir()
    (tmp_path / "weightless" / "config.json").write_text('{"model_type": "llama"}')
    evaluator = (
        str(tmp_path / evaluator) if evaluator in ("nothing", "weightless", "weightless/config.json") else evaluator
    )
    result = runner.invoke(app, ["run", *model, *args, "--evaluator", evaluator, "--out", str(out)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], result.output
    assert not (out / "results.csv").exists()
    cache = tmp_path / "cache"
    assert not cache.exists() or not any(p.is_file() for p in cache.rglob("*")), "said before training, not after"


def test_a_size_preset_as_evaluator_is_one_line(tmp_path):
    args = ["--model", "tiny", "--tasks", "longppl", "--longppl-short", "64", "--evaluator", "tiny"]
    args += ["--out", str(tmp_path / "out")]
    result = runner.invoke(app, ["run", *args])
    assert result.exit_code == 2 and "--evaluator 'tiny': give a pretrained model" in result.output


def test_an_evaluator_without_longppl_is_ignored_aloud(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    model = ["--model", "tiny", "--steps", "2", "--batch-size", "2", "--train-len", "32", "--eval-tokens", "128"]
    args = ["--tasks", "perplexity", "--eval-lens", "64", "--evaluator", "smollm2-135m", "--dry-run"]
    result = runner.invoke(app, ["run", *model, *args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "--evaluator set the longppl evaluation, which --tasks does not include: ignored" in " ".join(
        result.output.split()
    )


@pytest.mark.slow  # end to end, tens of seconds: run by the CI's slow step
def test_an_ignored_evaluator_is_never_loaded(tmp_path, monkeypatch):
    import extrapolate.run.checkpoint as checkpoint

    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(checkpoint, "evaluator_once", lambda *a: pytest.fail("an ignored evaluator was loaded"))
    monkeypatch.setattr("extrapolate.run.evaluate.evaluator_once", checkpoint.evaluator_once)
    model = ["--model", "tiny", "--steps", "2", "--batch-size", "2", "--train-len", "32", "--eval-tokens", "128"]
    args = ["--tasks", "perplexity", "--eval-lens", "64", "--evaluator", "smollm2-135m"]
    result = runner.invoke(app, ["run", *model, *args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output


def test_a_run_with_a_checkpoint_as_evaluator(tmp_path, monkeypatch):
    """A model trained here (its BPE) judged by a saved Llama with another tokenizer: the rows say which
    evaluator chose the key tokens, and their run id is not that of the model judging itself."""
    import pandas as pd
    import transformers

    from extrapolate.data.tokenizers import load_tokenizer
    from tests.test_tokenizers import small_corpus

    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(key_tokens, "BETA", -8.0)  # untrained models predict nothing below 2 nats
    monkeypatch.setattr(key_tokens, "ALPHA", 0.0)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=False,
    )  # fmt: skip
    folder = tmp_path / "judge"
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    load_tokenizer("bpe:300", small_corpus()).to_transformers().save_pretrained(folder)
    model = ["--model", "tiny", "--steps", "2", "--batch-size", "2", "--train-len", "32", "--eval-tokens", "128"]
    args = ["--tasks", "longppl", "--eval-lens", "64", "--longppl-short", "16", "--longppl-window", "16"]
    ids = []
    for out, extra in ((tmp_path / "own", []), (tmp_path / "judged", ["--evaluator", str(folder)])):
        result = runner.invoke(app, ["run", *model, *args, *extra, "--out", str(out)])
        assert result.exit_code == 0, result.output
        rows = pd.read_csv(out / "results.csv").set_index("metric")
        assert 0 < rows.loc["key_share", "value"] <= 1
        ids.append(rows.loc["longppl", "run_id"])
    assert rows.loc["longppl", "protocol"] == f"longppl-short-16-window-16-evaluator-{folder}"
    assert ids[0] != ids[1]
