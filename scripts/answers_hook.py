"""Loaded into an older commit's `extrapolate run` by `scripts/answers_at_commit.py`: writes what the model
answered to each passkey prompt, which commits before 2026-11-27 measured and did not keep.

It wraps three names every commit since the task files has had in `extrapolate.tasks.passkey`:
`evaluate_passkey(model, builder, length, ...)` (one length's cells), `builder.is_correct(decoded, prompt)` (one
prompt's greedy answer, in trial order within a depth) and `candidate_scores(...)` (the same prompt's rank score,
called after it). Each call of `evaluate_passkey` appends its answers, numbered by the call, to the JSON-lines
file named by EXTRAPOLATE_ANSWERS_LOG; training's retrieval probes call it too at some commits (and
`is_correct` outside it at others, which is not written), so a length's measurement is its last call.
"""

from __future__ import annotations

import functools
import json
import math
import os

LOG_VARIABLE = "EXTRAPOLATE_ANSWERS_LOG"


def install() -> None:
    import extrapolate.tasks.passkey as passkey

    path = os.environ[LOG_VARIABLE]
    state: dict = {"length": None, "task": None, "answers": [], "call": 0}
    evaluate, candidate_scores = passkey.evaluate_passkey, passkey.candidate_scores
    is_correct = passkey.PromptBuilder.is_correct

    @functools.wraps(evaluate)
    def evaluate_logged(model, builder, length, *args, **kwargs):
        state.update(length=int(length), task=builder.task, answers=[], call=state["call"] + 1)
        try:
            return evaluate(model, builder, length, *args, **kwargs)
        finally:
            with open(path, "a", encoding="utf-8") as log:
                log.writelines(json.dumps(answer, ensure_ascii=False) + "\n" for answer in state["answers"])
            state.update(length=None, task=None, answers=[])

    @functools.wraps(is_correct)
    def is_correct_logged(self, decoded, prompt):
        correct = is_correct(self, decoded, prompt)
        if state["length"] is not None:
            task = state["task"]
            keys = getattr(prompt, "answer_keys", ()) or (prompt.key,)
            reference = getattr(task, "answer_join", ", ").join(str(k) for k in keys)
            state["answers"].append(
                {
                    "call": state["call"],
                    "task": task.name,
                    "eval_len": state["length"],
                    "depth": float(prompt.depth),
                    "reference": reference,
                    "prediction": decoded,
                    "score": float(correct),
                }
            )
        return correct

    @functools.wraps(candidate_scores)
    def candidate_scores_logged(*args, **kwargs):
        scores = candidate_scores(*args, **kwargs)  # (candidates,): the true answer's first
        if state["length"] is not None and state["answers"]:
            margin = float(scores[0] - scores[1:].max())  # as today's evaluate_passkey keeps it
            state["answers"][-1] |= {
                "ranked_first": margin > 0,
                "rank_margin": round(margin, 4) if math.isfinite(margin) else None,
            }
        return scores

    passkey.evaluate_passkey = evaluate_logged
    passkey.candidate_scores = candidate_scores_logged
    passkey.PromptBuilder.is_correct = is_correct_logged
