"""A tiny name -> object registry whose lookups fail with a "did you mean" message."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Generic, TypeVar

from extrapolate.core.errors import UserError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, what: str):
        self.what = what  # e.g. "encoding", used in error messages
        self._items: dict[str, T] = {}

    def add(self, name: str, item: T) -> T:
        if name in self._items:
            raise ValueError(f"{self.what} {name!r} registered twice")
        self._items[name] = item
        return item

    def get(self, name: str) -> T:
        key = name.strip().lower()
        if key in self._items:
            return self._items[key]
        raise UserError(unknown_name_message(self.what, name, list(self._items)))

    def names(self) -> list[str]:
        return list(self._items)

    def __contains__(self, name: str) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[tuple[str, T]]:
        return iter(self._items.items())


def unknown_name_message(what: str, name: str, valid: list[str]) -> str:
    valid = list(dict.fromkeys(valid))  # a name listed twice is suggested once
    close = difflib.get_close_matches(name.lower(), valid, n=3, cutoff=0.5)
    # only the names about as close as the closest: "yarnn" suggests yarn, not yarn and learned
    ratio = {c: difflib.SequenceMatcher(None, name.lower(), c).ratio() for c in close}
    close = [c for c in close if ratio[c] >= max(ratio.values()) - 0.1]
    hint = listed = f"valid: {', '.join(valid)}"
    if close:  # a short list is named whole too: a far-fetched guess ("bogus": contiguous?) still shows the rest
        hint = f"did you mean {', '.join(close)}?" + (f" ({listed})" if len(valid) <= 6 else "")
    return f"unknown {what} {name!r}; {hint}"


def require_known(what: str, name: str, valid) -> None:
    """A one-line "did you mean" error unless `name` is one of `valid`."""
    if name not in valid:
        raise UserError(unknown_name_message(what, name, list(valid)))
