"""Claims about perplexity curves, and the published shapes every report checks.

A claim compares mean perplexities of the results table: an encoding's ratio to its own value at L (at least
or at most a bound), or one encoding below another at a length. Reproduce suites state theirs at a fixed
multiple of L; a report checks the shapes the literature reports for the classic encodings at the longest
length its table measured for them, so a sweep at any scale says at once whether it shows the field's picture.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from extrapolate.report.table import of_kind
from extrapolate.tasks.perplexity import PERPLEXITY

CLAIM_KINDS = ("ratio_at_least", "ratio_at_most", "lower_than")


@dataclass(frozen=True)
class Claim:
    text: str
    kind: str  # one of CLAIM_KINDS
    encoding: str
    times_L: int  # the length compared, as a multiple of L; 0: the longest length measured (reports)
    value: float | None = None  # the bound of a ratio claim
    other: str | None = None  # the encoding a lower_than claim compares with


# What the papers show for models trained at L and evaluated past it, zero-shot: the sinusoidal Transformer
# and RoPE degrade and ALiBi and T5's bias stay flat (Press et al. 2022, fig. 1 and table 2); NTK-aware and
# YaRN scalings of RoPE beat plain RoPE past L, while PI's compression costs perplexity at L itself (Chen et
# al. 2023, Peng et al. 2023). Their bounds are the findings' (DEGRADES, FLAT): what a report's verdict reads.
DEGRADES = 1.5  # "degrades": at least 1.5× its value at L, the findings' bar (reproduce/findings/cells.py)
FLAT = 1.1  # "flat": within 10% of it
PUBLISHED_SHAPES = (
    Claim("sinusoidal degrades past L", "ratio_at_least", "sinusoidal", 0, value=DEGRADES),
    Claim("RoPE degrades past L", "ratio_at_least", "rope", 0, value=DEGRADES),
    Claim("ALiBi stays flat past L", "ratio_at_most", "alibi", 0, value=FLAT),
    Claim("T5's bias stays flat past L", "ratio_at_most", "t5", 0, value=FLAT),
    Claim("NTK (zero-shot) beats RoPE past L", "lower_than", "ntk", 0, other="rope"),
    Claim("YaRN (zero-shot) beats RoPE past L", "lower_than", "yarn", 0, other="rope"),
    Claim("PI (zero-shot) costs perplexity at L: RoPE is lower there", "lower_than", "rope", 1, other="pi"),
)


def perplexity_means(table: pd.DataFrame) -> pd.Series:
    """Mean perplexity over seeds per (encoding, eval_len), ok rows of a raw results table only."""
    ppl = table[of_kind(table, PERPLEXITY) & (table["metric"] == "ppl") & (table["status"] == "ok")]
    return ppl.groupby(["encoding", "eval_len"])["value"].mean()


def claim_holds(claim: Claim, means: pd.Series, L: int, length: int | None = None) -> tuple[str, bool, str]:
    """(text, holds, detail) of `claim` on `means` (`perplexity_means`), at `length` (default times_L · L)."""
    length = length or claim.times_L * L
    try:
        value = means[(claim.encoding, length)]
        if claim.kind == "lower_than":
            other = means[(claim.other, length)]
            return (
                claim.text,
                bool(value < other),
                f"{claim.encoding} {value:.3f} vs {claim.other} {other:.3f} at {length}",
            )
        ratio = float(value) / float(means[(claim.encoding, L)])  # Python floats: inf / inf is NaN, unwarned
        holds = ratio >= claim.value if claim.kind == "ratio_at_least" else ratio <= claim.value
        sign = "≥" if claim.kind == "ratio_at_least" else "≤"
        return claim.text, bool(holds), f"{claim.encoding} ratio {ratio:.3f} at {length} ({sign} {claim.value:g})"
    except KeyError:
        return claim.text, False, f"no ok perplexity cell for {claim.encoding} at {length}"


HELD, NOT_HELD, OPEN = "held", "not held", "not resolved"


def published_shapes(table: pd.DataFrame, documents: pd.DataFrame | None = None) -> list[tuple[str, str, str]]:
    """(shape, verdict, detail) of each published shape whose encodings this table measured at one training
    length L, at the longest length past L where they all have a perplexity (the PI claim: at L). The verdict
    comes from the interval of the compared quantity, never from its point value: over seeds, Student's t of
    the seeds' ratios; over one seed, the ratio paired by document where `documents` (the folder's kept
    per-document losses) has both cells; otherwise, and wherever the interval straddles the bound, "not
    resolved". Shapes it cannot check (an encoding absent, nothing measured past L) are left out."""
    lengths = table["train_len"].dropna().unique()
    if len(lengths) != 1:  # a table mixing training lengths has no single L to read the shapes at
        return []
    L = int(lengths[0])
    means = perplexity_means(table)
    measured = {e: set(means[e].index.astype(int)) for e in means.index.get_level_values(0).unique()}
    out = []
    for claim in PUBLISHED_SHAPES:
        names = [claim.encoding] + ([claim.other] if claim.other else [])
        if not all(name in measured for name in names):
            continue
        common = set.intersection(*(measured[name] for name in names))
        if claim.times_L:
            length = claim.times_L * L
            if length not in common:
                continue
        else:
            past = [n for n in common if n > L]
            if not past or (claim.kind != "lower_than" and L not in common):
                continue
            length = max(past)
        out.append(shape_verdict(claim, table, documents, L, length))
    return out


def shape_verdict(claim: Claim, table: pd.DataFrame, documents, L: int, length: int) -> tuple[str, str, str]:
    """One shape's verdict from the interval of its ratio: the encoding at `length` over itself at L (a ratio
    claim), or over the other encoding at `length` on the same seed (lower_than: below 1 means lower)."""
    from extrapolate.report.ratios import ratio_aggregate

    if claim.kind == "lower_than":
        pair = table[table["encoding"].isin([claim.encoding, claim.other]) & (table["eval_len"] == length)]
        # the other encoding's cell at this length plays "the value at L" that the ratio divides by
        pair = pair.assign(train_len=length)
        base = {claim.encoding: claim.other, claim.other: claim.other}
        bound, sign = 1.0, "<"
    else:
        pair = table[table["encoding"] == claim.encoding]
        base = {claim.encoding: claim.encoding}
        bound, sign = (DEGRADES, "≥") if claim.kind == "ratio_at_least" else (FLAT, "≤")
    cells = ratio_aggregate(pair, base, documents)
    cell = cells[(cells["encoding"] == claim.encoding) & (cells["eval_len"] == length)]
    if cell.empty:
        return claim.text, OPEN, f"no ok perplexity cell for {claim.encoding} at {length}"
    r = cell.iloc[0]
    versus = f" / {claim.other}" if claim.kind == "lower_than" else f" / itself at {L}"
    seeds = f"{int(r['n_seeds'])} seeds" if r["interval"] == "seeds" else "one seed"
    if r["interval"] == "none":
        return claim.text, OPEN, f"{claim.encoding}{versus} {r['mean']:.3f} at {length} (one seed, no interval)"
    low, high = float(r["low"]), float(r["high"])
    held, not_held = {
        "≥": (low >= bound, high < bound),
        "≤": (high <= bound, low > bound),
        "<": (high < bound, low > bound),
    }[sign]
    verdict = HELD if held else NOT_HELD if not_held else OPEN
    detail = f"{claim.encoding}{versus} {r['mean']:.3f} [{low:.3f}–{high:.3f}] at {length} ({sign} {bound:g}; {seeds})"
    return claim.text, verdict, detail


def shapes_section(table: pd.DataFrame, documents: pd.DataFrame | None = None) -> list[str]:
    """The report's lines on the published shapes, a subsection of its findings (none when the table can check
    none of them)."""
    checked = published_shapes(table, documents)
    if not checked:
        return []
    lines = [
        "### The published shapes",
        "",
        "What the literature reports for these encodings, checked at the longest length measured past L, each "
        f'from the 95% interval of its ratio (zero-shot; "flat": at most {FLAT:g}× the value at L; "degrades": at '
        f'least {DEGRADES:g}×; "beats": below the other on the same seeds and documents; "not resolved": the '
        "interval straddles the bound, or one seed without its documents' losses).",
        "",
        "| shape | verdict | measured (95% interval) |",
        "|---|---|---|",
    ]
    shown = {HELD: "held", NOT_HELD: "**not held**", OPEN: "not resolved"}
    lines += [f"| {text} | {shown[verdict]} | {detail} |" for text, verdict, detail in checked]
    return lines + [""]
