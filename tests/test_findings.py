"""The README's findings are computed from the committed results (extrapolate/reproduce/findings.py): the
generated blocks must equal what the results say, every finding must hold under its intervals, and a check
must fail when its numbers say otherwise."""

from __future__ import annotations

import shutil

import pandas as pd

from extrapolate.reproduce import findings


def test_the_readme_and_results_doc_say_what_the_committed_results_do(capsys):
    assert findings.main(["--check"]) == 0, capsys.readouterr().err


def test_every_finding_holds_and_names_its_intervals():
    for finding, outcome in findings.evaluated():
        assert outcome.holds, f"{finding.name}: {outcome.why}"
        assert "[" in outcome.numbers or "deterministic" in outcome.numbers or "one seed" in finding.statement


def test_a_finding_its_numbers_contradict_fails(monkeypatch):
    """PI starting closer than plain RoPE (as the README once claimed of every scaling) breaks the check."""
    table = findings.table("finetune-seeds").copy()
    pi_at_zero = (table["encoding"] == "pi") & (table["eval_len"] == 1024) & (table["metric"] == "ppl")
    table.loc[pi_at_zero & (table["seed"] == 1), "value"] = 60.0
    original = findings.table
    monkeypatch.setattr(findings, "table", lambda folder: table if folder == "finetune-seeds" else original(folder))
    outcome = findings.finetune_across_seeds()
    assert not outcome.holds and "PI starts above RoPE, seed 1" in outcome.why and "seed 0" not in outcome.why


def test_a_retrieval_claim_needs_its_interval_not_its_point_estimate():
    """80% of 20 prompts is not "holds at 80%": its interval reaches down to 58%."""
    cell = findings.greedy("smollm2-retrieval", "dynamic-ntk s=4", 16384)
    assert cell.mean == 0.8 and cell.n == 20 and not findings.held(cell) and not findings.lost(cell)


def test_a_stale_block_is_found_and_rewritten(tmp_path, monkeypatch):
    for path in findings.TARGETS:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(findings.ROOT / path, tmp_path / path)
    shutil.copytree(findings.ROOT / "results", tmp_path / "results", ignore=shutil.ignore_patterns("*.png", "*.svg"))
    readme, results_doc = tmp_path / "README.md", tmp_path / "docs" / "results.md"
    assert "greedy 36% [27–46] / 97% [92–99]" in readme.read_text()  # a headline finding's numbers
    readme.write_text(readme.read_text().replace("greedy 36% [27–46]", "greedy 66% [27–46]"))
    results_doc.write_text(results_doc.read_text().replace("RoPE 2.14×", "RoPE 1.14×"))
    monkeypatch.setattr(findings, "ROOT", tmp_path)
    assert findings.main(["--check"]) == 1
    assert findings.main(["--write"]) == 0 and "greedy 36% [27–46]" in readme.read_text()
    assert "RoPE 2.14×" in results_doc.read_text()
    assert findings.main(["--check"]) == 0
    assert isinstance(findings.table("showcase"), pd.DataFrame)


def test_the_report_marks_a_length_whose_interval_straddles_the_threshold():
    """llama3 at 2L: 80% of 50 prompts retrieves by the point estimate, but its interval reaches down to 67%."""
    from extrapolate.report.pages import aggregate, with_unrecorded
    from extrapolate.report.retrieval import Rule, base_encodings, retrieval_matrix, verdicts

    table = with_unrecorded(findings.table("showcase"))
    agg = aggregate(table)
    said = verdicts(agg, base_encodings(table), Rule())
    line = next(row for row in retrieval_matrix(agg, "accuracy", said, table, 0.8).splitlines() if "| llama3 |" in row)
    assert "| 80% [67–89]† |" in line and "| 98% [90–100] |" in line


def test_the_resolution_numbers_docs_results_states_are_computed():
    """docs/results.md's "what the tables can and cannot resolve": each interval width and cell it quotes."""
    from extrapolate.core.intervals import proportion_interval

    text = " ".join((findings.ROOT / "docs" / "results.md").read_text().split())

    def half(n: int) -> int:  # the widest interval of n binary prompts (at 50%), in points
        low, high = proportion_interval(n / 2, n)
        return round((high - low) * 50)

    assert f"interval is ±{half(50)} points at 50 prompts (the showcase's `passkey-word` version 1)" in text
    assert f"±{half(100)} at 100 (version 2, the three-seed folders), ±{half(25)} at 25" in text
    assert f"±{half(20)} at 20 (SmolLM2's retrieval lengths) and ±{half(5)} at 5" in text
    straddling = [findings.ruler("smollm2-ruler-25", t, 1024) for t in ("niah_single_3", "niah_multikey_1")]
    assert "(`niah_single_3` and `niah_multikey_1` at 1024, 25 prompts)" in text
    assert all(c.low < findings.RULER_BAR <= c.high for c in straddling)  # each straddles the bar: not resolved
    alibi, t5 = findings.greedy("showcase", "alibi", 1024), findings.greedy("showcase", "t5", 1024)
    assert f"ALiBi's {alibi.mean:.0%} against T5's {t5.mean:.0%} at 4L" in text and alibi.high >= t5.low  # unresolved
    single = findings.pool([findings.ruler("smollm2-ruler", "niah_single_1", n) for n in (1024, 2048, 4096, 8192)])
    multi = findings.pool([findings.ruler("smollm2-ruler", "niah_multikey_2", n) for n in (1024, 2048, 4096, 8192)])
    assert f"`niah_single_1` scores {single} and `niah_multikey_2` {multi}" in text


def test_a_perplexity_is_found_when_its_label_grew_and_never_averaged_over_two_runs(monkeypatch):
    """A second run of an encoding at another length and factor makes the report label "x" "x s=2": the one
    run at the asked length is meant; where two runs measured that length, the lookup is refused."""
    import pandas as pd
    import pytest

    from extrapolate.reproduce import findings

    def rows(*runs):
        return pd.DataFrame(
            [
                {
                    "encoding": label,
                    "run_id": run,
                    "eval_len": n,
                    "metric": "ppl",
                    "task": "perplexity",
                    "status": "ok",
                    "value": v,
                }
                for label, run, n, v in runs
            ]
        )

    monkeypatch.setattr(findings, "table", lambda folder: rows(("x s=2", "a", 16, 3.0), ("x s=4", "b", 32, 5.0)))
    assert findings.ppl("f", "x", 16) == 3.0 and findings.ppl("f", "x s=4", 32) == 5.0
    monkeypatch.setattr(findings, "table", lambda folder: rows(("x s=2", "a", 16, 3.0), ("x s=4", "b", 16, 5.0)))
    with pytest.raises(LookupError, match="x s=2, x s=4"):
        findings.ppl("f", "x", 16)


def test_the_readme_shows_the_headline_findings_and_the_results_doc_all_of_them():
    names = [f.name for f in findings.FINDINGS]
    assert set(findings.HEADLINE) <= set(names)
    readme = (findings.ROOT / "README.md").read_text()
    results_doc = (findings.ROOT / "docs" / "results.md").read_text()
    for finding in findings.FINDINGS:
        assert f"| {finding.statement} |" in results_doc
        assert (f"| {finding.statement} |" in readme) == (finding.name in findings.HEADLINE)
    assert f"All {len(names)} findings" in readme


def test_the_partial_credit_verdicts_hold_with_wilsons_interval_at_the_mean_too():
    """vt-learned reads the bootstrap's upper bound at 2L ("lost"): Wilson's interval at the same mean and n,
    the widest a score in [0, 1] allows, gives the same verdict, so the finding does not rest on the
    bootstrap's narrowness near 0."""
    from extrapolate.core.intervals import proportion_interval

    for encoding in ("rope", "alibi"):
        cell = findings.scored("showcase-vt-learned", encoding, "vt-compact", 512)
        low, high = proportion_interval(cell.mean * cell.n, cell.n)
        assert cell.high < findings.RULER_BAR and high < findings.RULER_BAR and low <= cell.mean <= high
