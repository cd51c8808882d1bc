"""Each method against its base model on the same prompts (`report/against_base.py`): paired to the plain run of
its base encoding on the same trained model, never to another seed's or another model's, and only on the same
prompts."""

import json

import pytest

from extrapolate.core.intervals import paired_difference
from extrapolate.core.significance import sign_flip_p
from extrapolate.report.against_base import base_differences, base_section
from extrapolate.report.table import COLUMNS, append_results


def add_run(folder, run, encoding, base, seed, scores, model="small", references=None, length=512):
    """A run's one retrieval row (the results table) and its prompts' answers (samples/)."""
    row = {c: None for c in COLUMNS} | {
        "run_id": run,
        "encoding": encoding,
        "base_encoding": base,
        "seed": seed,
        "model": model,
        "train_len": 256,
        "eval_len": length,
        "task": "passkey",
        "metric": "accuracy",
        "value": sum(scores) / len(scores),
        "depth": 0.5,
        "status": "ok",
        "protocol": "passkey-word-v2",
        "created_at": "2026-11-28T00:00:00",
    }
    append_results(folder, [row])
    lines = [
        {
            "task": "passkey",
            "protocol": "passkey-word-v2",
            "eval_len": length,
            "depth": 0.5,
            "index": i,
            "reference": (references or {}).get(i, f"key{i}"),
            "prediction": "",
            "score": s,
        }
        for i, s in enumerate(scores)
    ]
    (folder / "samples").mkdir(exist_ok=True)
    (folder / "samples" / f"{run}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_a_method_is_paired_with_its_base_on_the_same_model_and_seed_only(tmp_path):
    rope0, yarn0 = [1, 0, 0, 0, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1, 0, 1]
    add_run(tmp_path, "rope000000", "rope", "rope", 0, rope0)
    add_run(tmp_path, "rope111111", "rope", "rope", 1, [1] * 8)  # another seed: never yarn0's base
    add_run(tmp_path, "yarn000000", "yarn", "rope", 0, yarn0)
    add_run(tmp_path, "alibi00000", "alibi", "alibi", 0, [1] * 8)  # a plain encoding: no row of its own
    add_run(tmp_path, "yarnbig000", "yarn", "rope", 0, [1] * 8, model="base")  # no rope run on that model
    (row,) = base_differences(tmp_path).to_dict("records")
    assert (row["run_id"], row["base_run_id"], row["seed"], row["n"]) == ("yarn000000", "rope000000", 0, 8)
    assert (row["base_score"], row["score"]) == (2 / 8, 7 / 8)
    assert (row["difference"], row["low"], row["high"]) == pytest.approx(paired_difference(rope0, yarn0))
    assert row["p"] == sign_flip_p(rope0, yarn0) == 2 / 2**5  # five prompts moved, all one way
    assert row["p_holm"] == row["p"]
    section = "\n".join(base_section(tmp_path))
    assert (
        "| yarn @small | rope | 0 | `passkey-word-v2` | 512 | 8 | 25.0 | 87.5 | +62.5 [" in section
    )  # two models: labelled
    assert "| 0.062 | 0.062 |" in section


def test_other_prompts_are_not_paired_and_no_pair_means_no_section(tmp_path):
    add_run(tmp_path, "rope000000", "rope", "rope", 0, [0, 1])
    add_run(tmp_path, "yarn000000", "yarn", "rope", 0, [1, 1], references={0: "other"})
    assert base_differences(tmp_path).empty and base_section(tmp_path) == []
    assert base_section(tmp_path / "missing") == []


def test_every_method_cell_of_the_folder_is_one_holm_family(tmp_path):
    add_run(tmp_path, "rope000000", "rope", "rope", 0, [0] * 8)
    add_run(tmp_path, "yarn000000", "yarn", "rope", 0, [1] * 8)
    add_run(tmp_path, "ntk0000000", "ntk", "rope", 0, [0] * 8)
    frame = base_differences(tmp_path).set_index("run_id")
    assert frame.loc["yarn000000", "p"] == 2 / 2**8 and frame.loc["yarn000000", "p_holm"] == 2 * 2 / 2**8
    assert frame.loc["ntk0000000", "p"] == 1.0 == frame.loc["ntk0000000", "p_holm"]
