"""The forward passes retrieval prompts take: the prefix a length's prompts share encoded once into a key/value
cache, each group's rest in micro-batches that fit a memory budget, greedy answers decoded from the caches.
Passkey (tasks/passkey.py) and RULER (tasks/ruler/) both measure through these."""

from __future__ import annotations

import torch


def copy_cache(cache: list[dict], index: int) -> list[dict]:
    """The cache of one sequence of a batch, batch dimension kept (size 1), not shared with the original: its
    keys and values, and whatever else a layer keeps per position (a forget gate's decay)."""
    return [{name: t[index : index + 1] for name, t in layer.items()} for layer in cache]


def cache_bytes(cache: list[dict]) -> int:
    return sum(t.numel() * t.element_size() for layer in cache for t in layer.values()) // max(
        1, cache[0]["k"].shape[0]
    )


@torch.no_grad()
def greedy_answers(model, cache, last_logits, steps: int, seq_len: int, stop: int | None = None) -> list[list[int]]:
    """Greedy continuation of a batch from its cache. last_logits: (B, V) at the prompt's last position.
    With `stop`, decoding ends early once every sequence has produced that token (what follows it is
    the caller's to cut)."""
    out = []
    token = last_logits.argmax(-1, keepdim=True)  # (B, 1)
    ended = torch.zeros_like(token, dtype=torch.bool)
    for _ in range(steps):
        out.append(token)
        if stop is not None:
            ended |= token == stop
            if bool(ended.all()):
                break
        hidden = model.hidden_states(token, cache=cache, seq_len=seq_len)  # (B, 1, D)
        token = model.lm_head(hidden[:, -1]).float().argmax(-1, keepdim=True)
    return torch.cat(out, 1).tolist()


def trunk_lengths(groups: list[torch.Tensor]) -> list[int]:
    """groups: token ids (trials, n) per depth in pass order -> for each, the length of the prefix every
    prompt of it and of all later groups begin with (at most n - 1: the last token's pass gives the logits).

    Non-decreasing: the trunk is computed once, at batch 1, and only grown. The filler before the shallowest
    remaining key is the same text in every prompt, so depth d's prompts share about d of their length."""
    lengths = []
    for i in range(len(groups)):
        rest = torch.cat(groups[i:])  # (R, n)
        differs = (rest != rest[:1]).any(0).nonzero()  # positions where some prompt departs from the first
        lengths.append(min(int(differs[0]) if len(differs) else rest.shape[1], rest.shape[1] - 1))
    return lengths


def prompt_bytes(config, length: int, suffix: int) -> int:
    """Bytes one prompt of a micro-batch holds at its peak, float32 bound: its keys and values over the whole
    `length` at every layer, twice (decoding grows a copy of them, a rank score continues the prompt's own),
    and one layer's activations over the `suffix` it runs (the residual and its norm, queries, new keys and
    values, the attention's output and projection, the MLP's three widest tensors)."""
    cache = 2 * 2 * config.n_layers * config.kv_heads * config.head_dim * length
    width = 4 * config.d_model + (config.n_heads + 2 * config.kv_heads) * config.head_dim + 3 * config.ff_dim
    return 4 * (cache + suffix * width)


def micro_rows(model, memory: int | None, rows: int, length: int, suffix: int) -> int:
    """Prompts a pass runs together: as many of a group's `rows` as fit `memory` bytes (`prompt_bytes`), at
    least one; every row at once where no budget is given."""
    if memory is None:
        return rows
    return max(1, min(rows, memory // max(1, prompt_bytes(model.config, length, suffix))))


def shared_prefix_passes(model, groups: list[torch.Tensor], length: int, skip=frozenset(), memory: int | None = None):
    """For each group of prompts (token ids (B, n) each, in pass order, all of one length n), in micro-batches
    of rows that fit `memory` bytes (`micro_rows`): (group index, the rows' slice, their key/value cache, the
    logits at their last position (b, V)), after one pass over what the group does not share with the groups
    after it. The prefix every remaining group shares (`trunk_lengths`) is encoded once, at batch 1, and only
    grown; a group in `skip` (indices) yields (index, its rows' slice, None, None) and is not run, its prefix
    still grown, so the passes after it compute what they would have. A prompt's row is computed alike in any
    micro-batch, so the budget changes the peak memory, not the answers."""
    trunk, done = model.new_cache(), 0
    for index, (ids, shared) in enumerate(zip(groups, trunk_lengths(groups))):
        if shared > done:  # grow the shared prefix's cache (batch 1)
            model.hidden_states(ids[:1, done:shared], cache=trunk, seq_len=length)
            done = shared
        if index in skip:
            yield index, slice(0, ids.shape[0]), None, None
            continue
        size = micro_rows(model, memory, ids.shape[0], ids.shape[1], ids.shape[1] - done)
        for start in range(0, ids.shape[0], size):
            rows = slice(start, min(start + size, ids.shape[0]))
            cache = [dict(layer) for layer in trunk]  # the rows must not grow the trunk
            hidden = model.hidden_states(ids[rows, done:], cache=cache, seq_len=length)  # (b, n - done, D)
            last = model.lm_head(hidden[:, -1]).float()  # (b, V)
            del hidden  # not held while the caller decodes
            yield index, rows, cache, last


def answered_passes(
    model,
    groups: list[torch.Tensor],
    length: int,
    steps: int,
    stop=None,
    skip=frozenset(),
    dtype="float32",
    keep=False,
    memory: int | None = None,
):
    """For each micro-batch of each group of prompts (token ids (B, n) each, in pass order; `shared_prefix_passes`):
    (group index, the rows' slice, their key/value cache, the logits at their last position (b, V), their greedy
    answers (`greedy_answers`)); a group in `skip` yields (index, its rows' slice, None, None, None). With `keep`
    the cache is the prompts' own, decoding having grown a copy (the rank score continues it); without, decoding
    grows the cache itself, so a prompt's keys and values are never held twice. A backend that generates from
    whole prompts itself (vLLM's `generate_greedy`, which pages its own cache) yields each group whole, answers
    only: it keeps no cache the caller could continue."""
    if hasattr(model, "generate_greedy"):
        for index, ids in enumerate(groups):
            if index in skip:
                yield index, slice(0, ids.shape[0]), None, None, None
                continue
            answers = model.generate_greedy(ids.tolist(), steps, stop, dtype, length)
            yield index, slice(0, ids.shape[0]), None, None, answers
        return
    for index, rows, cache, last in shared_prefix_passes(model, groups, length, skip, memory):
        if cache is None:
            yield index, rows, None, None, None
            continue
        decoded = [dict(layer) for layer in cache] if keep else cache
        yield index, rows, cache, last, greedy_answers(model, decoded, last, steps, length, stop)


def by_group(passes, sizes: list[int]):
    """The micro-batches of `answered_passes` per group of `sizes` prompts each: one iterator a group, which ends
    with the micro-batch that reaches the group's last row, so the next group's pass runs only when the caller
    asks for it (after it has logged this one). Micro-batches a caller leaves unread (a skipped group's) are
    read before the next group's."""
    passes = iter(passes)
    for size in sizes:
        group = micro_batches_of(passes, size)
        yield group
        for _ in group:  # whatever the caller did not read
            pass


def micro_batches_of(passes, size: int):
    while True:
        item = next(passes)
        yield item
        if item[1].stop >= size:
            return
