"""Retrieval task variants (word keys, RULER-style multi-key, multi-value, multi-query): token-exact prompts,
exactly the requested needles, an oracle at 100% on both scores, the report's rule for "retrieves at a length"
(mean over depths, an optional per-depth floor) and its validity rule, and the retrieval probes taken during
training."""

import dataclasses
import re

import pandas as pd
import pytest
import torch
from torch import nn

from extrapolate.core.config import ModelConfig
from extrapolate.data.tokenizers import ByteTokenizer
from extrapolate.report.retrieval import (
    BELOW_L,
    FAILS,
    NOT_LEARNED,
    NOT_MEASURED,
    RETRIEVES,
    Rule,
    Verdict,
    pretrained_encodings,
    retrieval_length,
    retrieval_matrix,
    retrieves_at_L,
    verdicts,
)
from extrapolate.tasks.files import TASKS_DIR, list_task_names, load_task
from extrapolate.tasks.passkey import evaluate_passkey, prompt_length
from extrapolate.tasks.prompt import PromptBuilder

from .test_passkey import WordTokenizer

TASKS = [n for n in list_task_names() if load_task(n).kind == "passkey"]  # every shipped passkey task file
RULER = ["ruler-multikey", "ruler-multivalue", "ruler-multiquery"]


def test_the_classic_variant_is_the_reference_prompt():
    """Task sentence, filler, key line, filler, question: the prompt of Landmark Attention, PI and YaRN."""
    task = load_task("passkey-classic")
    prompt = ByteTokenizer().decode(PromptBuilder(task, ByteTokenizer()).trial(1500, 0.5, 0).ids)
    assert prompt.startswith(
        "There is an important info hidden inside a lot of irrelevant text. Find it and memorize "
        "them. I will quiz you about the important information there. The grass is green."
    )
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
        asked = re.search(
            re.escape(task.question).replace(r"\{name\}", "(.+?)") + "$", ByteTokenizer().decode(prompt.ids)
        )
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
        self.answers = {
            tuple(p.ids): p.answer
            for p in (builder.trial(prompt_len, d, t) for d in builder.task.depths for t in range(builder.task.trials))
        }

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
                    rows.append(
                        {
                            "encoding": encoding,
                            "train_len": L,
                            "eval_len": length,
                            "task": "passkey",
                            "metric": metric,
                            "depth": depth,
                            "mean": value,
                            "ci95": 0.0,
                            "n_seeds": 1,
                            "status": "ok",
                        }
                    )
    return pd.DataFrame(rows)


def test_a_model_retrieves_by_the_mean_over_depths():
    """RULER's convention: mean greedy accuracy over depths ≥ the threshold, so one missed depth does not undo
    the rest (SmolLM2 at its own L: 80%, depth 0 at 0%); a per-depth floor, when the task file sets one, asks
    every depth to reach it too. A mean of tenths that sums to 0.7999… reaches 80%."""
    agg = agg_with(
        {
            "rope": {128: [1.0, 1.0, 0.4], 256: [1.0, 0.9, 0.5], 512: [0.9, 0.6, 0.6]},
            "alibi": {128: [0.9, 0.7, 0.6], 256: [1.0, 1.0, 1.0]},
            "t5": {128: [0.6, 0.9, 0.9]},
        }
    )
    assert retrieves_at_L(agg) == {"rope": True, "alibi": False, "t5": True}
    assert retrieval_length(agg, verdicts(agg)) == {"rope": 256, "alibi": NOT_LEARNED, "t5": 128}
    floor = Rule(depth_floor=0.5)
    assert retrieves_at_L(agg, rule=floor) == {"rope": False, "alibi": False, "t5": True}
    assert verdicts(agg, rule=floor)["rope"] == Verdict(NOT_LEARNED, shortfall="depth 1 at 40%")
    assert verdicts(agg, rule=floor)["rope"].text == NOT_LEARNED
    assert verdicts(agg, rule=floor, pretrained=frozenset({"rope"}))["rope"].text == "fails at L: depth 1 at 40%"
    assert verdicts(agg, pretrained=frozenset({"alibi"}))["alibi"].text == "fails at L: mean 73%"
    at_256 = agg[(agg["encoding"] == "rope") & (agg["eval_len"] == 256) & (agg["metric"] == "accuracy")]
    assert Rule().retrieves(at_256) and Rule(depth_floor=0.5).retrieves(at_256)
    assert Rule(depth_floor=0.6).shortfall(at_256) == "depth 1 at 50%" and Rule(0.85).shortfall(at_256) == "mean 80%"
    assert Rule(depth_floor=0.5).describe() == "mean greedy accuracy over depths ≥ 80%, every depth ≥ 50%"


def test_a_cell_past_L_without_retrieval_at_L_is_shown_and_not_a_finding():
    """A model that does not retrieve at L keeps its cells past L in the table, in italics, and its effective
    length says why in the words that fit it: "not learned at L" when trained here, "fails at L" when
    pretrained."""
    agg = agg_with(
        {
            "rope": {128: [1.0, 0.9, 0.85], 256: [0.9, 0.8, 0.8], 512: [0.2, 0.1, 0.0]},
            "alibi": {128: [1.0, 0.3, 0.9], 256: [0.9, 0.9, 0.9], 512: [0.9, 0.9, 0.9]},
        }
    )
    assert retrieves_at_L(agg) == {"rope": True, "alibi": False}  # alibi: 73% at L
    table = retrieval_matrix(agg, "accuracy", verdicts(agg))
    alibi = next(line for line in table.splitlines() if line.startswith("| alibi"))
    assert alibi.count("*90%*") == 2 and "| 73% |" in alibi and "**not learned at L**" in alibi
    assert "| 30% at depth 0.5 |" in alibi  # the worst depth at L is named
    rope = next(line for line in table.splitlines() if line.startswith("| rope"))
    assert "| 85% at depth 1 |" in rope and "| 10% |" in rope and "*" not in rope
    even = agg_with({"t5": {128: [1.0, 1.0, 1.0]}, "xpos": {128: [0.5, 1.0, 0.5]}})
    lines = retrieval_matrix(even, "accuracy", verdicts(even)).splitlines()
    assert "| 100% at every depth |" in lines[2] and "| 50% at depths 0, 1 |" in lines[3]
    assert retrieval_length(agg, verdicts(agg)) == {"rope": 256, "alibi": NOT_LEARNED}
    said = verdicts(agg, pretrained=frozenset({"alibi"}))
    assert retrieval_length(agg, said) == {"rope": 256, "alibi": FAILS}
    assert "**fails at L: mean 73%**" in retrieval_matrix(agg, "accuracy", said)


def test_pretrained_models_are_told_apart_by_the_recorded_model():
    table = pd.DataFrame(
        {
            "encoding": ["rope", "yarn s=4", "alibi", "nope", "pi"],
            "model": ["smollm2-135m", "smollm2-135m", "small", "unrecorded", float("nan")],
        }
    )
    assert pretrained_encodings(table) == {"rope", "yarn s=4"}


def test_the_heatmap_draws_every_measured_cell():
    """The heatmap of a model without retrieval at L draws every measured cell with its value, hatches those
    past L (measured, not a finding), says why under its name, and leaves a length it never measured blank."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from extrapolate.report.plots import MUTED, passkey_figure

    agg = agg_with(
        {
            "rope": {128: [1.0, 0.9, 0.85], 256: [0.9, 0.8, 0.8], 512: [0.2, 0.1, 0.0]},
            "alibi": {128: [1.0, 0.3, 0.9], 256: [0.9, 0.6, 0.9]},
        }
    )
    for pretrained, reason in ((frozenset(), "not learned at L"), (frozenset({"alibi"}), "fails at L: mean 73%")):
        figure = passkey_figure(agg, verdicts=verdicts(agg, pretrained=pretrained))
        rope, alibi = figure.axes[:2]
        labels = {
            ax: [
                [text.get_text() for text in ax.texts if round(text.get_position()[0]) == column] for column in range(3)
            ]
            for ax in (rope, alibi)
        }
        hatched = {ax: [patch.get_x() + 0.5 for patch in ax.patches] for ax in (rope, alibi)}
        notes = [text.get_text() for text in figure.texts]
        plt.close(figure)
        assert labels[rope] == [["100", "90", "85"], ["90", "80", "80"], ["20", "10", "0"]]
        assert labels[alibi] == [["100", "30", "90"], ["90", "60", "90"], ["", "", ""]]
        assert hatched[rope] == [] and hatched[alibi] == [1.0, 1.0, 1.0]  # the three depths at 256
        assert alibi.get_title() == f"alibi\n{reason}" and rope.get_title() == "rope" and MUTED in notes


def test_a_scaling_is_judged_on_the_model_it_scales():
    """YaRN ×8 on the RoPE model misses at L (its positions are compressed there too), yet the model learned the
    task: its cells past L are findings. Without the base model's cells its own cells at L decide."""
    agg = agg_with(
        {
            "rope": {256: [0.9, 0.9, 0.9], 512: [0.1, 0.0, 0.0]},
            "yarn": {256: [0.7, 0.6, 0.9], 512: [0.8, 0.7, 0.8]},
            "alibi": {256: [0.2, 0.1, 0.0], 512: [0.0, 0.0, 0.0]},
        },
        L=256,
    )
    bases = {"rope": "rope", "yarn": "rope", "alibi": "alibi"}
    said = verdicts(agg, bases)
    assert retrieves_at_L(agg, bases) == {"rope": True, "yarn": True, "alibi": False}
    assert said["yarn"] == Verdict(RETRIEVES, judge="rope") and said["yarn"].text == "yes (rope)"
    yarn = next(line for line in retrieval_matrix(agg, "accuracy", said).splitlines() if line.startswith("| yarn"))
    assert "yes (rope)" in yarn and "77%" in yarn and "| 60% at depth 0.5 |" in yarn  # its own cells at L
    assert retrieval_length(agg, said) == {"rope": 256, "yarn": BELOW_L, "alibi": NOT_LEARNED}
    later = pd.concat([agg, agg_with({"rerope": {512: [0.9, 0.3, 0.3]}, "self-extend": {512: [0.9, 0.8, 0.8]}}, L=256)])
    lengths = retrieval_length(later, verdicts(later, {**bases, "rerope": "rope", "self-extend": "rope"}))
    assert lengths["rerope"] == "below 512" and lengths["self-extend"] == 512  # no cell at L: from its first length
    failing = agg[agg["encoding"] != "rope"].assign(encoding=lambda f: f["encoding"].replace("alibi", "rope"))
    failed = verdicts(failing, bases, pretrained=frozenset({"rope", "yarn"}))["yarn"]
    assert failed == Verdict(FAILS, judge="rope", shortfall="mean 10%") and failed.text == "fails at L (rope): mean 10%"
    alone = agg[agg["encoding"] == "yarn"]
    assert retrieves_at_L(alone, bases) == {"yarn": False}
    past_L = agg[agg["eval_len"] > 256]  # nothing measured at L: unknown, not "not learned"
    unknown = verdicts(past_L, bases)
    assert retrieval_length(past_L, unknown) == {"rope": NOT_MEASURED, "yarn": NOT_MEASURED, "alibi": NOT_MEASURED}
    assert "**not measured at L**" in retrieval_matrix(past_L, "accuracy", unknown)


def test_the_validity_rule_is_the_task_files(tmp_path):
    """A task file asking 95% "retrieves at L", or a per-depth floor: the report judges its rows by it, found
    from the identity in the `protocol` column, for a shipped file or one a run record names by path; the
    default rule when no file is found."""
    import json

    from extrapolate.report.retrieval import retrieval_section, task_rule

    word = (TASKS_DIR / "passkey-word.toml").read_text()
    strict, floored = tmp_path / "strict.toml", tmp_path / "floored.toml"
    strict.write_text(word.replace("threshold = 0.8", "threshold = 0.95"))
    floored.write_text(word.replace("threshold = 0.8", "threshold = 0.8\ndepth_floor = 0.5"))
    folder = tmp_path / "out"
    (folder / "runs").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"request": {"passkey_task": str(strict)}}))
    (folder / "runs" / "a.json").write_text(json.dumps({"request": {"passkey_task": str(floored)}}))

    def table(protocol):
        return pd.DataFrame({"task": ["perplexity", "passkey"], "protocol": ["full", protocol]})

    assert task_rule(folder, table(load_task(str(strict)).identity)) == Rule(0.95)
    assert task_rule(folder, table(load_task(str(floored)).identity)) == Rule(0.8, 0.5)
    assert task_rule(folder, table(load_task("passkey-word").identity)) == Rule()
    assert task_rule(folder, table("passkey-word-v9-compact-00000000")) == Rule()  # no file has it
    agg = agg_with({"rope": {128: [1.0, 0.9, 0.9], 256: [0.9, 0.9, 0.9]}})
    assert retrieves_at_L(agg) == {"rope": True} and retrieves_at_L(agg, rule=Rule(0.95)) == {"rope": False}
    section = "\n".join(retrieval_section(agg, pd.DataFrame(), verdicts(agg, rule=Rule(0.95)), Rule(0.95)))
    assert "mean greedy accuracy over depths ≥ 95%" in section
    assert "| rope | 128 | **not learned at L** | 90% at depths 0.5, 1 | 93% | *90%* |" in section


def test_a_depth_floor_is_optional_and_checked(tmp_path):
    """`depth_floor` left out, or at its default 0, keeps a task's identity (every committed result names it);
    a floor above the threshold is refused in one line."""
    from extrapolate.core.errors import UserError

    word = (TASKS_DIR / "passkey-word.toml").read_text()
    zero, high = tmp_path / "zero.toml", tmp_path / "high.toml"
    zero.write_text(word.replace("threshold = 0.8", "threshold = 0.8\ndepth_floor = 0"))
    high.write_text(word.replace("threshold = 0.8", "threshold = 0.8\ndepth_floor = 0.9"))
    assert load_task("passkey-word").depth_floor == 0.0
    assert load_task(str(zero)).identity == load_task("passkey-word").identity == "passkey-word-v2-compact-4e10e294"
    with pytest.raises(UserError, match="depth_floor"):
        load_task(str(high))


def test_probes_during_training_survive_a_resume(tmp_path):
    from extrapolate.core.config import TrainConfig
    from extrapolate.data.batches import BatchSource
    from extrapolate.training.train import Probe, train

    config = TrainConfig(
        model=ModelConfig(d_model=32, n_layers=1, n_heads=2, encoding="rope", max_len=32),
        seq_len=32,
        batch_size=2,
        steps=12,
        warmup_steps=2,
        checkpoint_every=4,
        dtype="float32",
    )
    stream = torch.arange(2000) % 251
    # any functions of the weights
    probe = Probe(
        every=3,
        retrieval=lambda model: float(model.embed.weight.sum()),
        heldout=lambda model: float(model.embed.weight.abs().sum()),
    )

    def source():
        return BatchSource(stream, 32, 2, 0)

    whole = train(config, source(), torch.device("cpu"), folder=tmp_path / "a", probe=probe)
    train(config, source(), torch.device("cpu"), folder=tmp_path / "b", probe=probe, stop_after=6)
    resumed = train(config, source(), torch.device("cpu"), folder=tmp_path / "b", probe=probe)
    assert [s for s, _, _ in whole.summary["probes"]] == [3, 6, 9, 12]
    assert resumed.summary["probes"] == whole.summary["probes"]
    assert all(heldout > 0 for _, _, heldout in whole.summary["probes"])


def test_every_word_key_is_one_token_of_the_default_tokenizer(tmp_path, monkeypatch):
    """The default retrieval task's promise: each of its keys is a single token of the BPE learned from the
    built-in corpus (fetched and checksummed like any run's; the tokenizer trains in seconds)."""
    from extrapolate.core.paths import cache_dir
    from extrapolate.data.corpora import load_corpus
    from extrapolate.data.tokenizers import load_tokenizer

    shared = cache_dir() / "corpora"  # a corpus this machine already fetched is reused (pinned by checksum)
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path))  # the tokenizer is trained in a temporary cache
    if shared.exists():
        (tmp_path / "corpora").symlink_to(shared)
    builder = PromptBuilder(load_task("passkey-word"), load_tokenizer("bpe", load_corpus("shakespeare")))
    assert len(builder.key_tokens) == 100 and set(builder.key_tokens.values()) == {1}
