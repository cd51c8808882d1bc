"""Passkey prompts are token-exact, seeded and placed where asked; scoring gives 100% to an oracle and about
chance to a random model, for both scores."""

import dataclasses

import pytest
import torch

from extrapolate.core.config import ModelConfig
from extrapolate.core.errors import UserError
from extrapolate.data.tokenizers import ByteTokenizer
from extrapolate.model import TransformerLM
from extrapolate.tasks.files import load_task
from extrapolate.tasks.passkey import evaluate_passkey
from extrapolate.tasks.prompt import PromptBuilder


class WordTokenizer:
    """A second tokenizer with multi-character tokens: whitespace-separated words with their leading space."""

    name = "words"

    def __init__(self):
        self.vocab: dict[str, int] = {}
        self.inverse: list[str] = []

    def encode(self, text):
        import re

        ids = []
        for piece in re.findall(r"\s*\S+|\s+", text):
            if piece not in self.vocab:
                self.vocab[piece] = len(self.inverse)
                self.inverse.append(piece)
            ids.append(self.vocab[piece])
        return ids

    def decode(self, ids):
        return "".join(self.inverse[i] if 0 <= i < len(self.inverse) else "?" for i in ids)


TOKENIZERS = [ByteTokenizer, WordTokenizer]


@pytest.fixture
def task():
    return load_task("passkey")


@pytest.mark.parametrize("make_tokenizer", TOKENIZERS)
@pytest.mark.parametrize("variant", ["compact", "classic"])
@pytest.mark.parametrize("length", [260, 512, 1000, 4096])
def test_prompt_has_exactly_the_requested_tokens(task, make_tokenizer, variant, length):
    builder = PromptBuilder(dataclasses.replace(task, variant=variant), make_tokenizer())
    for depth in task.depths:
        prompt = builder.trial(length, depth, 0)
        assert len(prompt.ids) == length
        assert builder.tokenizer.decode(prompt.ids).endswith(task.question)


@pytest.mark.parametrize("variant", ["compact", "classic"])
def test_a_bos_prompt_starts_with_it_and_keeps_its_length_and_key(task, variant):
    plain = PromptBuilder(dataclasses.replace(task, variant=variant), ByteTokenizer())
    marked = PromptBuilder(dataclasses.replace(task, variant=variant), ByteTokenizer(), bos=300)
    for depth in task.depths:
        with_bos, without = marked.trial(1000, depth, 0), plain.trial(1000, depth, 0)
        assert len(with_bos.ids) == 1000 and with_bos.ids[0] == 300 and 300 not in with_bos.ids[1:]
        assert with_bos.key == without.key and with_bos.answer == without.answer
        key_line = marked.key_line(with_bos.key)
        assert with_bos.ids[with_bos.key_start : with_bos.key_start + len(key_line)] == key_line


@pytest.mark.parametrize("make_tokenizer", TOKENIZERS)
def test_depth_places_the_key(task, make_tokenizer):
    builder = PromptBuilder(task, make_tokenizer())
    length = 2000
    starts, last = [], None
    for depth in (0.0, 0.25, 0.5, 0.75, 1.0):
        prompt = last = builder.trial(length, depth, 3)
        key_ids = builder.key_line(prompt.key)
        assert prompt.ids[prompt.key_start : prompt.key_start + len(key_ids)] == key_ids
        filler_total = length - builder.fixed_tokens()
        assert prompt.key_start == len(builder.prefix) + round(depth * filler_total)
        starts.append(prompt.key_start)
    assert starts[0] == len(builder.prefix)
    # depth 1: the key line ends right where the question begins
    assert starts[-1] + len(builder.key_line(last.key)) + len(builder.question) == length
    assert starts == sorted(starts)


def test_same_seed_same_prompts_other_seed_other_keys(task):
    a, b = PromptBuilder(task, ByteTokenizer()), PromptBuilder(task, ByteTokenizer())
    assert [a.trial(512, 0.5, t).ids for t in range(5)] == [b.trial(512, 0.5, t).ids for t in range(5)]
    other = PromptBuilder(dataclasses.replace(task, seed=task.seed + 1), ByteTokenizer())
    assert [a.trial(512, 0.5, t).key for t in range(5)] != [other.trial(512, 0.5, t).key for t in range(5)]
    keys = {a.trial(512, 0.5, t).key for t in range(20)}
    assert len(keys) > 15 and all(10_000 <= k < 100_000 for k in keys)


def test_too_short_for_the_fixed_text_is_a_user_error(task):
    with pytest.raises(UserError, match="needs at least"):
        PromptBuilder(dataclasses.replace(task, variant="classic"), ByteTokenizer()).trial(200, 0.5, 0)


def test_training_row_puts_the_loss_on_the_answer(task):
    builder = PromptBuilder(task, ByteTokenizer())
    tokens, mask = builder.training_row(torch.Generator().manual_seed(0), 256, answer_only=True)
    assert tokens.shape == (257,) and mask.shape == (256,)
    answer = ByteTokenizer().decode(tokens[1:][mask.bool()].tolist())
    assert answer.startswith(" ") and answer.endswith(".") and answer.strip(" .").isdigit()


def test_row_weighting_gives_every_sequence_the_same_weight():
    from extrapolate.training.train import masked_loss

    nll = torch.tensor([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 8.0], [5.0, 5.0, 5.0, 5.0]])  # (B=3, T=4)
    mask = torch.tensor([[1.0, 1, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]])  # row 2 has no target: ignored
    assert masked_loss(nll, mask, "token").item() == pytest.approx(12 / 5)
    assert masked_loss(nll, mask, "row").item() == pytest.approx((1 + 8) / 2)


# An oracle scoring 100% on both scores, for every task variant: tests/test_retrieval_tasks.py.


def test_random_model_scores_about_chance(task):
    torch.manual_seed(0)
    builder = PromptBuilder(dataclasses.replace(task, trials=40, depths=(0.5,)), ByteTokenizer())
    model = TransformerLM(ModelConfig(d_model=32, n_layers=1, n_heads=2, encoding="rope"))
    cells = evaluate_passkey(model, builder, 300, torch.device("cpu"))
    assert cells[0].accuracy == 0.0  # exact 5-digit match by luck: 1e-5 per trial
    assert 0.0 <= cells[0].rank_accuracy <= 0.3  # chance is 1 / (1 + 9 distractors)


@pytest.mark.parametrize("make_tokenizer", [ByteTokenizer, WordTokenizer])
def test_shared_prefix_is_common_to_every_later_prompt_and_grows(task, make_tokenizer):
    from extrapolate.tasks.passkey import prompt_groups
    from extrapolate.tasks.prompt_passes import trunk_lengths

    builder = PromptBuilder(dataclasses.replace(task, trials=3), make_tokenizer())
    groups = prompt_groups(builder, 900, [0, 1, 2])
    ids = [torch.tensor([p.ids for p in prompts]) for _, prompts in groups]
    trunks = trunk_lengths(ids)
    assert trunks == sorted(trunks) and trunks[-1] < ids[0].shape[1]
    for i, trunk in enumerate(trunks):
        later = torch.cat(ids[i:])
        assert (later[:, :trunk] == later[:1, :trunk]).all()  # every later prompt begins with the trunk
        # the filler before the shallowest key still to come is shared
        assert trunk >= min(p.key_start for _, prompts in groups[i:] for p in prompts)
    assert trunks[0] == 0 and trunks[-1] > 0.9 * ids[0].shape[1]  # depth 0 first; depth 1.0 shares ~all


@pytest.mark.parametrize("encoding", ["rope", "alibi"])
def test_prompts_continuing_a_shared_prefix_get_the_logits_of_a_full_pass(task, monkeypatch, encoding):
    """The last-position logits greedy decoding starts from equal those of each prompt run whole."""
    from extrapolate.tasks import passkey as passkey_task
    from extrapolate.tasks import prompt_passes

    torch.manual_seed(0)
    builder = PromptBuilder(dataclasses.replace(task, trials=2, depths=(0.0, 0.5, 1.0)), ByteTokenizer())
    model = TransformerLM(ModelConfig(d_model=32, n_layers=2, n_heads=2, encoding=encoding, max_len=1024)).eval()
    seen = []
    greedy = prompt_passes.greedy_answers
    monkeypatch.setattr(
        prompt_passes, "greedy_answers", lambda m, c, last, *a: seen.append(last) or greedy(m, c, last, *a)
    )
    length = 600
    evaluate_passkey(model, builder, length, torch.device("cpu"))
    groups = passkey_task.prompt_groups(builder, length, [0, 1])
    assert len(seen) == len(groups) == 3
    for last, (_, prompts) in zip(seen, groups):
        with torch.no_grad():
            full = model(torch.tensor([p.ids for p in prompts]))[:, -1]  # (trials, V)
        torch.testing.assert_close(last, full, atol=1e-4, rtol=1e-4)


def test_numeric_keys_are_scored_by_the_first_integer_of_the_continuation(task):
    builder = PromptBuilder(task, ByteTokenizer())
    prompt = builder.trial(600, 0.0, 0)
    key = str(prompt.key)
    assert builder.is_correct(f" {key}.", prompt)
    assert builder.is_correct(f" the pass key. {key}", prompt)  # a restatement before the key still counts
    assert not builder.is_correct(f" {key[:-1]}", prompt)  # cut short
    assert not builder.is_correct(f" {key}7.", prompt)  # a longer number is another number
    assert not builder.is_correct(" 12. " + key, prompt)  # the first integer is the one scored
    # decoding has room for a 4-token restatement (SmolLM2's " the pass key.") and the whole answer
    assert builder.decode_tokens() == builder.answer_tokens() + 1 + 4


def test_word_keys_keep_the_first_words_rule_and_decode_window():
    builder = PromptBuilder(load_task("passkey-word"), ByteTokenizer())
    prompt = builder.trial(600, 0.5, 0)
    assert builder.is_correct(f" {prompt.key}.", prompt)
    assert not builder.is_correct(f" the pass word. {prompt.key}", prompt)
    assert builder.decode_tokens() == builder.answer_tokens() + 1


def test_a_stopped_cell_resumes_from_its_logged_depths_with_the_same_scores(task, monkeypatch, tmp_path):
    """Stopped after its first depth, a cell asked again runs only the other depths and scores exactly what an
    uninterrupted cell does (the shared prefix is still grown in the same steps)."""
    from extrapolate.tasks import prompt_passes
    from extrapolate.tasks.depth_log import DepthLog

    torch.manual_seed(0)
    builder = PromptBuilder(dataclasses.replace(task, trials=2, depths=(0.0, 0.5, 1.0)), ByteTokenizer())
    model = TransformerLM(ModelConfig(d_model=32, n_layers=2, n_heads=2, encoding="rope", max_len=1024)).eval()
    whole = evaluate_passkey(model, builder, 600, torch.device("cpu"))
    log = DepthLog(tmp_path / "log.json", "cell")
    greedy, calls, stop = prompt_passes.greedy_answers, [], [True]

    class Stopped(Exception):
        pass

    def stop_at_second_depth(*args):
        calls.append(1)
        if len(calls) == 2 and stop and stop.pop():
            raise Stopped
        return greedy(*args)

    monkeypatch.setattr(prompt_passes, "greedy_answers", stop_at_second_depth)
    with pytest.raises(Stopped):
        evaluate_passkey(model, builder, 600, torch.device("cpu"), log=log)
    assert len(log.finished()) == 1
    calls.clear()
    reported = []
    resumed = evaluate_passkey(
        model, builder, 600, torch.device("cpu"), log=log, on_depth=lambda *report: reported.append(report)
    )
    assert len(calls) == 2  # the logged depth is not asked again
    assert resumed == whole
    # every depth is reported in order, with its greedy score, the first one as read back from the log
    assert reported == [(c.depth, c.accuracy, i == 0) for i, c in enumerate(whole)]
    assert len(log.finished()) == 3


def test_a_depth_log_of_another_cell_or_damaged_is_ignored(tmp_path):
    from extrapolate.tasks.depth_log import DepthLog, clear_logs

    log = DepthLog.for_cell(tmp_path, "run1", "passkey-v2", 4096, 0, 1)
    log.record(2, 3.0, 4.0)
    assert log.finished() == {2: (3.0, 4.0)}
    assert DepthLog.for_cell(tmp_path, "run1", "passkey-v3", 4096, 0, 1).finished() == {}  # another task file
    assert DepthLog(log.path, "run1|passkey-v2|4096|rank 0 of 2").finished() == {}  # another process layout
    log.path.write_text("{not json")
    assert log.finished() == {}
    clear_logs(tmp_path, "run1")
    assert not (tmp_path / ".partial").exists()
