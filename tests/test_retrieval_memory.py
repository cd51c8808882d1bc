"""Retrieval in bounded memory (--eval-memory): a depth's or a RULER batch's prompts run in micro-batches that fit
the budget, with the same answers, scores and rank margins. The passes are the same bits in any micro-batch; the
logits of the last position may differ in float32's last place, as a CPU's matrix product of 2 rows can round
otherwise than one of 5 (tested on the output head below), so answers are compared exactly and logits to 1e-6."""

import dataclasses

import pytest
import torch

from extrapolate.core.config import ModelConfig
from extrapolate.core.errors import UserError
from extrapolate.core.memory import EVAL_MEMORY_CAP, eval_memory, format_memory, parse_memory
from extrapolate.data.tokenizers import ByteTokenizer
from extrapolate.model import TransformerLM
from extrapolate.tasks import prompt_passes
from extrapolate.tasks.files import load_task
from extrapolate.tasks.passkey import evaluate_passkey
from extrapolate.tasks.prompt import PromptBuilder
from extrapolate.tasks.prompt_passes import micro_rows, prompt_bytes

from .test_ruler_tasks import builder_for, tiny_ruler_model

CPU = torch.device("cpu")


@pytest.mark.parametrize(
    "text, size",
    [("800M", 800 << 20), ("1.5G", 3 << 29), ("2GiB", 2 << 30), ("2gb", 2 << 30), ("4096K", 4 << 20), ("1T", 1 << 40)],
)
def test_sizes_parse_in_powers_of_1024(text, size):
    assert parse_memory(text) == size


@pytest.mark.parametrize("text", ["", "big", "1.5Q", "-1G", "12", "1..5G", "G"])
def test_a_size_that_is_not_one_or_below_a_mib_is_refused_in_one_line(text):
    with pytest.raises(UserError, match="--eval-memory") as refused:
        parse_memory(text)
    assert "\n" not in str(refused.value)


def test_the_default_budget_is_a_share_of_the_free_memory_capped_and_a_given_one_wins():
    default = eval_memory(CPU, None)
    assert (1 << 20) <= default <= EVAL_MEMORY_CAP == 512 << 20
    assert eval_memory(CPU, 123 << 20) == 123 << 20
    assert format_memory(3 << 29) == "1.50 GiB" and format_memory(512) == "512 B"


def test_micro_rows_fit_the_budget_and_shrink_with_the_length():
    model = TransformerLM(ModelConfig(d_model=64, n_layers=2, n_heads=4, max_len=4096))
    per_prompt = prompt_bytes(model.config, 32768, 32768)
    assert micro_rows(model, None, 20, 32768, 32768) == 20  # no budget: the group whole
    assert micro_rows(model, 3 * per_prompt + 1, 20, 32768, 32768) == 3
    assert micro_rows(model, per_prompt // 2, 20, 32768, 32768) == 1  # at least one
    assert micro_rows(model, 1 << 40, 20, 32768, 32768) == 20  # never more than the group
    rows = [micro_rows(model, 1 << 30, 20, n, n) for n in (4096, 8192, 16384, 32768, 131072)]
    assert rows == sorted(rows, reverse=True) and rows[0] == 20 and rows[-1] == 1
    # the cache grows with the whole length, the activations only with the suffix a pass runs
    assert prompt_bytes(model.config, 32768, 100) < per_prompt


def assert_same_cells(cells, expected):
    """Accuracies, rank scores and every prompt's answer equal; rank margins (4 decimals) to within 1e-3."""
    assert [(c.depth, c.accuracy, c.rank_accuracy, c.trials) for c in cells] == [
        (c.depth, c.accuracy, c.rank_accuracy, c.trials) for c in expected
    ]
    for cell, other in zip(cells, expected):
        margins = [r.pop("rank_margin") for r in cell.samples], [r.pop("rank_margin") for r in other.samples]
        assert cell.samples == other.samples
        assert max(abs(a - b) for a, b in zip(*margins)) < 1e-3


def test_the_passes_are_the_same_bits_in_any_micro_batch():
    """The prompt passes, the bulk of the work, are row for row the same computation in a batch of 2 or of 5."""
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(d_model=32, n_layers=2, n_heads=2, max_len=1024)).eval()
    tokens = torch.randint(0, 256, (5, 700))
    with torch.no_grad():
        trunk = model.new_cache()
        model.hidden_states(tokens[:1, :300], cache=trunk)

        def rows(part):
            return model.hidden_states(tokens[part, 300:], cache=[dict(layer) for layer in trunk])

        split = torch.cat([rows(slice(i, i + 2)) for i in range(0, 5, 2)])
        assert torch.equal(split, rows(slice(0, 5)))


def recorded_passes(monkeypatch):
    """Every greedy decoding's starting logits (b, V), in call order."""
    seen, greedy = [], prompt_passes.greedy_answers
    monkeypatch.setattr(
        prompt_passes,
        "greedy_answers",
        lambda m, c, last, *a, **k: seen.append(last.clone()) or greedy(m, c, last, *a, **k),
    )
    return seen


@pytest.mark.parametrize("encoding", ["rope", "fox"])
def test_a_depth_in_micro_batches_answers_as_in_one_pass(monkeypatch, encoding):
    torch.manual_seed(0)
    task = dataclasses.replace(load_task("passkey"), trials=5, depths=(0.0, 1.0))
    builder = PromptBuilder(task, ByteTokenizer())
    model = TransformerLM(ModelConfig(d_model=16, n_layers=2, n_heads=2, encoding=encoding, max_len=512)).eval()
    seen = recorded_passes(monkeypatch)
    whole = evaluate_passkey(model, builder, 400, CPU)
    whole_logits, seen[:] = torch.cat(seen), []
    budget = 2 * prompt_bytes(model.config, 400, 400)  # two whole prompts a pass: micro-batches of 2, 2, 1
    split = evaluate_passkey(model, builder, 400, CPU, memory=budget)
    # depth 0 runs its whole length; depth 1 continues a trunk of almost all of it, so more fit a pass
    sizes = [len(s) for s in seen]
    assert sizes[:3] == [2, 2, 1] and sum(sizes) == 10 and len(sizes) > 3
    torch.testing.assert_close(torch.cat(seen), whole_logits, atol=1e-6, rtol=0)
    assert_same_cells(split, whole)


def test_a_ruler_batch_in_micro_batches_scores_as_it_did_whole(monkeypatch):
    from extrapolate.tasks.ruler import kind as ruler_kind

    task = dataclasses.replace(load_task("niah_multikey_1"), samples=3, tokens_to_generate=6)
    builder = builder_for(task, ByteTokenizer())
    model = tiny_ruler_model()
    seen = recorded_passes(monkeypatch)
    whole = ruler_kind.evaluate_ruler(model, builder, 700, CPU)
    whole_logits, seen[:] = torch.cat(seen), []
    split = ruler_kind.evaluate_ruler(model, builder, 700, CPU, memory=prompt_bytes(model.config, 700, 700))
    assert all(len(s) == 1 for s in seen) and len(seen) == 3
    torch.testing.assert_close(torch.cat(seen), whole_logits, atol=1e-6, rtol=0)
    assert split == whole  # scores and every prompt's answer


def test_a_stopped_cell_in_micro_batches_resumes_with_the_same_scores(monkeypatch, tmp_path):
    from extrapolate.tasks.depth_log import DepthLog

    torch.manual_seed(0)
    task = dataclasses.replace(load_task("passkey"), trials=3, depths=(0.0, 0.5, 1.0))
    builder = PromptBuilder(task, ByteTokenizer())
    model = TransformerLM(ModelConfig(d_model=16, n_layers=2, n_heads=2, max_len=512)).eval()
    budget = prompt_bytes(model.config, 400, 400)  # one prompt a pass
    whole = evaluate_passkey(model, builder, 400, CPU)
    greedy, calls = prompt_passes.greedy_answers, []

    def stop_in_the_second_depth(*args, **kwargs):
        calls.append(1)
        if len(calls) == 5:  # the second prompt of the second depth
            raise KeyboardInterrupt
        return greedy(*args, **kwargs)

    log = DepthLog(tmp_path / "log.json", "cell")
    monkeypatch.setattr(prompt_passes, "greedy_answers", stop_in_the_second_depth)
    with pytest.raises(KeyboardInterrupt):
        evaluate_passkey(model, builder, 400, CPU, log=log, memory=budget)
    assert len(log.finished()) == 1  # a depth is logged whole or not at all
    monkeypatch.setattr(prompt_passes, "greedy_answers", greedy)
    assert_same_cells(evaluate_passkey(model, builder, 400, CPU, log=log, memory=budget), whole)


def test_a_bad_eval_memory_is_one_line_and_exit_2(tmp_path):
    from typer.testing import CliRunner

    from extrapolate.cli.app import app

    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", "--model", "tiny", "--eval-memory", "lots", "--out", str(out)])
    assert result.exit_code == 2
    assert "--eval-memory 'lots' is not a size" in result.output and not out.exists()


def recorded_calls(model, monkeypatch) -> list:
    """(rows, queries, keys) of every forward call `model` makes."""
    calls, forward = [], model.hidden_states

    def counted(tokens, cache=None, seq_len=None):
        offset = cache[0]["k"].shape[2] if cache and "k" in cache[0] else 0
        calls.append((tokens.shape[0], tokens.shape[1], offset + tokens.shape[1]))
        return forward(tokens, cache=cache, seq_len=seq_len)

    monkeypatch.setattr(model, "hidden_states", counted)
    return calls


@pytest.mark.parametrize("task_name", ["passkey", "passkey-word"])
def test_the_estimate_prices_the_calls_a_passkey_cell_makes(monkeypatch, task_name):
    from extrapolate.tasks.passkey import forward_calls

    torch.manual_seed(0)
    task = dataclasses.replace(load_task(task_name), trials=2, depths=(0.0, 0.5, 1.0))
    builder = PromptBuilder(task, ByteTokenizer())
    model = TransformerLM(ModelConfig(d_model=16, n_layers=1, n_heads=2, max_len=512)).eval()
    calls = recorded_calls(model, monkeypatch)
    evaluate_passkey(model, builder, 400, CPU)
    priced = [call[:3] for call in forward_calls(builder, 400)]
    candidates = 1 + task.distractors  # the rank score's calls: rows of candidate answers, their tokens bounded

    def split(found):
        return sorted(c for c in found if c[0] != candidates), sorted(c for c in found if c[0] == candidates)

    (made, scored), (planned, bounded) = split(calls), split(priced)
    assert made == planned  # the trunk, each depth's pass and every decoding step, exactly
    assert len(scored) == len(bounded) == task.trials * len(task.depths)
    assert all(q <= bounded[0][1] for _, q, _ in scored)  # the answer's token bound, which the estimate prices


def test_the_cost_model_prices_attention_by_its_pairs():
    from extrapolate.run.eval_cost import CostModel

    cost = CostModel(call=0.0, token=1.0, pair=0.01, head=0.5)
    assert cost.seconds([(1, 100, 100, 0)]) == pytest.approx(100 + 100 * 50 * 0.01)  # causal: q·(k − q/2)
    assert cost.seconds([(3, 1, 1000, 1)]) == pytest.approx(3 * (1 + 999.5 * 0.01 + 0.5))  # a decoding step
    window = [(1, 4096, 4096, 4096)]
    assert cost.seconds(window) > 16 * cost.seconds([(1, 256, 256, 256)])  # one long window costs more than tokens


def test_the_memory_docs_quote_is_the_committed_measurement():
    from pathlib import Path

    import pandas as pd

    root = Path(__file__).resolve().parents[1]
    rows = pd.read_csv(root / "results" / "bench" / "retrieval-memory.csv")
    before, after, longest = rows.peak_rss_gb
    text = " ".join((root / "docs" / "performance.md").read_text().split())
    assert f"{before:.2f} GB peak resident memory with every prompt of a depth in one pass, {after:.2f} GB" in text
    assert after <= 1.5 and rows.answers_same.iloc[1] == "100/100" and "every one of the 100 answers" in text
    # the small model's grid at 131072 (one prompt a depth: one prompt alone is over the default budget)
    assert rows.grid.iloc[2] == "131072" and "--model small" in rows.command.iloc[2] and longest < 24
    assert f"At 131072 the `small` model's grid peaked at {longest:.2f} GB ({rows.minutes.iloc[2]:g} min" in text
