"""The walk back from the diagonal that stick-breaking attention and CoPE share: each block of query rows meets
its keys in blocks from the nearest back, as both methods accumulate a sum over the keys between key and query.
The key blocks start at the rows' own size and double up to what the element budget allows: where the sum
settles within a few hundred keys (a stick spent, a count past the table), the walk ends after two or three
small blocks; where it does not, the long tail is crossed in few large ones."""

from __future__ import annotations

import math
from collections.abc import Iterator

QUERY_ROWS = 128  # query rows a block: small, so the near keys every row must walk stay few
MIN_ROWS = 16


def walk_shape(batch_heads: int, block_elements: int | None, queries: int, keys: int) -> tuple[int, int]:
    """(query rows a block, the most keys a block): B·H·rows·keys ≤ block_elements; None: one block of every
    query against every key (the reference kernels)."""
    if block_elements is None:
        return max(queries, 1), max(keys, 1)
    budget = max(1, block_elements // max(1, batch_heads))
    rows = max(MIN_ROWS, min(QUERY_ROWS, math.isqrt(budget)))
    return rows, max(rows, budget // rows)


def key_blocks(end: int, first: int, largest: int) -> Iterator[tuple[int, int]]:
    """Key blocks [k0, k1) from `end` back to 0: `first` keys, then as many again, then doubling up to `largest`."""
    size, k1 = first, end
    while k1 > 0:
        k0 = max(0, k1 - size)
        yield k0, k1
        k1, size = k0, min(largest, 2 * size if k1 < end else size)
