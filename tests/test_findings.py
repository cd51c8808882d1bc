"""The README's findings are computed from the committed results (extrapolate/reproduce/findings/): the
generated blocks must equal what the results say, every finding must hold under its intervals, and a check
must fail when its numbers say otherwise."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from extrapolate.reproduce import findings


def test_the_readme_and_results_doc_say_what_the_committed_results_do(capsys):
    assert findings.main(["--check"]) == 0, capsys.readouterr().err


def test_every_finding_names_its_intervals_and_a_failing_one_says_why():
    for finding, outcome in findings.evaluated():
        assert "[" in outcome.numbers or "deterministic" in outcome.numbers or "one seed" in finding.statement
        assert outcome.holds or outcome.why, finding.name


def test_one_depth_of_every_depth_flips_the_finding_to_not_held(monkeypatch):
    """ "Held at each depth": dual chunk attention losing the passkey at one depth of one seed is not held, and
    the page says so rather than dropping the finding."""
    from extrapolate.core.intervals import proportion_interval

    original = findings.table
    table = original("showcase-training-free").copy()
    one = (table["encoding"] == "dual-chunk") & (table["eval_len"] == 2048) & (table["seed"] == 1)
    one &= (table["depth"] == 0.5) & (table["metric"] == "accuracy")
    assert one.sum() == 1
    table.loc[one, ["value", "ci_low", "ci_high"]] = [0.5, *proportion_interval(10, 20)]
    monkeypatch.setattr(findings.cells, "table", lambda f: table if f == "showcase-training-free" else original(f))
    outcome = findings.dual_chunk()
    assert not outcome.holds and outcome.why == "held at depth 0.5, seed 1"
    page = findings.block([(f, f.check()) for f in findings.FINDINGS if f.name == "dual-chunk"], "")
    assert "**not held** (held at depth 0.5, seed 1)" in page


def test_the_readme_front_page_fits_one_screen():
    text = (findings.ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## What it finds", 1)[1].split("\n## ", 1)[0]
    assert len(section.splitlines()) <= 30 and len(section) <= 2500
    assert 1 <= len(findings.HEADLINES) <= 6 and set(findings.HEADLINES) <= {f.name for f in findings.FINDINGS}
    for name, line in findings.HEADLINES.items():
        assert len(line) <= 200, name
        assert "seed" in line or "checkpoint" in line, f"{name}: its scale"
        assert f"docs/results.md#{name}" in section
    for term in ("*held*", "*flat*", "*family-wise*", "training length L", "*passkey*"):
        assert term in section, term


def test_a_finding_its_numbers_contradict_fails(monkeypatch):
    """YaRN starting as high as plain RoPE in one seed (as the README once claimed PI did) breaks the check over
    the seeds."""
    table = findings.table("finetune-seeds").copy()
    yarn_at_zero = (table["encoding"] == "yarn") & (table["eval_len"] == 1024) & (table["metric"] == "ppl")
    rope_at_zero = (table["encoding"] == "rope") & (table["eval_len"] == 1024) & (table["metric"] == "ppl")
    assert "YaRN starts below RoPE" not in findings.finetune_across_seeds().why  # as committed, it does
    rope = table.loc[rope_at_zero & (table["seed"] == 1) & table["finetune_steps"].isin([0]), "value"].iloc[0]
    table.loc[yarn_at_zero & (table["seed"] == 1) & table["finetune_steps"].isin([0]), "value"] = rope
    original = findings.table
    monkeypatch.setattr(
        findings.cells, "table", lambda folder: table if folder == "finetune-seeds" else original(folder)
    )
    outcome = findings.finetune_across_seeds()
    assert not outcome.holds and "YaRN starts below RoPE over the seeds" in outcome.why


def test_a_retrieval_claim_needs_its_interval_not_its_point_estimate():
    """80% of 20 prompts is not "holds at 80%": its interval reaches down to 58%."""
    cell = findings.greedy("smollm2-retrieval", "dynamic-ntk s=4", 16384)
    assert cell.mean == 0.8 and cell.n == 20 and not findings.held(cell) and not findings.lost(cell)


@pytest.mark.slow  # end to end, tens of seconds: run by the CI's slow step
def test_a_stale_block_is_found_and_rewritten(tmp_path, monkeypatch):
    for path in findings.TARGETS:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(findings.ROOT / path, tmp_path / path)
    shutil.copytree(findings.ROOT / "results", tmp_path / "results", ignore=shutil.ignore_patterns("*.png", "*.svg"))
    readme, results_doc = tmp_path / "README.md", tmp_path / "docs" / "results.md"
    assert "- **Held (not family-wise)**: Past L, sinusoidal's" in readme.read_text()  # a headline finding's verdict
    readme.write_text(
        readme.read_text().replace("- **Held (not family-wise)**: Past L, sinusoidal's", "- **Held**: Past L, RoPE's")
    )
    results_doc.write_text(results_doc.read_text().replace("RoPE 2.14×", "RoPE 1.14×"))
    monkeypatch.setattr(findings.cells, "ROOT", tmp_path)
    assert findings.main(["--check"]) == 1
    assert (
        findings.main(["--write"]) == 0 and "- **Held (not family-wise)**: Past L, sinusoidal's" in readme.read_text()
    )
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
    from extrapolate.core.intervals import proportion_interval

    low, high = proportion_interval(40, 50)  # 80% of 50 prompts: its lower bound below the bar of 80%
    assert f"| 80% [{low * 100:.0f}–{high * 100:.0f}]†" in line and low < 0.8


def test_the_resolution_numbers_docs_results_states_are_computed():
    """docs/results.md's "what the tables can and cannot resolve": each interval width and cell it quotes."""
    from extrapolate.core.intervals import proportion_interval

    text = " ".join((findings.ROOT / "docs" / "results.md").read_text().split())

    def half(n: int) -> int:  # the widest interval of n binary prompts (at 50%), in points
        low, high = proportion_interval(n / 2, n)
        return round((high - low) * 50)

    assert f"about ±{half(100)} points at 100 prompts (the three-seed folders), ±{half(25)} at 25" in text
    assert f"±{half(20)} at 20 (SmolLM2's retrieval lengths) and ±{half(5)} at 5" in text
    every = {n: proportion_interval(n, n)[0] for n in (20, 25, 100)}
    assert f"{every[20]:.0%} at 20 prompts, {every[25]:.0%} at 25, {every[100]:.0%} at 100" in text
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

    monkeypatch.setattr(findings.cells, "table", lambda folder: rows(("x s=2", "a", 16, 3.0), ("x s=4", "b", 32, 5.0)))
    assert findings.ppl("f", "x", 16) == 3.0 and findings.ppl("f", "x s=4", 32) == 5.0
    monkeypatch.setattr(findings.cells, "table", lambda folder: rows(("x s=2", "a", 16, 3.0), ("x s=4", "b", 16, 5.0)))
    with pytest.raises(LookupError, match="x s=2, x s=4"):
        findings.ppl("f", "x", 16)


def test_the_readme_shows_the_headline_findings_and_the_results_doc_all_of_them():
    readme = (findings.ROOT / "README.md").read_text()
    results_doc = (findings.ROOT / "docs" / "results.md").read_text()
    for finding in findings.FINDINGS:
        assert f"### `{finding.name}`\n\n{finding.statement}." in results_doc
        assert (f"(docs/results.md#{finding.name})" in readme) == (finding.name in findings.HEADLINES)
    held = sum(outcome.holds for _, outcome in findings.evaluated())
    assert f"{held} of {len(findings.FINDINGS)} findings held" in readme


def test_a_partial_credit_cell_reads_the_interval_at_its_mean():
    """vt-learned reads a partial-credit cell's upper bound at 2L ("lost"): the interval at its mean and n."""
    from extrapolate.core.intervals import proportion_interval

    for encoding in ("rope", "alibi"):
        cell = findings.scored("showcase-vt-learned", encoding, "vt-compact", 512)
        low, high = proportion_interval(cell.mean * cell.n, cell.n)
        assert (cell.low, cell.high) == (pytest.approx(low, abs=1e-6), pytest.approx(high, abs=1e-6))
        assert cell.high < findings.RULER_BAR


def test_the_flat_rule_is_quoted_with_the_interval_it_reads():
    """docs/results.md's example of a point inside the margin whose interval over the seeds is not."""
    nope = findings.AcrossSeeds.of("nope")
    low, high = findings.over_seeds(nope.rise.values())
    text = " ".join((findings.ROOT / "docs" / "results.md").read_text().split())
    assert f"NoPE at 8L over three seeds, {findings.ratios(nope.rise.values())}, reaches past 1.1" in text
    assert high > 1 + findings.PPL_MARGIN and not findings.flat_over(nope.rise.values())


def test_a_findings_p_value_is_the_level_where_its_intervals_stop_holding():
    """20 of 20 prompts against a bar of 80%: the exact interval's lower bound is (α/2)^(1/20), at the bar where
    α = 2 · 0.8^20; a count with no interval reads nothing that could fail; a finding not held is never
    adjusted into holding."""
    from extrapolate.reproduce.family import family_wise, p_value

    def all_right():
        return findings.Outcome(findings.held(findings.prompts_cell(1.0, 20)), "")

    assert p_value(all_right) == pytest.approx(2 * 0.8**20, rel=0.25)
    assert p_value(lambda: findings.Outcome(True, "a count")) is None
    assert p_value(lambda: findings.Outcome(findings.held(findings.prompts_cell(0.5, 20)), "")) == 1.0
    family = family_wise({"a": all_right, "b": all_right, "c": lambda: findings.Outcome(True, "")})
    assert family["a"].adjusted == pytest.approx(2 * family["a"].p) and family["c"].p is None
    assert family["a"].survives and not family["c"].survives


def test_every_findings_family_wise_line_is_on_its_page():
    text = (findings.ROOT / "docs" / "results.md").read_text()
    results = findings.evaluated()
    size = findings.family_size(results)
    # the family is the findings with a p-value: Holm's adjustment reproduces over those alone
    with_p = sorted(o.family.p for _, o in results if o.family is not None and o.family.p is not None)
    assert size == len(with_p) < len(results)
    for finding, outcome in results:
        line = findings.family_line(outcome, size)
        assert f"### `{finding.name}`" in text and f"- Family-wise: {line}" in text, finding.name


REPLICATIONS = {"showcase-seeds": "showcase-seeds-v2", "showcase-training-free": "showcase-training-free-v2"}


def replication_page(again: str) -> str:
    """results/<again>/replication.md without its hand-written head."""
    text = (findings.ROOT / "results" / again / "replication.md").read_text(encoding="utf-8")
    return text[text.index("Each finding's test") :]


@pytest.mark.parametrize("folder,again", REPLICATIONS.items())
def test_the_committed_replication_is_what_the_rows_say(folder, again):
    from extrapolate.reproduce.findings.pages import replication

    assert replication_page(again) == replication({folder: again})


def test_a_replication_reads_the_other_folder_and_only_its_complete_encodings():
    """Read from itself, every finding keeps its verdict; read from the re-measurement, a finding's numbers are
    that folder's, an encoding short of a seed is not tested, and afterwards the committed rows are read again."""
    from extrapolate.reproduce.findings.pages import replication

    itself = replication({"showcase-seeds": "showcase-seeds"})
    verdicts = [line.split(" | ")[1:3] for line in itself.splitlines() if line.startswith("| `")]
    assert len(verdicts) > 10 and all(committed == again for committed, again in verdicts), verdicts
    before = findings.perplexity_shapes().numbers
    again = replication({"showcase-seeds": "showcase-seeds-v2"})
    rows = {line.split(" | ")[0].strip("| `"): line for line in again.splitlines() if line.startswith("| `")}
    v2 = pd.read_csv(findings.ROOT / "results" / "showcase-seeds-v2" / "results.csv")
    missing = v2.groupby("encoding")["seed"].nunique().get("nope", 0) < 3
    assert ("not yet measured at every seed" in rows["nope-across-seeds"]) == missing
    assert before not in rows["perplexity-shapes"]
    assert findings.perplexity_shapes().numbers == before


def test_the_fine_tuning_prose_quotes_pis_lower_bound_over_the_seeds():
    """docs/results.md says why `finetune` is not held: PI's start over RoPE's, whose interval over the seeds
    reaches below the margin; the bound it quotes is the finding's own."""
    from extrapolate.reproduce.findings.cells import PPL_MARGIN, over_seeds, ppl_of_seed

    seeds = (0, 1, 2)
    pi = [ppl_of_seed("finetune-seeds", "pi", 1024, s) / ppl_of_seed("finetune-seeds", "rope", 1024, s) for s in seeds]
    low, _ = over_seeds(pi)
    assert low < 1 + PPL_MARGIN and not findings.finetune_across_seeds().holds
    text = " ".join((findings.ROOT / "docs" / "results.md").read_text(encoding="utf-8").split())
    assert f"PI's interval reaches down to {low:.2f}× RoPE's" in text


def test_the_re_measurement_notes_quote_nopes_rows():
    """showcase-seeds-v2's NOTES: NoPE's perplexity at 8L over L per seed, their interval, and its passkey at 8L."""
    from extrapolate.reproduce.findings.cells import over_seeds, ppl_of_seed

    folder, seeds = "showcase-seeds-v2", (0, 1, 2)
    rises = [ppl_of_seed(folder, "nope", 2048, s) / ppl_of_seed(folder, "nope", 256, s) for s in seeds]
    low, high = over_seeds(rises)
    text = " ".join((findings.ROOT / "results" / folder / "NOTES.md").read_text(encoding="utf-8").split())
    assert " / ".join(f"{r:.2f}×" for r in rises) + f", interval [{low:.2f}–{high:.2f}]" in text
    rows = pd.read_csv(findings.ROOT / "results" / folder / "results.csv")
    at = rows[(rows.encoding == "nope") & (rows.eval_len == 2048) & (rows.metric == "accuracy")]
    greedy = at.groupby("seed")["value"].mean()
    assert f"({greedy.min():.0%}–{greedy.max():.0%})".replace("%–", "–") in text
