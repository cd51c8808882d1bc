"""Small multiples: the encodings of a figure split into one panel per family, and within a panel a line look
(colour, line style, marker) that no other line of that panel shares. Twenty-two lines in one frame cannot be
told apart; five or fewer per family, in a colour-blind-safe palette, can.

The family comes from the registry (`EncodingSpec.kind`, and whether a rotary encoding trains its own model or
scales the RoPE model's), so a new encoding lands in its family without an edit here; a label the registry does
not know lands in "other", so every line is always drawn somewhere."""

from __future__ import annotations

import math
from dataclasses import dataclass

from extrapolate.report.labels import encoding_of, variant_order

# Okabe & Ito's eight colours, safe under the common colour-vision deficiencies
OKABE_ITO = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
# the lines take the first seven: a thin yellow line on white is barely seen, and styles tell more lines apart
LINE_COLOURS = OKABE_ITO[:7]
# (line style, marker): no two share a marker, and neighbours differ in line style too, so that lines of one
# colour (the variants of an encoding) still look apart
STYLES = (("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ("-", "v"), ("--", "P"), (":", "X"), ("-.", "*"))

ABSOLUTE, BIAS, ROTARY, SCALINGS, OTHER = (
    "absolute positions",
    "attention biases",
    "rotary, trained with it",
    "RoPE scalings of the RoPE model",
    "other",
)
PANEL_ORDER = (ABSOLUTE, BIAS, ROTARY, SCALINGS, OTHER)
KIND_PANELS = {"absolute": ABSOLUTE, "bias": BIAS, "rotary": ROTARY}  # any other kind (NoPE's "none"): OTHER

# plain RoPE, drawn the same way in every panel of a figure: the line the others are read against
REFERENCE = "rope"


@dataclass(frozen=True)
class Look:
    colour: str
    linestyle: str
    marker: str | None
    linewidth: float = 1.6
    zorder: float = 2.0

    def kwargs(self) -> dict:
        return {
            "color": self.colour,
            "linestyle": self.linestyle,
            "marker": self.marker,
            "linewidth": self.linewidth,
            "zorder": self.zorder,
        }


# wide, pale and marker-less, under the other lines: the reference never passes for one of them
REFERENCE_LOOK = Look("#9a9a9a", "-", None, linewidth=3.2, zorder=1.0)


def family(label: str) -> str:
    """The panel a label is drawn in: its encoding's kind, rotary split into the encodings a model is trained
    with and the scalings applied to the RoPE model; "other" for NoPE and for any name the registry lacks."""
    from extrapolate.encodings import ENCODINGS

    name = encoding_of(str(label))
    if name not in ENCODINGS:
        return OTHER
    spec = ENCODINGS.get(name)
    if spec.kind == "rotary" and not spec.trains_own_model:
        return SCALINGS
    return KIND_PANELS.get(spec.kind, OTHER)


def panels(labels) -> dict[str, list[str]]:
    """Panel title -> its labels, each label in exactly one panel; panels in `PANEL_ORDER`, empty ones left
    out; within a panel, the registry's order (a name it lacks last), a label's variants in the order given."""
    grouped: dict[str, list[str]] = {}
    for label in dict.fromkeys(str(label) for label in labels):
        grouped.setdefault(family(label), []).append(label)
    ordered = {}
    for title in (title for title in PANEL_ORDER if title in grouped):
        place = slots(grouped[title])
        ordered[title] = sorted(grouped[title], key=place.__getitem__)  # stable: variants keep their order
    return ordered


def figure_panels(labels) -> dict[str, list[str]]:
    """`panels`, less a panel that would hold plain RoPE alone while there are others: each of them draws it
    as its reference line (`with_reference`), so such a panel would only repeat it."""
    grouped = panels(labels)
    alone = [title for title, members in grouped.items() if members == [REFERENCE]]
    return {title: members for title, members in grouped.items() if title not in alone or len(grouped) == 1}


def with_reference(members: list[str], drawable) -> list[str]:
    """A panel's lines, plain RoPE first wherever the figure has it, as the line to read the others against."""
    return ([REFERENCE] if REFERENCE in drawable and REFERENCE not in members else []) + members


def slots(labels) -> dict[str, int]:
    """Each label's place in its family: its encoding's rank among the registry's encodings of that family, so
    that an encoding looks the same in every figure and folder whichever others it is drawn with; a name the
    registry lacks after them, in order of first appearance."""
    from extrapolate.encodings import ENCODINGS

    out, unknown = {}, []
    for label in dict.fromkeys(str(label) for label in labels):
        name = encoding_of(label)
        members = [n for n, _ in ENCODINGS if family(n) == family(label)]
        if name in members:
            out[label] = members.index(name)
        else:
            unknown += [] if name in unknown else [name]
            out[label] = len(members) + unknown.index(name)
    return out


def looks(labels) -> dict[str, Look]:
    """A look per label of one panel: the colour and style of its encoding's place in the family (`slots`), the
    two cycles of different lengths, so that the first seven encodings differ in both; the variants of one
    encoding ("yarn", "yarn s=4", "yarn+ft100") share its colour in further styles. No two labels of the
    panel get the same (colour, style) while it has at most 56 lines; plain RoPE always gets
    `REFERENCE_LOOK`."""

    labels = list(dict.fromkeys(str(label) for label in labels))
    place = slots(labels)
    variants: dict[str, list[str]] = {}
    for label in sorted(labels, key=variant_order):
        variants.setdefault(encoding_of(label), []).append(label)
    taken: set[tuple[int, int]] = set()
    out = {}
    for label in sorted(labels, key=lambda label: (place[label], variant_order(label))):
        if label == REFERENCE:
            out[label] = REFERENCE_LOOK
            continue
        rank = variants[encoding_of(label)].index(label)
        colour, style = free_slot(place[label] % len(LINE_COLOURS), (place[label] + rank) % len(STYLES), taken)
        taken.add((colour, style))
        linestyle, marker = STYLES[style]
        out[label] = Look(LINE_COLOURS[colour], linestyle, marker)
    return {label: out[label] for label in labels}


def free_slot(colour: int, style: int, taken: set[tuple[int, int]]) -> tuple[int, int]:
    """The first (colour, style) not taken: the one asked for if free, else the next free style of that colour,
    else the next colour's (an encoding with more variants than there are styles)."""
    for shift in range(len(LINE_COLOURS)):
        c = (colour + shift) % len(LINE_COLOURS)
        for step in range(len(STYLES)):
            s = (style + step) % len(STYLES)
            if (c, s) not in taken:
                return c, s
    return colour, style  # past 56 lines in one panel a look repeats: drawn anyway


def grid(count: int) -> tuple[int, int]:
    """(rows, columns) for `count` panels: one column for a single panel, two otherwise."""
    columns = 1 if count <= 1 else 2
    return math.ceil(max(count, 1) / columns), columns


def span_floor(lo: float, hi: float, centres, tolerance: float) -> tuple[float, float]:
    """Axis limits that hold the data (lo…hi) and, around each centre (a line's value at L), at least
    ±`tolerance`: a curve that moves by less than that then looks nearly flat, as it is, rather than a cliff
    drawn across the whole frame. A margin (in log space: these axes are logarithmic) keeps the extreme points
    off the frame and the edges of a ±`tolerance` band inside it."""
    centres = [c for c in centres if 0 < c < math.inf]
    lo = min([lo, *(c * (1 - tolerance) for c in centres)])
    hi = max([hi, *(c * (1 + tolerance) for c in centres)])
    if not 0 < lo < hi < math.inf:  # nothing drawn, or one value with no centre: a span around it
        lo, hi = (lo * (1 - tolerance), lo * (1 + tolerance)) if 0 < lo < math.inf else (1 - tolerance, 1 + tolerance)
    margin = max(0.04 * math.log(hi / lo), 0.02)
    return lo * math.exp(-margin), hi * math.exp(margin)
