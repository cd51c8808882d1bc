"""The published shapes every report checks, on synthetic results tables (no training)."""

import math

import pandas as pd

from extrapolate.report.shapes import published_shapes, shapes_section
from tests.test_reproduce import L, table


def verdicts(frame: pd.DataFrame) -> dict[str, tuple[bool, str]]:
    return {text: (holds, detail) for text, holds, detail in published_shapes(frame)}


def field_picture(longest: int = 8 * L) -> dict[tuple[str, int], float]:
    """NLLs with the published picture: sinusoidal and RoPE blow up past L, ALiBi and T5 flat, the scalings
    below RoPE past L, PI above RoPE at L."""
    lengths = [n for n in (L, 2 * L, 4 * L, 8 * L) if n <= longest]
    nll = {}
    for n in lengths:
        past = math.log2(n // L)
        nll |= {
            ("sinusoidal", n): 3.0 + past,
            ("rope", n): 3.0 + past,
            ("alibi", n): 3.0,
            ("t5", n): 3.0 + 0.01 * past,
            ("ntk", n): 3.0 + 0.2 * past,
            ("yarn", n): 3.0 + 0.1 * past,
            ("pi", n): 3.3,
        }
    return nll


def test_the_field_picture_holds_every_shape_at_the_longest_length():
    found = verdicts(table(field_picture()))
    assert len(found) == 7 and all(holds for holds, _ in found.values())
    assert found["RoPE degrades past L"][1] == f"rope ratio {math.exp(3):.3f} at {8 * L} (≥ 1.5)"
    assert found["PI (zero-shot) costs perplexity at L: RoPE is lower there"][1].endswith(f"at {L}")


def test_a_shape_that_does_not_hold_is_reported_with_its_numbers():
    nll = field_picture() | {("alibi", 8 * L): 3.0 + math.log(1.5)}  # ALiBi 1.5x at 8L: not flat
    found = verdicts(table(nll))
    holds, detail = found["ALiBi stays flat past L"]
    assert not holds and detail == f"alibi ratio 1.500 at {8 * L} (≤ 1.1)"
    assert "**no**" in "\n".join(shapes_section(table(nll)))


def test_shapes_read_at_the_longest_length_the_encodings_share():
    nll = {k: v for k, v in field_picture().items() if not (k[0] == "ntk" and k[1] == 8 * L)}
    found = verdicts(table(nll))
    assert found["NTK (zero-shot) beats RoPE past L"][1].endswith(f"at {4 * L}")
    assert found["YaRN (zero-shot) beats RoPE past L"][1].endswith(f"at {8 * L}")


def test_shapes_that_cannot_be_checked_are_left_out_not_failed():
    only_rope_at_L = table({("rope", L): 3.0, ("alibi", L): 3.0, ("alibi", 2 * L): 3.0})
    assert list(verdicts(only_rope_at_L)) == ["ALiBi stays flat past L"]
    failed = table(field_picture(), statuses={("rope", 8 * L): "oom"})  # RoPE out of memory at 8L
    assert verdicts(failed)["RoPE degrades past L"][1].endswith(f"at {4 * L} (≥ 1.5)")
    assert shapes_section(table({("learned", L): 3.0})) == []


def test_a_table_of_several_training_lengths_checks_no_shape():
    mixed = pd.concat([table(field_picture()), table(field_picture()).assign(train_len=2 * L)])
    assert published_shapes(mixed) == []
