"""The transformers backend: transformers' own model for any causal LM it loads, behind the interface the task
kinds call. Its attention, MLP, norms and positional encoding are transformers' code; what the project adds is
around the model: the batching, the shared-prefix cache (kept as the project's per-layer key/value dicts and
handed to transformers as a `DynamicCache` on each call), the chunked loss and the RoPE scalings, applied as
the checkpoint's `rope_parameters` where transformers implements them."""

from __future__ import annotations

import copy
import inspect

import torch
from torch import nn

from extrapolate.core.config import ModelConfig
from extrapolate.core.errors import PositionOutOfRange, UserError
from extrapolate.encodings.base import PositionalEncoding
from extrapolate.model import token_cross_entropy

BACKEND = "transformers"


class AsReleased(PositionalEncoding):
    """The checkpoint's own positional encoding (a learned table, ALiBi, its RoPE as released), computed by
    transformers' model: nothing here rotates, biases or embeds."""

    def __init__(self, name: str, kind: str, context: int | None):
        super().__init__()
        self.name, self.kind, self.context = name, kind, context

    def describe(self) -> dict:
        return {"as_released": True, **({"context": self.context} if self.context else {})}


def describe_rotary(rotary) -> str:
    """How a RoPE encoding differs from plain RoPE, for a refusal: its scaling's name, or its base."""
    return rotary.name if rotary.scaling != "rope" else f"RoPE at base {rotary.base:g}"


def unwrapped(encoding: PositionalEncoding) -> PositionalEncoding:
    """The encoding under its wrappers (a partial rotation, a window, a soft cap)."""
    while hasattr(encoding, "inner"):
        encoding = encoding.inner
    return encoding


def rotary_modules(model: nn.Module) -> list[tuple[nn.Module, str, nn.Module]]:
    """(parent, attribute, module) of every RoPE module of transformers' model (its `…RotaryEmbedding`s)."""
    found = []
    for parent in model.modules():
        for name, child in parent.named_children():
            if type(child).__name__.endswith("RotaryEmbedding"):
                found.append((parent, name, child))
    return found


def rope_tables(model: nn.Module) -> list[tuple[nn.Module, str, nn.Module]]:
    """The RoPE modules that hold their angles as a table of `max_positions` rows indexed by position (GPT-J,
    CodeGen), as `rotary_modules` gives them."""
    return [found for found in rotary_modules(model) if isinstance(getattr(found[2], "max_positions", None), int)]


def model_config(hf_config, encoding: str, context: int | None, rope_base: float, rotary_dim: int | None):
    """The project's description of the checkpoint's sizes (what batch sizes and records read); transformers'
    model computes from its own config, never from this."""
    heads = hf_config.num_attention_heads
    head_dim = getattr(hf_config, "head_dim", None) or hf_config.hidden_size // heads
    kv_heads = getattr(hf_config, "num_key_value_heads", None) or heads
    return ModelConfig(
        vocab_size=hf_config.vocab_size,
        d_model=hf_config.hidden_size,
        n_layers=hf_config.num_hidden_layers,
        n_heads=heads,
        n_kv_heads=kv_heads if heads % kv_heads == 0 else None,
        encoding=encoding,
        rope_base=rope_base,
        max_len=context or 2048,
        head_size=head_dim if head_dim * heads != hf_config.hidden_size else None,
        rotary_dim=rotary_dim if rotary_dim != head_dim else None,
    )


class TransformersLM(nn.Module):
    """transformers' causal LM as the project's model: `hidden_states` through its decoder, `lm_head` its
    output layer, `token_nll` in chunks of positions, a KV cache of batch 1 serving any batch of continuations.
    `encoding`: the released encoding (`AsReleased`), or a RoPE scaling set by `set_encoding`."""

    backend = BACKEND

    def __init__(self, hf_model, config: ModelConfig, encoding: AsReleased, position_limit: int | None = None):
        super().__init__()
        self.hf = hf_model.eval()
        self.config = config
        self.encoding = encoding
        self.released = encoding
        self.position_limit = position_limit  # a learned table's rows: positions past them are unsupported
        self._released_rope = copy.deepcopy(getattr(hf_model.config, "rope_parameters", None))
        self._released_original = getattr(hf_model.config, "original_max_position_embeddings", None)  # Phi-3's
        self._table_rows = min((m.max_positions for *_, m in rope_tables(hf_model)), default=None)  # None: none
        parameters = inspect.signature(hf_model.base_model.forward).parameters
        self._cache_keyword = "cache" if "cache" in parameters else "past_key_values"  # renamed in transformers 5.x
        self._kernel = "auto"

    @property
    def decoder(self) -> nn.Module:
        return self.hf.base_model

    def lm_head(self, hidden: torch.Tensor) -> torch.Tensor:
        """(…, D) -> (…, V): the checkpoint's output layer (`check_head` confirms it gives its logits)."""
        return self.hf.get_output_embeddings()(hidden)

    def use_kernel(self, requested: str) -> None:
        """Recorded only: transformers' model attends with its own attention implementation."""
        self._kernel = requested

    def ran_kernels(self, requested, device, dtype, shapes) -> str:
        """What the attention calls ran: transformers' attention implementation, named as the backend's."""
        return f"{BACKEND}:{getattr(self.hf.config, '_attn_implementation', None) or 'eager'}"

    def attention_encodings(self) -> list[PositionalEncoding]:
        return [self.encoding]

    def set_encoding(self, encoding: PositionalEncoding) -> None:
        """The released encoding, or a RoPE scaling as transformers computes it: its `rope_parameters` written
        into the checkpoint's config and every RoPE module built again from it. A scaling transformers does not
        implement is refused by name."""
        from extrapolate.data.rope_config import hf_rope_parameters, replace_rope

        if isinstance(encoding, AsReleased):
            if self._released_rope is not None:
                self.hf.config.rope_parameters = copy.deepcopy(self._released_rope)
                if self._released_original is not None:
                    self.hf.config.original_max_position_embeddings = self._released_original
                self._rebuild_rope()
            self.encoding = encoding
            return
        rotary = unwrapped(encoding)
        if getattr(rotary, "kind", None) != "rotary" or not hasattr(rotary, "scaling"):
            raise UserError(f"the transformers backend applies RoPE scalings only, not {encoding.name}")
        if self._released_rope is None:  # RoPE transformers builds without rope_parameters: only as released
            if not self._is_released_rope(rotary):
                raise UserError(
                    f"{self.hf.config.model_type} builds its RoPE without rope_parameters (a table at base "
                    f"{self.config.rope_base:g}), so the transformers backend evaluates it as released "
                    f"(--encoding rope and no options), not {describe_rotary(rotary)}"
                )
            self.encoding = encoding
            return
        options = {k: v for k, v in rotary.options.items() if v is not None}
        if getattr(rotary, "logn", False):
            options["logn"] = True  # refused by name below: transformers has no such RoPE type
        params = hf_rope_parameters(
            rotary.scaling, rotary.base, rotary.factor, rotary.original_len, options, head_dim=rotary.head_dim
        )
        replace_rope(self.hf.config, params)
        self._rebuild_rope()
        self.encoding = encoding

    def _is_released_rope(self, rotary) -> bool:
        """Plain RoPE at the checkpoint's own base: what a checkpoint computes as released."""
        plain = rotary.scaling == "rope" and not getattr(rotary, "logn", False)
        return plain and rotary.base == self.config.rope_base and rotary.head_dim == self.config.rotated_dim

    def _cover_positions(self, positions: int) -> None:
        """RoPE held as a table of `max_positions` rows, which transformers' model indexes by position (GPT-J,
        CodeGen), built again with rows for `positions`: the rows it has are the same formula's, continued as
        any RoPE model computes a position past its context. One table serves every layer, doubled in rows at
        least, so a growing cache rebuilds it rarely."""
        if self._table_rows is None or positions <= self._table_rows:
            return
        tabled = rope_tables(self.hf)
        config = copy.copy(self.hf.config)
        config.max_position_embeddings = max(positions, 2 * max(m.max_positions for _, _, m in tabled))
        rebuilt = {}
        for parent, name, module in tabled:
            kind = type(module)
            if kind not in rebuilt:  # on the table's device, in its dtype (CodeGen rotates in the table's)
                table = module.embed_positions
                rebuilt[kind] = kind(config).to(device=table.device, dtype=table.dtype)
            setattr(parent, name, rebuilt[kind])
        self._table_rows = config.max_position_embeddings

    def _rebuild_rope(self) -> None:
        """Every RoPE module of transformers' model built again from the config's `rope_parameters`."""
        config = self.hf.config
        device = next(self.hf.parameters()).device
        for parent, name, module in rotary_modules(self.hf):
            try:
                rebuilt = type(module)(config=getattr(module, "config", None) or config)
            except TypeError as exc:
                raise UserError(f"{type(module).__name__} cannot be built again with another RoPE: {exc}") from None
            setattr(parent, name, rebuilt.to(device))

    def new_cache(self) -> list[dict]:
        return [{} for _ in range(self.config.n_layers)]

    def hidden_states(
        self,
        tokens: torch.Tensor,
        cache: list[dict] | None = None,
        seq_len: int | None = None,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """tokens (B, T) -> the decoder's last hidden states (B, T, D), normed as its head reads them. With
        `cache` (from `new_cache`) the tokens continue the cached sequence, whose keys and values are kept in
        it again; a cache of batch 1 serves a batch of continuations. `seq_len` is not read: transformers'
        dynamic scalings follow the positions they are given. `positions`: (T,) position ids in place of 0 … T-1
        (PoSE's, while fine-tuning), as transformers' `position_ids`; without a cache only."""
        from transformers import DynamicCache

        offset = cache[0]["k"].shape[2] if cache and "k" in cache[0] else 0
        batch, length = tokens.shape
        reach = offset + length if positions is None else int(positions[-1]) + 1  # the furthest position, + 1
        if self.position_limit is not None and reach > self.position_limit:
            raise PositionOutOfRange(reach - 1, self.position_limit)
        self._cover_positions(reach)
        if cache is None:
            # with position ids and no mask transformers reads a jump in the ids as the start of another packed
            # sequence and masks the chunks from each other; an explicit mask keeps one causal sequence
            given = (
                {}
                if positions is None
                else {
                    "position_ids": positions[None].expand(batch, -1),
                    "attention_mask": torch.ones_like(tokens),
                }
            )
            return self.decoder(input_ids=tokens, use_cache=False, **given).last_hidden_state
        layers = [
            (layer["k"].expand(batch, -1, -1, -1), layer["v"].expand(batch, -1, -1, -1))
            for layer in cache
            if "k" in layer
        ]
        held = DynamicCache(layers) if layers else DynamicCache()
        out = self.decoder(input_ids=tokens, use_cache=True, **{self._cache_keyword: held})
        for layer, kept in zip(cache, held.layers):
            layer["k"], layer["v"] = kept.keys, kept.values  # (B, Hkv, offset + T, Dh) each
        return out.last_hidden_state

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.hidden_states(tokens))

    def token_nll(
        self, tokens: torch.Tensor, targets: torch.Tensor, chunk: int = 2048, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Per-token negative log-likelihood (B, T) in float32, the head and the loss in chunks of positions so
        the (B, T, vocabulary) logits are never held at once."""
        hidden = self.hidden_states(tokens, positions=positions)  # (B, T, D)
        pieces = [
            token_cross_entropy(self.lm_head(part).float(), wanted)  # (B, c)
            for part, wanted in zip(hidden.split(chunk, dim=1), targets.split(chunk, dim=1))
        ]
        return torch.cat(pieces, dim=1)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.hf.parameters())


def check_head(model: TransformersLM) -> None:
    """Refuse a checkpoint whose logits are not its output layer's (a family that scales or caps them after
    the head): scored through `lm_head`, it would be another model. Four tokens through both paths."""
    tokens = torch.arange(4, dtype=torch.int64)[None] % model.config.vocab_size
    device = next(model.hf.parameters()).device
    with torch.no_grad():
        ours = model.lm_head(model.hidden_states(tokens.to(device))).float()
        theirs = model.hf(input_ids=tokens.to(device)).logits.float()
    if not torch.allclose(ours, theirs, rtol=1e-4, atol=1e-4 * float(theirs.abs().max()) + 1e-6):
        raise UserError(
            f"{model.hf.config.model_type} changes its logits after its output layer (a scale or a cap), "
            "which the transformers backend does not compute yet"
        )
