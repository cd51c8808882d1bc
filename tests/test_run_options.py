"""Two runs of one encoding that measured the same cell are told apart by their options where the run records
give them ("string [attention_factor=1]"), by run id otherwise, and a label reads back to its encoding."""

import json

import pandas as pd

from extrapolate.report.labels import encoding_of, label_variants, split_label
from extrapolate.report.run_options import run_options, with_options


def record(folder, run_id, encoding, options=()):
    runs = folder / "runs"
    runs.mkdir(exist_ok=True)
    body = {"run_id": run_id, "request": {"encoding_options": [list(o) for o in options]}, "encoding": encoding}
    (runs / f"{run_id}.json").write_text(json.dumps(body))


def rows(*runs):
    cell = {"seed": 0, "task": "perplexity", "metric": "ppl", "eval_len": 512, "depth": None, "protocol": "full"}
    return pd.DataFrame([{"run_id": run, "encoding": name, "value": 1.0, **cell} for run, name in runs])


def test_two_runs_of_one_cell_are_named_by_their_options(tmp_path):
    record(tmp_path, "aaaaaa1111", {"name": "string", "attention_factor": 1.069})
    record(tmp_path, "bbbbbb2222", {"name": "string", "attention_factor": 1.0}, [("attention_factor", 1.0)])
    labels = label_variants(with_options(rows(("aaaaaa1111", "string"), ("bbbbbb2222", "string")), tmp_path))
    assert list(labels["encoding"]) == ["string", "string [attention_factor=1]"]
    assert [encoding_of(label) for label in labels["encoding"]] == ["string", "string"]
    assert list(split_label(labels["encoding"])[0]) == ["string", "string"]


def test_a_record_made_before_strings_attention_factor_ran_without_it(tmp_path):
    """A STRING record without the factor in its resolved encoding computed it as 1 (it predates the option)."""
    record(tmp_path, "cccccc3333", {"name": "string", "shift": 84})
    record(tmp_path, "dddddd4444", {"name": "string", "shift": 84, "attention_factor": 1.069})
    assert run_options(tmp_path) == {"cccccc3333": "attention_factor=1"}


def test_runs_without_telling_options_keep_their_run_ids(tmp_path):
    """Options too long for a label (LongRoPE's factor lists), or no records at all: the run id tells them apart."""
    long_list = [("long_factor", [1.0 + i / 7 for i in range(16)])]
    record(tmp_path, "eeeeee5555", {"name": "longrope"}, long_list)
    record(tmp_path, "ffffff6666", {"name": "longrope"})
    labels = label_variants(with_options(rows(("eeeeee5555", "longrope"), ("ffffff6666", "longrope")), tmp_path))
    assert list(labels["encoding"]) == ["longrope #eeeeee", "longrope #ffffff"]
    alone = label_variants(with_options(rows(("eeeeee5555", "longrope")), tmp_path / "none"))
    assert list(alone["encoding"]) == ["longrope"]  # one run of the cell: nothing to tell apart


def trained(folder, run_id, encoding, **request):
    runs = folder / "runs"
    runs.mkdir(exist_ok=True)
    body = {"run_id": run_id, "request": {"encoding_options": [], **request}, "encoding": {"name": encoding}}
    (runs / f"{run_id}.json").write_text(json.dumps(body))


def test_two_trainings_of_one_encoding_are_named_by_the_setting_that_differs(tmp_path):
    """The same encoding trained for 1200 and 2400 steps (the seed and evaluation alike): "rope [steps=2400]"."""
    trained(tmp_path, "aaaaaa1111", "rope", steps=1200, lr=0.003, tasks=["perplexity"], seed=0)
    trained(tmp_path, "bbbbbb2222", "rope", steps=2400, lr=0.003, tasks=["perplexity", "qa1"], seed=0)
    labels = label_variants(with_options(rows(("aaaaaa1111", "rope"), ("bbbbbb2222", "rope")), tmp_path))
    assert list(labels["encoding"]) == ["rope [steps=1200]", "rope [steps=2400]"]
    assert list(split_label(labels["encoding"])[0]) == ["rope", "rope"]


def test_a_setting_an_older_record_lacks_is_no_difference(tmp_path):
    """A record made before a setting existed ran with its default: only the settings both name can differ."""
    trained(tmp_path, "cccccc3333", "yarn", steps=1200)
    trained(tmp_path, "dddddd4444", "yarn", steps=1200, curriculum="none")
    trained(tmp_path, "eeeeee5555", "alibi", steps=1200, train_tasks=["qa1"])
    assert run_options(tmp_path) == {}
