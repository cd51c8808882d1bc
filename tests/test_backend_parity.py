"""scripts/backend_parity.py: two folders' answers matched prompt by prompt (protocol, length, depth, index),
the share of identical predictions per cell and over all."""

import json

from tests.helpers import load_script


def write_samples(folder, predictions: dict[tuple, str]) -> None:
    (folder / "samples").mkdir(parents=True)
    lines = [
        {"protocol": p, "eval_len": n, "index": i, "reference": ["x"], "prediction": text, "score": float(text == "x")}
        for (p, n, i), text in predictions.items()
    ]
    (folder / "samples" / "run.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_matched_prompt_by_prompt_and_only_where_both_answered(tmp_path, capsys):
    write_samples(
        tmp_path / "a", {("vt", 1024, 0): "x", ("vt", 1024, 1): "y", ("vt", 2048, 0): "x", ("cwe", 1024, 0): "z"}
    )
    write_samples(tmp_path / "b", {("vt", 1024, 0): "x", ("vt", 1024, 1): "x", ("vt", 2048, 0): "x"})
    script = load_script("backend_parity")
    assert script.main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "p.csv")]) == 0
    table = script.compared(script.answers(tmp_path / "a"), script.answers(tmp_path / "b")).set_index(
        ["protocol", "eval_len"]
    )
    assert table.loc[("vt", 1024), "identical"] == 0.5 and table.loc[("vt", 1024), "prompts"] == 2
    assert table.loc[("vt", 1024), "score_b"] == 1.0 and table.loc[("vt", 1024), "score_a"] == 0.5
    assert table.loc[("vt", 2048), "identical"] == 1.0 and table.loc[("vt", 1024), "same_score"] == 0.5
    assert ("cwe", 1024) not in table.index  # the second folder never answered it
    assert "identical predictions: 66.7% of 3 prompts; scored alike: 66.7%" in capsys.readouterr().out
