"""Retrieval task variants (word keys, RULER-style multi-key, multi-value, multi-query): token-exact prompts,
exactly the requested needles, an oracle at 100% on both scores, the validity rule of the report, and the
retrieval probes taken during training."""

import dataclasses
import re

import pandas as pd
import pytest
import torch
from torch import nn

from extrapolate.config import ModelConfig
from extrapolate.passkey.prompt import PromptBuilder
from extrapolate.retrieval_report import BELOW_L, NOT_LEARNED, NOT_MEASURED, retrieval_length, retrieval_matrix, retrieves_at_L
from extrapolate.taskfiles import TASKS_DIR, list_task_names, load_task
from extrapolate.tasks.passkey import evaluate_passkey, prompt_length
from extrapolate.tokenizers import ByteTokenizer

from .test_passkey import WordTokenizer

TASKS = list_task_names()  # every shipped task file
RULER = ["ruler-multikey", "ruler-multivalue", "ruler-multiquery"]


def test_the_classic_variant_is_the_reference_prompt():
    """Task sentence, filler, key line, filler, question: the prompt of Landmark Attention, PI and YaRN."""
    task = load_task("passkey-classic")
    prompt = ByteTokenizer().decode(PromptBuilder(task, ByteTokenizer()).trial(1500, 0.5, 0).ids)
    assert prompt.startswith("There is an important info hidden inside a lot of irrelevant text. Find it and memorize "
                             "them. I will quiz you about the important information there. The grass is green.")
    assert prompt.endswith("What is the pass key? The pass key is")
    assert re.search(r"The pass key is (\d{5})\. Remember it\. \1 is the pass key\.", prompt)
    compact = ByteTokenizer().decode(PromptBuilder(load_task("passkey"), ByteTokenizer()).trial(1500, 0.5, 0).ids)
    assert compact.startswith("The grass is green.")


@pytest.mark.parametrize("name", TASKS)
@pytest.mark.parametrize("make_tokenizer", [ByteTokenizer, WordTokenizer])
@pytest.mark.parametrize("length", [300, 777, 2048])
def test_every_variant_has_exactly_the_requested_tokens(name, make_tokenizer, length):
    builder = PromptBuilder(load_task(name), make_tokenizer())
    for depth in builder.task.depths:
        for trial in range(3):
            assert len(builder.trial(length, depth, trial).ids) == length
    tokens, mask = builder.training_row(torch.Generator().manual_seed(1), length)
    assert tokens.shape == (length + 1,) and mask.shape == (length,) and 0 < mask.sum() < length


@pytest.mark.parametrize("name", RULER)
def test_ruler_prompts_contain_exactly_the_requested_needles(name):
    task = load_task(name)
    builder = PromptBuilder(task, ByteTokenizer())
    line = re.compile(re.escape(task.key_line).replace(r"\{name\}", r"(\w+)").replace(r"\{key\}", r"(\w+)"))
    for trial in range(10):
        prompt = builder.trial(1024, 0.5, trial)
        found = line.findall(ByteTokenizer().decode(prompt.ids))  # [(name, key)] in order of appearance
        assert len(found) == task.needles
        assert [(n.name, n.key) for n in prompt.needles] == found
        keys = [k for _, k in found]
        assert len(set(keys)) == len(keys) and set(keys) <= set(task.keys)
        names = [n for n, _ in found]
        asked = re.search(re.escape(task.question).replace(r"\{name\}", "(.+?)") + "$", ByteTokenizer().decode(prompt.ids))
        if task.same_name:
            assert len(set(names)) == 1 and list(prompt.answer_keys) == keys  # every value, in order
        else:
            assert len(set(names)) == task.needles
            queried = asked.group(1).split(" and ")
            assert len(queried) == task.queries and set(queried) <= set(names)
            assert list(prompt.answer_keys) == [dict(found)[n] for n in queried]


def test_word_keys_and_numeric_keys_score_by_their_words():
    builder = PromptBuilder(load_task("ruler-multiquery"), ByteTokenizer())
    prompt = builder.trial(600, 0.25, 0)
    a, b = prompt.answer_keys
    assert builder.is_correct(f" {a} and {b}.\n", prompt)
    assert not builder.is_correct(f" {b} and {a}.", prompt)  # the order asked matters
    assert not builder.is_correct(f" {a}.", prompt)


class LookupOracle(nn.Module):
    """Test-only stub with the model's interface that knows every prompt's answer (from the builder) and
    predicts it token by token: both scores must come out at 100% for every task variant."""

    VOCAB = 4096

    def __init__(self, builder, length):
        super().__init__()
        self.config = ModelConfig(d_model=8, n_layers=1, n_heads=1)
        self.anchor = nn.Parameter(torch.zeros(()))
        prompt_len = prompt_length(builder, length)
        self.prompt_len = prompt_len
        self.answers = {tuple(p.ids): p.answer for p in (builder.trial(prompt_len, d, t)
                                                       for d in builder.task.depths for t in range(builder.task.trials))}

    def new_cache(self):
        return [{}]

    def hidden_states(self, tokens, cache=None, seq_len=None):
        history = cache[0].get("k") if cache else None
        full = tokens if history is None else torch.cat([history.expand(tokens.shape[0], -1), tokens], 1)
        if cache is not None:
            cache[0]["k"], cache[0]["v"] = full, full
        out = torch.full((full.shape[0], tokens.shape[1], 1), 10.0)
        if full.shape[1] < self.prompt_len:  # a shared prefix, fed before the rest of the prompts
            return out
        for b in range(full.shape[0]):
            answer = self.answers[tuple(full[b, : self.prompt_len].tolist())]
            for i in range(tokens.shape[1]):
                produced = full.shape[1] - tokens.shape[1] + i + 1 - self.prompt_len  # answer tokens already seen
                out[b, i, 0] = answer[produced] if 0 <= produced < len(answer) else 10
        return out

    def lm_head(self, hidden):
        return torch.nn.functional.one_hot(hidden[..., 0].long(), self.VOCAB).float() * 50


@pytest.mark.parametrize("name", TASKS)
@pytest.mark.parametrize("make_tokenizer", [ByteTokenizer, WordTokenizer])
def test_oracle_scores_100_percent_on_every_variant(name, make_tokenizer):
    task = dataclasses.replace(load_task(name), trials=3, depths=(0.0, 0.5, 1.0))
    builder = PromptBuilder(task, make_tokenizer())
    length = 700
    cells = evaluate_passkey(LookupOracle(builder, length), builder, length, torch.device("cpu"))
    assert [c.accuracy for c in cells] == [1.0] * 3 and [c.rank_accuracy for c in cells] == [1.0] * 3


def agg_with(accuracy_at: dict[str, dict[int, list[float]]], L: int = 128) -> pd.DataFrame:
    rows = []
    for encoding, by_length in accuracy_at.items():
        for length, per_depth in by_length.items():
            for depth, value in zip((0.0, 0.5, 1.0), per_depth):
                for metric in ("accuracy", "rank_accuracy"):
                    rows.append({"encoding": encoding, "train_len": L, "eval_len": length, "task": "passkey",
                                 "metric": metric, "depth": depth, "mean": value, "ci95": 0.0, "n_seeds": 1,
                                 "status": "ok"})
    return pd.DataFrame(rows)


def test_a_cell_past_L_without_retrieval_at_L_is_not_a_finding():
    agg = agg_with({"rope": {128: [1.0, 0.9, 0.85], 256: [0.9, 0.8, 0.8], 512: [0.2, 0.1, 0.0]},
                    "alibi": {128: [1.0, 0.5, 0.9], 256: [0.9, 0.9, 0.9], 512: [0.9, 0.9, 0.9]}})
    valid = retrieves_at_L(agg)
    assert valid == {"rope": True, "alibi": False}  # alibi misses one depth at L
    table = retrieval_matrix(agg, "accuracy", valid)
    alibi = next(line for line in table.splitlines() if line.startswith("| alibi"))
    assert alibi.count("·") == 2 and "90%" not in alibi  # its 90% past L is not reported
    assert "| 50% at depth 0.5 |" in alibi  # the depth that fails the rule is named
    assert "| 85% at depth 1 |" in next(line for line in table.splitlines() if line.startswith("| rope"))
    even = agg_with({"t5": {128: [1.0, 1.0, 1.0]}, "xpos": {128: [0.5, 1.0, 0.5]}})
    lines = retrieval_matrix(even, "accuracy", retrieves_at_L(even)).splitlines()
    assert "| 100% at every depth |" in lines[2] and "| 50% at depths 0, 1 |" in lines[3]
    lengths = retrieval_length(agg)
    assert lengths == {"rope": 256, "alibi": NOT_LEARNED}


def test_the_heatmap_withholds_what_the_tables_withhold():
    """The heatmap of a model without retrieval at L draws its cells up to L, marks a measured cell past L "·"
    (withheld, as in the tables) and leaves a length it never measured blank."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from extrapolate.plots import passkey_figure

    agg = agg_with({"rope": {128: [1.0, 0.9, 0.85], 256: [0.9, 0.8, 0.8], 512: [0.2, 0.1, 0.0]},
                    "alibi": {128: [1.0, 0.5, 0.9], 256: [0.9, 0.6, 0.9]}})
    figure = passkey_figure(agg, valid=retrieves_at_L(agg))
    rope, alibi = figure.axes[:2]
    labels = {ax: [[text.get_text() for text in ax.texts if round(text.get_position()[0]) == column]
                   for column in range(3)] for ax in (rope, alibi)}
    plt.close(figure)
    assert labels[rope] == [["100", "90", "85"], ["90", "80", "80"], ["20", "10", "0"]]
    assert labels[alibi] == [["100", "50", "90"], ["·", "·", "·"], ["", "", ""]]
    assert "not learned at L" in alibi.get_title() and "not learned" not in rope.get_title()


def test_a_scaling_is_judged_on_the_model_it_scales():
    """YaRN ×8 on the RoPE model misses at L (its positions are compressed there too), yet the model learned the
    task: its cells past L are findings. Without the base model's cells its own cells at L decide."""
    agg = agg_with({"rope": {256: [0.9, 0.9, 0.9], 512: [0.1, 0.0, 0.0]},
                    "yarn": {256: [0.7, 0.6, 0.9], 512: [0.8, 0.7, 0.8]},
                    "alibi": {256: [0.2, 0.1, 0.0], 512: [0.0, 0.0, 0.0]}}, L=256)
    bases = {"rope": "rope", "yarn": "rope", "alibi": "alibi"}
    valid = retrieves_at_L(agg, bases)
    assert valid == {"rope": True, "yarn": True, "alibi": False}
    yarn = next(line for line in retrieval_matrix(agg, "accuracy", valid, bases).splitlines() if line.startswith("| yarn"))
    assert "yes (rope)" in yarn and "77%" in yarn and "| 60% at depth 0.5 |" in yarn  # its own cells at L
    assert retrieval_length(agg, bases) == {"rope": 256, "yarn": BELOW_L, "alibi": NOT_LEARNED}
    alone = agg[agg["encoding"] == "yarn"]
    assert retrieves_at_L(alone, bases) == {"yarn": False}
    past_L = agg[agg["eval_len"] > 256]  # nothing measured at L: unknown, not "not learned"
    assert retrieval_length(past_L, bases) == {"rope": NOT_MEASURED, "yarn": NOT_MEASURED, "alibi": NOT_MEASURED}
    assert "**not measured at L**" in retrieval_matrix(past_L, "accuracy", retrieves_at_L(past_L, bases), bases)


def test_the_validity_rule_uses_the_task_files_threshold(tmp_path):
    """A task file asking 95% "retrieves at L": the report judges its rows by 95%, found from the identity in
    the `protocol` column, for a shipped file or one a run record names by path; 80% when no file is found."""
    import json

    from extrapolate.retrieval_report import retrieval_section, task_threshold

    strict = tmp_path / "strict.toml"
    strict.write_text((TASKS_DIR / "passkey-word.toml").read_text().replace("threshold = 0.8", "threshold = 0.95"))
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"request": {"passkey_task": str(strict)}}))

    def table(protocol):
        return pd.DataFrame({"task": ["perplexity", "passkey"], "protocol": ["full", protocol]})

    assert task_threshold(folder, table(load_task(str(strict)).identity)) == 0.95
    assert task_threshold(folder, table(load_task("passkey-word").identity)) == 0.8
    assert task_threshold(folder, table("passkey-word-v9-compact-00000000")) == 0.8  # no file has it
    agg = agg_with({"rope": {128: [1.0, 0.9, 0.95], 256: [0.9, 0.9, 0.9]}})
    assert retrieves_at_L(agg) == {"rope": True} and retrieves_at_L(agg, threshold=0.95) == {"rope": False}
    section = "\n".join(retrieval_section(agg, pd.DataFrame(), threshold=0.95))
    assert "≥ 95% at every depth" in section and "| rope | 128 | **no** | 90% at depth 0.5 | 95% | · |" in section


def test_probes_during_training_survive_a_resume(tmp_path):
    from extrapolate.batches import BatchSource
    from extrapolate.config import TrainConfig
    from extrapolate.train import Probe, train

    config = TrainConfig(model=ModelConfig(d_model=32, n_layers=1, n_heads=2, encoding="rope", max_len=32),
                         seq_len=32, batch_size=2, steps=12, warmup_steps=2, checkpoint_every=4, dtype="float32")
    stream = torch.arange(2000) % 251
    probe = Probe(every=3, measure=lambda model: float(model.embed.weight.sum()))  # any function of the weights

    def source():
        return BatchSource(stream, 32, 2, 0)

    whole = train(config, source(), torch.device("cpu"), folder=tmp_path / "a", probe=probe)
    train(config, source(), torch.device("cpu"), folder=tmp_path / "b", probe=probe, stop_after=6)
    resumed = train(config, source(), torch.device("cpu"), folder=tmp_path / "b", probe=probe)
    assert [s for s, _ in whole.summary["probes"]] == [3, 6, 9, 12]
    assert resumed.summary["probes"] == whole.summary["probes"]


def test_every_word_key_is_one_token_of_the_default_tokenizer(tmp_path, monkeypatch):
    """The default retrieval task's promise: each of its keys is a single token of the BPE learned from the
    built-in corpus (fetched and checksummed like any run's; the tokenizer trains in seconds)."""
    from extrapolate.corpora import load_corpus
    from extrapolate.paths import cache_dir
    from extrapolate.tokenizers import load_tokenizer

    shared = cache_dir() / "corpora"  # a corpus this machine already fetched is reused (pinned by checksum)
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path))  # the tokenizer is trained in a temporary cache
    if shared.exists():
        (tmp_path / "corpora").symlink_to(shared)
    builder = PromptBuilder(load_task("passkey-word"), load_tokenizer("bpe", load_corpus("shakespeare")))
    assert len(builder.key_tokens) == 100 and set(builder.key_tokens.values()) == {1}
