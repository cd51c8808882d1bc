"""The chat template's effect measured prompt by prompt: `paired_difference` is the bootstrap of the mean
per-prompt difference, and `report.paired` pairs a folder's +chat cells with its plain ones by prompt."""

import json
import math

import pytest

from extrapolate.core.intervals import paired_difference
from extrapolate.core.significance import sign_flip_p
from extrapolate.report.paired import chat_differences, chat_section


def test_a_difference_is_never_zero_wide_and_none_is_exactly_none():
    # every prompt up by one: the shares' exact intervals at 3 of 3 and 0 of 3, combined (square-and-add)
    from extrapolate.core.intervals import proportion_interval

    mean, low, high = paired_difference([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    up_low, _ = proportion_interval(3, 3)
    _, down_high = proportion_interval(0, 3)
    assert (mean, high) == (1.0, 1.0) and low == pytest.approx(1 - math.hypot(1 - up_low, down_high))
    same = paired_difference([0.2, 0.6, 0.4], [0.2, 0.6, 0.4])  # nothing moved: a few still might
    assert same[0] == 0.0 and math.copysign(1, same[0]) == 1 and same[1] < 0 < same[2]  # never "-0.0"
    assert all(math.isnan(x) for x in paired_difference([1.0], [0.0]))
    with pytest.raises(ValueError, match="differ in number"):
        paired_difference([1.0, 0.0], [1.0])


def test_the_paired_interval_is_narrower_than_the_two_cells_overlap_where_prompts_move_together():
    plain = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0] * 4  # hard and easy prompts
    chat = [min(1.0, s + 0.2) for s in plain]  # every prompt a little better
    mean, low, high = paired_difference(plain, chat)
    assert mean == pytest.approx(sum(chat) / len(chat) - sum(plain) / len(plain))
    assert 0 < low <= mean <= high < 0.2  # the two means' own intervals (about ±0.2 each) overlap widely


def write_samples(folder, run, protocol, scores, references=None):
    folder.joinpath("samples").mkdir(parents=True, exist_ok=True)
    lines = [
        {
            "task": "ruler",
            "protocol": protocol,
            "eval_len": 1024,
            "index": i,
            "reference": (references or {}).get(i, [f"r{i}"]),
            "prediction": "",
            "score": s,
        }
        for i, s in enumerate(scores)
    ]
    folder.joinpath("samples", f"{run}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_cells_asked_both_ways_are_paired_by_prompt_and_others_left_out(tmp_path):
    write_samples(tmp_path, "aaaaaaaaaa", "fwe-v2", [0.0, 1 / 3, 0.0, 2 / 3])
    write_samples(tmp_path, "bbbbbbbbbb", "fwe-v2+chat", [1 / 3, 2 / 3, 1 / 3, 2 / 3])
    write_samples(tmp_path, "cccccccccc", "vt-v3", [0.0, 1.0])
    write_samples(tmp_path, "dddddddddd", "vt-v3+chat", [1.0, 1.0], references={0: ["other"]})  # other prompts
    write_samples(tmp_path, "eeeeeeeeee", "cwe-v3+chat", [1.0, 0.0])  # never asked plain
    (row,) = chat_differences(tmp_path).to_dict("records")
    assert (row["protocol"], row["run_id"], row["chat_run_id"], row["n"]) == ("fwe-v2", "aaaaaaaaaa", "bbbbbbbbbb", 4)
    assert row["difference"] == pytest.approx(0.25) and row["chat"] - row["plain"] == pytest.approx(0.25)
    assert (row["low"], row["high"]) == paired_difference([0.0, 1 / 3, 0.0, 2 / 3], [1 / 3, 2 / 3, 1 / 3, 2 / 3])[1:]
    assert row["p"] == sign_flip_p([0.0, 1 / 3, 0.0, 2 / 3], [1 / 3, 2 / 3, 1 / 3, 2 / 3]) == 2 / 2**3
    assert row["p_holm"] == row["p"]  # a family of one cell
    section = "\n".join(chat_section(tmp_path))
    assert "| `fwe-v2` | 1024 | 4 | 25.0 | 50.0 | +25.0 [" in section and "| 0.250 | 0.250 |" in section
    assert section.count("†") == 1 + (row["low"] > 0)  # the legend, and the row where its interval excludes 0


def test_a_folder_without_cells_asked_both_ways_has_no_section(tmp_path):
    assert chat_section(tmp_path) == []
    write_samples(tmp_path, "aaaaaaaaaa", "fwe-v2", [0.0, 1.0])
    assert chat_differences(tmp_path).empty and chat_section(tmp_path) == []


def test_every_cell_of_the_folder_is_one_family_for_holm(tmp_path):
    """Eight prompts all better under the template: p = 2/2^8 on its own, and twice that beside a second cell,
    which moved nothing (p = 1); only the adjusted value decides the ‡."""
    write_samples(tmp_path, "aaaaaaaaaa", "vt-v3", [0.0] * 8)
    write_samples(tmp_path, "bbbbbbbbbb", "vt-v3+chat", [1.0] * 8)
    write_samples(tmp_path, "cccccccccc", "cwe-v3", [0.5] * 8)
    write_samples(tmp_path, "dddddddddd", "cwe-v3+chat", [0.5] * 8)
    frame = chat_differences(tmp_path).set_index("protocol")
    assert frame.loc["vt-v3", "p"] == 2 / 2**8 and frame.loc["vt-v3", "p_holm"] == 2 * 2 / 2**8
    assert frame.loc["cwe-v3", "p"] == 1.0 == frame.loc["cwe-v3", "p_holm"]
    section = "\n".join(chat_section(tmp_path))
    assert section.count("‡") == 2  # the legend, and vt's row
    _, low, high = paired_difference([0.0] * 8, [1.0] * 8)
    row = f"| `vt-v3` | 1024 | 8 | 0.0 | 100.0 | +100.0 [{low * 100:+.1f}, {high * 100:+.1f}] † ‡ | 0.008 | 0.016 |"
    assert row in section
