"""RULER's scores of one generated answer against its references (scripts/eval/synthetic/constants.py
there): the share of references the answer contains (`string_match_all`), or whether it contains any
(`string_match_part`, for QA), case-insensitively, after RULER's clean-up of the prediction."""

from __future__ import annotations

import re

CONTROL = re.compile(r"[\x00-\x1f]")


def cleaned(prediction: str) -> str:
    """RULER's post-processing: stripped, control characters as line breaks."""
    return CONTROL.sub("\n", prediction.strip()).strip()


def string_match_all(prediction: str, references) -> float:
    text = cleaned(prediction).lower()
    return sum(r.lower() in text for r in references) / len(references)


def string_match_part(prediction: str, references) -> float:
    text = cleaned(prediction).lower()
    return float(max(r.lower() in text for r in references))


METRIC_FUNCTIONS = {"string_match_all": string_match_all, "string_match_part": string_match_part}
