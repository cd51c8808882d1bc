"""The published shapes every report checks, on synthetic results tables (no training): each verdict from the
interval of its ratio (over seeds, or paired by document for one seed), never from a point value."""

import math

import pandas as pd

from extrapolate.report.shapes import HELD, NOT_HELD, OPEN, published_shapes, shapes_section
from tests.test_reproduce import L, table


def verdicts(frame: pd.DataFrame, documents=None) -> dict[str, tuple[str, str]]:
    return {text: (verdict, detail) for text, verdict, detail in published_shapes(frame, documents)}


def field_picture(longest: int = 8 * L, jitter: float = 0.0) -> dict[tuple[str, int], float]:
    """NLLs with the published picture: sinusoidal and RoPE blow up past L, ALiBi and T5 flat, the scalings
    below RoPE past L, PI above RoPE at L (`jitter`: a seed's small offset past L)."""
    lengths = [n for n in (L, 2 * L, 4 * L, 8 * L) if n <= longest]
    nll = {}
    for n in lengths:
        past = math.log2(n // L)
        shift = jitter * (n > L)
        nll |= {
            ("sinusoidal", n): 3.0 + past + shift,
            ("rope", n): 3.0 + past + shift,
            ("alibi", n): 3.0 + shift / 10,
            ("t5", n): 3.0 + 0.01 * past + shift / 10,
            ("ntk", n): 3.0 + 0.2 * past + shift,
            ("yarn", n): 3.0 + 0.1 * past + shift,
            ("pi", n): 3.3 + shift,
        }
    return nll


def seeds(pictures) -> pd.DataFrame:
    return pd.concat([table(nll, seed=s) for s, nll in enumerate(pictures)], ignore_index=True)


THREE = seeds([field_picture(jitter=j) for j in (0.0, 0.02, -0.02)])


def test_the_field_picture_holds_every_shape_over_three_seeds():
    found = verdicts(THREE)
    assert len(found) == 7 and all(verdict == HELD for verdict, _ in found.values()), found
    detail = found["RoPE degrades past L"][1]
    assert detail.startswith(f"rope / itself at {L} 20.0") and detail.endswith("(≥ 1.5; 3 seeds)")
    assert found["PI (zero-shot) costs perplexity at L: RoPE is lower there"][1].split(" at ")[1].startswith(f"{L} ")


def test_a_shape_that_does_not_hold_is_reported_with_its_interval():
    tilted = [field_picture(jitter=j) | {("alibi", 8 * L): 3.0 + math.log(1.5) + j} for j in (0.0, 0.02, -0.02)]
    found = verdicts(seeds(tilted))
    verdict, detail = found["ALiBi stays flat past L"]
    assert verdict == NOT_HELD and detail.startswith(f"alibi / itself at {L} 1.500 [")
    assert "**not held**" in "\n".join(shapes_section(seeds(tilted)))


def test_one_seed_without_documents_resolves_nothing_and_a_straddling_interval_neither():
    found = verdicts(table(field_picture()))
    assert {verdict for verdict, _ in found.values()} == {OPEN}
    assert found["RoPE degrades past L"][1].endswith("(one seed, no interval)")
    # three seeds whose ratios at 8L straddle 1.5 (1.3, 1.5, 1.7): not resolved, whatever the mean
    straddle = [field_picture() | {("rope", 8 * L): 3.0 + math.log(r)} for r in (1.3, 1.5, 1.7)]
    assert verdicts(seeds(straddle))["RoPE degrades past L"][0] == OPEN


def test_one_seed_with_its_documents_is_read_paired_by_document():
    picture = table(field_picture())
    documents = []
    for encoding, length in (("rope", L), ("rope", 8 * L)):
        nll = math.log(
            picture[
                (picture.encoding == encoding) & (picture.eval_len == length) & (picture.metric == "ppl")
            ].value.iloc[0]
        )
        for index, wobble in enumerate((-0.05, 0.0, 0.05)):  # three documents, each rising alike
            documents.append(
                {
                    "run_id": "r0",
                    "protocol": "p",
                    "eval_len": length,
                    "index": index,
                    "nll_sum": (nll + wobble) * 100,
                    "tokens": 100,
                }
            )
    found = verdicts(picture, pd.DataFrame(documents))
    verdict, detail = found["RoPE degrades past L"]
    assert verdict == HELD and detail.endswith("(≥ 1.5; one seed)")


def test_shapes_read_at_the_longest_length_the_encodings_share():
    pictures = [{k: v for k, v in field_picture(jitter=j).items() if k != ("ntk", 8 * L)} for j in (0.0, 0.02, -0.02)]
    found = verdicts(seeds(pictures))
    assert f" at {4 * L} " in found["NTK (zero-shot) beats RoPE past L"][1]
    assert f" at {8 * L} " in found["YaRN (zero-shot) beats RoPE past L"][1]


def test_shapes_that_cannot_be_checked_are_left_out_not_failed():
    only_rope_at_L = table({("rope", L): 3.0, ("alibi", L): 3.0, ("alibi", 2 * L): 3.0})
    assert list(verdicts(only_rope_at_L)) == ["ALiBi stays flat past L"]
    assert shapes_section(table({("learned", L): 3.0})) == []


def test_a_table_of_several_training_lengths_checks_no_shape():
    mixed = pd.concat([table(field_picture()), table(field_picture()).assign(train_len=2 * L)])
    assert published_shapes(mixed) == []
