"""A BABILong prompt's context: the held-out text (the essay haystack RULER's needles go in, tasks/ruler/
haystack.py) with a bAbI story's sentences put between its sentences, in the story's order, as BABILong's
NoiseInjectionDataset puts them into PG-19: each fact at a gap between sentences drawn at random (with
replacement, then sorted; facts at one gap keep their order), the gaps those whose offset lies in
[facts_from · size, facts_to · size − the facts' tokens), the whole context when the shares are 0 and 1."""

from __future__ import annotations

import random

from extrapolate.tasks.babilong.world import story
from extrapolate.tasks.ruler.builder import RulerBuilder
from extrapolate.tasks.ruler.generators import Context, Draw, Generator


class Babilong(Generator):
    least = 0  # a story alone is a context

    def draw(self, rng: random.Random, length: int) -> Draw:
        told = story(rng, self.task.qa, (self.args["min_facts"], self.args["max_facts"]))
        return Draw({"question": told.question}, [told.answer], rng.getrandbits(63), {"story": told})

    def context(self, draw: Draw, budget: int, length: int) -> Context:
        pieces = [self.encode(" " + fact) for fact in draw.state["story"].facts]
        facts = sum(map(len, pieces))
        essay = self.builder.essay.tokens(max(0, budget - facts))
        gaps = self.gaps(essay, budget, facts)
        rng = random.Random(draw.seed)
        chosen = sorted(rng.choice(gaps) for _ in pieces)
        tokens, starts, done = [], [], 0
        for gap, piece in zip(chosen, pieces):
            tokens += essay[done:gap]
            starts.append(len(tokens))
            tokens += piece
            done = gap
        tokens += essay[done:]
        draw.state["starts"] = starts  # where each fact begins in the context (its depth: start / len(context))
        return Context(tokens, starts[0] if starts else len(tokens))

    def gaps(self, essay: list[int], budget: int, facts: int) -> list[int]:
        """Offsets in the essay between two sentences (its start and end included) where a fact may go: in
        [facts_from · budget, facts_to · budget − facts), or the one nearest that band where none is in it."""
        ends = self.builder.essay.ends_sentence
        every = [0] + [i + 1 for i, token in enumerate(essay[:-1]) if ends(token)] + [len(essay)]
        low, high = self.args["facts_from"] * budget, self.args["facts_to"] * budget - facts
        inside = [gap for gap in every if low <= gap < high or (gap == low == high)]
        return inside or [min(every, key=lambda gap: abs(gap - low))]

    def answer(self, outputs: list[str]) -> str:
        return " " + outputs[0] + "."


class BabilongBuilder(RulerBuilder):
    """RULER's prompt builder with the BABILong generator and BABILong's score."""

    generators = {"babilong": Babilong}
    shorter = ", or fewer facts (max_facts)"

    def answer_bound(self, draw: Draw) -> int:
        """A training row's room for its answer: the whole answer, where it is longer than the generation."""
        return max(self.task.tokens_to_generate, len(self.tokenizer.encode(self.generator.answer(draw.outputs))))

    def score(self, prediction: str, prompt) -> float:
        from extrapolate.tasks.babilong.score import babilong_score

        return babilong_score(prompt.outputs[0], prediction, prompt.question, self.task.qa)
