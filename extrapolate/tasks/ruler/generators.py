"""RULER's five generators: what one sample draws (its question and references) and the context it puts
around them within a token budget. Each follows its RULER script (scripts/data/synthetic/*.py there):
needle formats, insertion rules, word frequencies and answers as RULER draws them."""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

import torch

from extrapolate.core.errors import UserError
from extrapolate.tasks.ruler.haystack import DEPTHS, fit_count, insert_lines
from extrapolate.tasks.ruler.words import (
    coded_words,
    common_words,
    distinct_values,
    random_value,
    variable_names,
)

COMMON_WORDS_SHORT = 4096  # below this length RULER's common words repeat 6 times (1 for the others)


@dataclass
class Draw:
    """One sample before its context: the template's fields, the references, and its own seed (the context
    is rebuilt from it at each size tried, so a size's context is always the same)."""

    fields: dict
    outputs: list[str]
    seed: int
    state: dict = field(default_factory=dict)  # what the context needs of the draw (needles, chains, …)


@dataclass
class Context:
    tokens: list[int]
    departs: int  # where this sample's own content begins (before it: text every sample of a length shares)


class Generator:
    """One RULER task: `draw` a sample at a length, build its `context` within a budget, `answer` its
    references as a training target. `builder` (a RulerBuilder) gives the tokenizer, the haystacks and args."""

    least = 1  # the fewest context units a prompt must hold

    def __init__(self, builder):
        self.builder, self.task = builder, builder.task
        self.args = dict(builder.task.args)

    def encode(self, text: str) -> list[int]:
        return self.builder.tokenizer.encode(text)

    def rewrite(self, text: str, draw: Draw) -> str:
        """The template or answer prefix as this sample words it (NIAH's singular)."""
        return text

    def draw(self, rng: random.Random, length: int) -> Draw:
        raise NotImplementedError

    def draw_sample(self, rng: random.Random, length: int, index: int) -> Draw:
        """Sample `index` of an evaluation at `length`: a fresh draw, unless the task pairs its samples
        across lengths as RULER does (QA asks question `index` at every length)."""
        return self.draw(rng, length)

    def context(self, draw: Draw, budget: int, length: int) -> Context:
        raise NotImplementedError

    # under a chat template: False, the examples open the prompt's own user turn (RULER's VT); True, they are
    # whole turns before it (RULER's common words)
    examples_as_turns = False

    def example(self, rng: random.Random, length: int) -> list[int]:
        """Tokens of the solved examples shown before the prompt ("" for none)."""
        return []

    def answer(self, outputs: list[str]) -> str:
        return " " + ", ".join(outputs) + "."

    def lines(self, draw: Draw, budget: int, make_lines) -> Context:
        """A context of "\\n"-joined lines, as many as fit: `make_lines(count, rng)` -> (lines, first insert)."""

        def make(count: int) -> list[int]:
            lines, _ = make_lines(count, random.Random(draw.seed))
            return self.encode("\n".join(lines))

        count, tokens = fit_count(make, budget, self.least)
        _, first = make_lines(count, random.Random(draw.seed))
        departs = len(self.encode("\n".join(make_lines(count, random.Random(draw.seed))[0][:first])))
        return Context(tokens, departs)


class Niah(Generator):
    """Needles "One of the special magic {values} for {key} is: {value}." in an essay, noise or needle
    haystack; the question names one or several keys, every value of theirs is an answer."""

    def draw(self, rng: random.Random, length: int) -> Draw:
        a = self.args
        keys = distinct_values(rng, a["type_needle_k"], a["num_needle_k"])
        values, needles = [], []
        taken: set[str] = set(keys)
        for key in keys:
            own = distinct_values(rng, a["type_needle_v"], a["num_needle_v"], taken)
            taken |= set(own)
            values.append(own)
            needles += [a["needle"].format(type_needle_v=a["type_needle_v"], key=key, value=v) for v in own]
        rng.shuffle(needles)
        asked = rng.sample(range(len(keys)), a["num_needle_q"])
        queries = [keys[i] for i in asked]
        query = queries[0] if len(queries) == 1 else ", ".join(queries[:-1]) + ", and " + queries[-1]
        singular = a["num_needle_q"] * a["num_needle_v"] == 1
        kind = a["type_needle_v"][:-1] if singular else a["type_needle_v"]
        outputs = [v for i in asked for v in values[i]]
        return Draw({"type_needle_v": kind, "query": query}, outputs, rng.getrandbits(63), {"needles": needles})

    def rewrite(self, text: str, draw: Draw) -> str:
        if self.args["num_needle_q"] * self.args["num_needle_v"] != 1:
            return text
        for old, new in (("Some", "A"), ("are all", "is"), ("are", "is"), ("answers", "answer")):
            text = text.replace(old, new)
        return text

    def context(self, draw: Draw, budget: int, length: int) -> Context:
        needles = draw.state["needles"]
        haystack = self.args["type_haystack"]
        if haystack == "essay":
            pieces = [self.encode(" " + n) for n in needles]  # the essay's next token brings its own space
            rng = random.Random(draw.seed)
            depths = (
                rng.sample(DEPTHS, len(needles)) if len(needles) <= len(DEPTHS) else rng.choices(DEPTHS, k=len(needles))
            )
            essay = self.builder.essay.tokens(max(0, budget - sum(map(len, pieces))))
            tokens, first = self.builder.essay.insert(essay, pieces, depths)
            return Context(tokens, first)
        a = self.args

        def make_lines(count: int, rng: random.Random):
            if haystack == "noise":
                lines = [self.task.noise] * count
            else:  # distractor needles of random keys and values
                lines = [
                    a["needle"].format(
                        type_needle_v=a["type_needle_v"],
                        key=random_value(rng, a["type_needle_k"]),
                        value=random_value(rng, a["type_needle_v"]),
                    )
                    for _ in range(count)
                ]
            return insert_lines(lines, needles, rng)

        return self.lines(draw, budget, make_lines)


class VariableTracking(Generator):
    """Chains "VAR B = VAR A" from "VAR A = 12345" hidden in noise or essay; the answer is every variable of
    the first chain (the one holding the value asked), after one solved example."""

    least = 0  # the chains alone are a context (a length that holds no noise line besides)

    def draw(self, rng: random.Random, length: int, letters: int = 5, hops: int | None = None) -> Draw:
        chains_n, hops = self.args["num_chains"], self.args["num_hops"] if hops is None else hops
        names = variable_names(rng, (hops + 1) * chains_n, letters)
        chains, groups = [], []
        for c in range(chains_n):
            group = names[c * (hops + 1) : (c + 1) * (hops + 1)]
            value = str(rng.randint(10000, 99998))  # numpy's randint(10000, 99999): the high end excluded
            chains.append(
                [f"VAR {group[0]} = {value}"] + [f"VAR {group[j + 1]} = VAR {group[j]} " for j in range(hops)]
            )
            groups.append(group)
        value = chains[0][0].split("=")[-1].strip()
        fields = {"query": value, "num_v": hops + 1}
        return Draw(fields, groups[0], rng.getrandbits(63), {"chains": chains})

    def context(self, draw: Draw, budget: int, length: int) -> Context:
        chains = draw.state["chains"]
        if self.args["type_haystack"] == "essay":
            rng = random.Random(draw.seed)
            flat = interleave(chains, rng)
            pieces = [self.encode(" " + line.strip() + ".") for line in flat]
            depths = rng.sample(DEPTHS, len(flat)) if len(flat) <= len(DEPTHS) else rng.choices(DEPTHS, k=len(flat))
            essay = self.builder.essay.tokens(max(0, budget - sum(map(len, pieces))))
            tokens, first = self.builder.essay.insert(essay, pieces, depths)
            return Context(tokens, first)

        def make_lines(count: int, rng: random.Random):
            lines, first = [self.task.noise] * count, count
            for chain in chains:
                positions = sorted(rng.sample(range(len(lines)), min(len(chain), len(lines))))
                positions += [len(lines)] * (len(chain) - len(positions))
                for j, (position, line) in enumerate(zip(positions, chain)):
                    lines.insert(position + j, line)
                first = min(first, positions[0] if positions else 0)
            return [line.replace(". \n", ".\n") for line in lines], first

        return self.lines(draw, budget, make_lines)

    def example(self, rng: random.Random, length: int) -> list[int]:
        """RULER's one solved example: the same task with 3-letter names and at most 10 hops, sized to
        `example_tokens` with its answer."""
        size = self.args["example_tokens"]
        if size == 0:
            return []
        draw = self.draw(rng, size, letters=3, hops=min(10, self.args["num_hops"]))
        # RULER joins the example and the prompt with a newline after the example's own: a blank line between
        answer = self.encode(" " + " ".join(draw.outputs) + "\n\n")
        return self.builder.assemble(draw, size - len(answer), example=False, framed=False) + answer

    def answer(self, outputs: list[str]) -> str:
        return " ".join(outputs)


def interleave(chains: list[list[str]], rng: random.Random) -> list[str]:
    """The chains' lines in one random order that keeps each chain's own order, drawn as RULER's heap
    shuffle draws it: each chain's next line waits with a fresh random priority, the lowest goes first."""
    heap = [(rng.random(), i, 0) for i in range(len(chains)) if chains[i]]
    heapq.heapify(heap)
    out = []
    while heap:
        _, chain, line = heapq.heappop(heap)
        out.append(chains[chain][line])
        if line + 1 < len(chains[chain]):
            heapq.heappush(heap, (rng.random(), chain, line + 1))
    return out


class CommonWords(Generator):
    """A numbered list in which `num_cw` words appear `freq_cw` times and the others `freq_ucw` times; the
    answer is the common words, after `num_fewshot` solved examples."""

    least = 0
    examples_as_turns = True  # under a chat template each solved example is a turn of its own, before the prompt's

    def repeats(self, length: int) -> tuple[int, int]:
        a = self.args
        return (6, 1) if length < COMMON_WORDS_SHORT else (a["freq_cw"], a["freq_ucw"])

    def words(self, rng: random.Random, count: int, common: int, uncommon: int) -> tuple[str, list[str]]:
        pool = common_words()
        if count > len(pool):
            raise UserError(f"common-words extraction needs {count} distinct words; its list holds {len(pool)}")
        chosen = rng.sample(pool, count)
        cw = chosen[: self.args["num_cw"]]
        listed = cw * common + chosen[self.args["num_cw"] :] * uncommon
        rng.shuffle(listed)
        return " ".join(f"{i + 1}. {w}" for i, w in enumerate(listed)), cw

    def draw(self, rng: random.Random, length: int) -> Draw:
        return Draw({"num_cw": self.args["num_cw"], "query": ""}, [], rng.getrandbits(63))

    def context(self, draw: Draw, budget: int, length: int) -> Context:
        common, uncommon = self.repeats(length)
        cw = self.args["num_cw"]

        def make(extra: int) -> list[int]:
            text, _ = self.words(random.Random(draw.seed), cw + extra, common, uncommon)
            return self.encode(text)

        extra, tokens = fit_count(make, budget, 0, len(common_words()) - cw)
        _, answer = self.words(random.Random(draw.seed), cw + extra, common, uncommon)
        draw.outputs[:] = answer  # the common words are known once the list is drawn
        return Context(tokens, 0)

    def example(self, rng: random.Random, length: int) -> list[int]:
        count, common, uncommon = (20, 3, 1) if length < COMMON_WORDS_SHORT else (40, 10, 3)
        shots = []
        for _ in range(self.args["num_fewshot"]):
            text, answer = self.words(rng, count, common, uncommon)
            draw = Draw({"num_cw": self.args["num_cw"], "query": ""}, answer, 0)
            template = self.builder.fill(self.task.template, draw, text)
            solved = self.builder.fill(self.task.answer_prefix, draw) + " " + self.answer(answer).strip()
            if self.builder.chat is None:
                shots.append(self.encode(template + solved))
            else:  # RULER formats each example with the model's template: a user turn, the answer the assistant's
                head, suffix = self.builder.chat
                shots.append(list(head) + self.encode(template) + list(suffix) + self.encode(solved))
        joined = [token for i, shot in enumerate(shots) for token in (self.builder.newline if i else []) + shot]
        return joined + self.builder.newline if shots else []

    def answer(self, outputs: list[str]) -> str:
        return " " + " ".join(f"{i + 1}. {w}" for i, w in enumerate(outputs))


class FrequentWords(Generator):
    """Coded words whose counts follow a Zipf law (zeta `alpha`); the answer is the three most frequent
    after the first, which stands for noise ('...')."""

    least = 0

    def draw(self, rng: random.Random, length: int) -> Draw:
        a = self.args
        size = a["vocab_size"] or max(4, (length - self.task.tokens_to_generate) // 50)
        vocab = coded_words(rng, size, a["coded_wordlen"])
        vocab[0] = "..."
        return Draw({"query": ""}, vocab[1:4], rng.getrandbits(63), {"vocab": vocab})

    def context(self, draw: Draw, budget: int, length: int) -> Context:
        vocab, alpha = draw.state["vocab"], self.args["alpha"]
        zeta = float(
            torch.special.zeta(torch.tensor(alpha, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64))
        )
        ranks = torch.arange(1, len(vocab) + 1, dtype=torch.float64)

        def make(count: int) -> list[int]:
            counts = (count * ranks.pow(-alpha) / zeta).long().tolist()  # int(): RULER truncates
            words = [w for w, n in zip(vocab, counts) for _ in range(n)]
            random.Random(draw.seed).shuffle(words)
            return self.encode(" ".join(words))

        _, tokens = fit_count(make, budget, 0)
        return Context(tokens, 0)


class QuestionAnswering(Generator):
    """Documents of a SQuAD or HotpotQA file, the question's own among them; any of its answers counts."""

    def __init__(self, builder):
        super().__init__(builder)
        from extrapolate.tasks.ruler.qa import load_qa

        self.questions, self.documents = load_qa(self.task)

    def draw(self, rng: random.Random, length: int, question: int | None = None) -> Draw:
        picked = self.questions[rng.randrange(len(self.questions)) if question is None else question]
        return Draw({"query": picked.query}, list(picked.answers), rng.getrandbits(63), {"question": picked})

    def draw_sample(self, rng: random.Random, length: int, index: int) -> Draw:
        # RULER asks the file's questions in order, the same one for a sample index at every length, so
        # that scores of two lengths compare the same questions
        return self.draw(rng, length, index % len(self.questions))

    def context(self, draw: Draw, budget: int, length: int) -> Context:
        question = draw.state["question"]
        own = list(question.documents)
        more = [d for d in question.related if d not in own]
        others = [d for d in range(len(self.documents)) if d not in own and d not in more]
        random.Random(draw.seed ^ 1).shuffle(more)  # RULER samples the related paragraphs that fit at random

        def chosen(count: int) -> list[int]:
            rng = random.Random(draw.seed)
            picked = own + more[: max(0, count - len(own))]
            picked += rng.sample(others, min(len(others), max(0, count - len(picked))))
            rng.shuffle(picked)
            return picked

        def make(count: int) -> list[int]:
            docs = chosen(count)
            return self.encode("\n\n".join(f"Document {i + 1}:\n{self.documents[d]}" for i, d in enumerate(docs)))

        _, tokens = fit_count(make, budget, len(own), len(self.documents))
        return Context(tokens, 0)

    def answer(self, outputs: list[str]) -> str:
        return " " + outputs[0]


GENERATORS = {
    "niah": Niah,
    "variable_tracking": VariableTracking,
    "common_words_extraction": CommonWords,
    "freq_words_extraction": FrequentWords,
    "qa": QuestionAnswering,
}
