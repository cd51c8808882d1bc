"""The random values of RULER's prompts: keys, values and word lists drawn as its generators draw them.

Words come from the lists RULER itself samples (the `wonderwords` package: nouns, adjectives, verbs), read
from the installed package and checked against the digests of the release the task files were written for,
so the same task file gives the same prompts wherever it runs."""

from __future__ import annotations

import hashlib
import importlib.resources
import random
import string
import uuid
from functools import cache

from extrapolate.core.errors import UserError

WORD_LISTS_RELEASE = "wonderwords==2.2.0"
WORD_LISTS = {  # file -> sha256 of its bytes in that release
    "nounlist.txt": "0778f51872f2aa89e0745c0cc37471a13e3d2161a79fcfdc03b6390b10604a55",
    "adjectivelist.txt": "66814d46b7e292c83e839d12fe2fa083c8f66779b14b294e1be4e1342c5d4131",
    "verblist.txt": "9fbf5e4e69b8869aebd88e6d545312ff9f878a747327ede5f6dbbba5c27b08ad",
}


@cache
def word_list(name: str) -> tuple[str, ...]:
    """One of the package's lists, one word a line, in its file's order; refused when its bytes differ."""
    try:
        data = importlib.resources.files("wonderwords").joinpath("assets", name).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError):
        raise UserError(
            f"RULER's word lists come from the wonderwords package: pip install '{WORD_LISTS_RELEASE}'"
        ) from None
    if hashlib.sha256(data).hexdigest() != WORD_LISTS[name]:
        raise UserError(f"wonderwords' {name} differs from {WORD_LISTS_RELEASE}'s, which the RULER tasks are pinned to")
    return tuple(w.strip() for w in data.decode("utf-8").splitlines() if w.strip())


@cache
def distinct(name: str) -> tuple[str, ...]:
    return tuple(sorted(set(word_list(name))))


def needle_word(rng: random.Random) -> str:
    """NIAH's word key or value: an adjective-noun pair, "adjective-noun", uniform over the pairs as RULER's
    choice from all of them is (drawn by parts: the 6 million pairs are never listed)."""
    return f"{rng.choice(distinct('adjectivelist.txt'))}-{rng.choice(distinct('nounlist.txt'))}"


@cache
def common_words() -> tuple[str, ...]:
    """The words of the common-words task: nouns, adjectives and verbs, distinct, sorted."""
    return tuple(sorted({*word_list("nounlist.txt"), *word_list("adjectivelist.txt"), *word_list("verblist.txt")}))


def random_value(rng: random.Random, kind: str) -> str:
    """A needle's key or value: a 7-digit number, an adjective-noun word or a UUID (RULER's three types)."""
    if kind == "numbers":
        return str(rng.randint(10**6, 10**7 - 1))
    if kind == "words":
        return needle_word(rng)
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def distinct_values(rng: random.Random, kind: str, count: int, avoid: set[str] = frozenset()) -> list[str]:
    """`count` distinct values (none of `avoid`): a repeated key would make its question ambiguous."""
    values: list[str] = []
    while len(values) < count:
        value = random_value(rng, kind)
        if value not in values and value not in avoid:
            values.append(value)
    return values


def variable_names(rng: random.Random, count: int, letters: int = 5) -> list[str]:
    """`count` distinct upper-case names of `letters` letters (variable tracking's VAR names)."""
    names: list[str] = []
    while len(names) < count:
        name = "".join(rng.choices(string.ascii_uppercase, k=letters))
        if name not in names:
            names.append(name)
    return names


def coded_words(rng: random.Random, count: int, letters: int) -> list[str]:
    """`count` distinct lower-case nonsense words (frequent-words extraction's vocabulary), sorted then shuffled."""
    words: set[str] = set()
    while len(words) < count:
        words.add("".join(rng.choices(string.ascii_lowercase, k=letters)))
    ordered = sorted(words)
    rng.shuffle(ordered)
    return ordered
