"""A report's set-up lines (report/pages.py): what perplexity scored at each length, and how the retrieval and
RULER prompts were given."""

import pandas as pd


def test_the_setup_says_what_each_length_scored_and_how_prompts_were_given():
    from extrapolate.report.setup import prompt_format, scored_lines

    ppl = {"task": "perplexity", "metric": "ppl", "status": "ok", "protocol": "full-window"}
    table = pd.DataFrame(
        [
            {**ppl, "eval_len": 256, "n": 4.0, "n_tokens": 1024, "ci_method": "bootstrap-documents"},
            {**ppl, "eval_len": 256, "n": 2.0, "n_tokens": 512, "ci_method": "bootstrap-documents"},
            {**ppl, "eval_len": 512, "n": float("nan"), "n_tokens": 2048, "ci_method": None},  # before n was kept
            {"task": "passkey", "metric": "accuracy", "status": "ok", "protocol": "passkey-word-v2+chat"},
        ]
    )
    (line,) = scored_lines(table)
    assert line.endswith("256: 2–4 documents, 512–1,024 tokens; 512: 2,048 tokens (documents not recorded)")
    assert prompt_format(table) == ["- prompts: each wrapped in the model's chat template (protocols marked `+chat`)"]
    plain = table.assign(protocol="passkey-word-v2")
    assert prompt_format(plain) == ["- prompts: plain text, no chat template"]
