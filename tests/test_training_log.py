"""training.csv: the probes taken during training, in the old and the new format, and the report's lines on
held-out perplexity during training."""

import math

import pandas as pd
import pytest

from extrapolate.report.training_log import (
    TRAINING_COLUMNS,
    append_training,
    heldout_section,
    load_training,
    probe_rows,
)

COMMON = {"run_id": "r", "encoding": "rope", "seed": 0, "train_len": 64}


def test_probe_rows_read_both_formats_and_keep_missing_measures_empty():
    losses = [5.0, 4.0, 3.0, 2.5]
    old = probe_rows({"losses": losses, "probes": [[2, 0.5]]}, COMMON)  # before the held-out probe
    new = probe_rows({"losses": losses, "probes": [[2, None, 3.25], [4, 1.0, 3.0]]}, COMMON)
    assert old[0]["retrieval_accuracy"] == 0.5 and math.isnan(old[0]["heldout_loss"]) and old[0]["loss"] == 4.0
    assert math.isnan(new[0]["retrieval_accuracy"]) and new[0]["heldout_loss"] == 3.25
    assert [r["loss"] for r in new] == [4.0, 2.5]


def test_a_model_without_retrieval_probes_is_a_valid_training_log(tmp_path):
    append_training(tmp_path, probe_rows({"losses": [4.0, 3.0], "probes": [[1, None, 4.5], [2, None, 4.0]]}, COMMON))
    log = load_training(tmp_path)
    assert log["heldout_loss"].tolist() == [4.5, 4.0] and log["retrieval_accuracy"].isna().all()


def curve(encoding: str, nll: list[float], seed: int = 0) -> list[dict]:
    return [
        {
            **COMMON,
            "encoding": encoding,
            "seed": seed,
            "step": 10 * (i + 1),
            "loss": v,
            "retrieval_accuracy": 0.0,
            "heldout_loss": v,
        }
        for i, v in enumerate(nll)
    ]


def test_held_out_perplexity_that_rises_at_the_end_is_called_memorising():
    training = pd.DataFrame(
        curve("rope", [5.0, 4.0, 3.0, 3.0]) + curve("alibi", [5.0, 3.0, 3.2]) + curve("yarn", [5.0, 4.0, 3.0, 3.0]),
        columns=TRAINING_COLUMNS,
    )
    lines = heldout_section(training, {"rope": "rope", "alibi": "alibi", "yarn": "rope"})
    rows = {line.split(" | ")[0].strip("| "): line for line in lines if line.startswith("| ") and "step" in line}
    assert set(rows) == {"rope", "alibi"}  # yarn evaluates the RoPE model: RoPE's row is its
    assert rows["rope"].endswith("fell through training |") and f"{math.exp(3):.2f} (step 30)" in rows["rope"]
    assert rows["alibi"].endswith("rose at the end (memorising) |")


def test_no_held_out_probes_no_section():
    old = pd.DataFrame(curve("rope", [5.0, 4.0]), columns=TRAINING_COLUMNS).assign(heldout_loss=float("nan"))
    assert heldout_section(old, {}) == [] and heldout_section(old.drop(columns="heldout_loss"), {}) == []


@pytest.mark.parametrize("length", [2, 16, 300])
def test_the_held_out_probe_in_batches_is_the_mean_loss_of_its_windows_one_by_one(length):
    """Short windows are scored many to a forward; the loss is still every window's tokens' mean."""
    import torch

    from extrapolate.core.config import PRESETS, ModelConfig
    from extrapolate.model import TransformerLM
    from extrapolate.run.evaluate import heldout_loss, heldout_windows

    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(**PRESETS["tiny"], encoding="rope", max_len=length)).eval()
    documents = [torch.randint(0, model.config.vocab_size, (n,)) for n in (1000, 20000)]
    windows = heldout_windows(documents, length)  # (W, L + 1)
    with torch.no_grad():
        one_by_one = torch.cat([model.token_nll(w[None, :-1], w[None, 1:]).reshape(-1) for w in windows])
        assert heldout_loss(model, windows) == pytest.approx(float(one_by_one.double().mean()), rel=1e-5)


@pytest.mark.parametrize("every,total", [(1, 1), (1, 7), (3, 9), (3, 10), (40, 1200), (7, 5)])
def test_the_probe_count_is_the_steps_that_take_one(every, total):
    """The estimate counts probes by arithmetic (a dry run of 10^12 steps must not walk them): the same count
    as the steps whose `due` is true."""
    from extrapolate.training.train import Probe

    probe = Probe(every)
    assert probe.count(total) == sum(probe.due(step, total) for step in range(1, total + 1))
