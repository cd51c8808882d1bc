"""BABILong's score of one generated answer (`compare_answers` in babilong/metrics.py of booydar/babilong at
7a6efee): the output's first sentence, lower-cased, cut before any <context> or <example> it starts to write;
the task's answer labels found in it, less those the question names, must be exactly the target's (the target
alone, or each object of qa8's "apple,milk"). The reference also cuts at "Question", after lower-casing, which
never matches; kept, so the two agree on every output but one kind: the reference finds a label anywhere in the
text, so qa7's "none" also names "one" and a right "none" can never score; here a label found only inside a
longer label ("one" in "none") is not named. qa7 is the only task whose labels nest."""

from __future__ import annotations

import re

TASK_LABELS = {
    1: ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office"),
    2: ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office"),
    3: ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office"),
    4: ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office"),
    5: ("Bill", "Fred", "Jeff", "Mary", "apple", "football", "milk"),
    6: ("no", "yes"),
    7: ("none", "one", "three", "two"),
    8: ("apple", "football", "milk", "nothing"),
    9: ("no", "yes"),
    10: ("maybe", "no", "yes"),
}


def first_sentence(output: str) -> str:
    output = output.lower().split(".")[0]
    for cut in ("<context>", "<example>", "Question"):
        output = output.split(cut)[0]
    return output


def named(text: str, labels: set[str]) -> set[str]:
    """The labels found in `text` (anywhere, as the reference finds them), less any found only inside a longer
    label's occurrence."""
    found = set()
    for label in labels:
        longer = [
            (m.start(), m.start() + len(other))
            for other in labels
            if len(other) > len(label) and label in other
            for m in re.finditer(f"(?={re.escape(other)})", text)
        ]
        for m in re.finditer(f"(?={re.escape(label)})", text):
            if not any(a <= m.start() and m.start() + len(label) <= b for a, b in longer):
                found.add(label)
                break
    return found


def babilong_score(target: str, output: str, question: str, qa: int) -> float:
    """1.0 where the output names the target's labels and no other (outside the question's), else 0.0."""
    output, target = first_sentence(output), target.lower()
    labels = {label.lower() for label in TASK_LABELS[qa]}
    said = named(output, labels) - named(question.lower(), labels)
    if "," in target and len(target) > 3:  # qa8's several objects
        parts = target.split(",")
        return float(all(part in said for part in parts) and len(said) == len(parts))
    return float(target in said and len(said) == 1)
