"""A decoder-only transformer LM that calls the encoding's three hooks and knows no encoding by name.

It can host Llama-family weights (RMSNorm, SwiGLU, grouped-query attention, untied head) and Gemma's (GeGLU,
RMSNorm as 1 + w, norms after attention and MLP, sliding and full layers each with their own encoding) as well
as the small models trained here (LayerNorm/GELU variants included).
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from extrapolate.core.config import ModelConfig
from extrapolate.core.identity import GPT2_INIT_STD
from extrapolate.encodings import PositionalEncoding, encoding_for
from extrapolate.encodings.base import Decayed
from extrapolate.encodings.softcap import capped, soft_cap
from extrapolate.encodings.window import windowed
from extrapolate.kernels.attention import causal_attention, recorded_kernel
from extrapolate.kernels.linear import Linear

# logits of one training chunk (B × positions × vocabulary): 2^24 is 64 MiB in float32, and the default
# training step (32 rows × 256 positions × 2048 ids) in one piece, unchanged
TRAIN_LOGITS = 1 << 24


def token_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """logits (B, T, V), targets (B, T) -> per-token NLL (B, T), over rows of (B·T, V): the softmax runs over
    contiguous memory; the (B, V, T) layout of a transpose made cross_entropy copy the logits and cost 18% of a
    training step of the small model."""
    nll = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")  # (B·T,)
    return nll.view(targets.shape)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()  # normalise in float32, as Llama does
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


class UnitOffsetRMSNorm(RMSNorm):
    """RMSNorm whose weight is stored as w and scales by 1 + w, the scaling in float32 before the cast back
    (Gemma's form: its checkpoints store w, and a zero weight is the plain normalisation)."""

    def __init__(self, dim: int, eps: float):
        super().__init__(dim, eps)
        nn.init.zeros_(self.weight)

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (xf * (1.0 + self.weight.float())).to(x.dtype)


def rms_norm(dim: int, config: ModelConfig) -> RMSNorm:
    """An RMSNorm over `dim` features in the form the config's weights are stored in."""
    return UnitOffsetRMSNorm(dim, config.norm_eps) if config.norm_unit_offset else RMSNorm(dim, config.norm_eps)


def make_norm(config: ModelConfig) -> nn.Module:
    if config.norm == "rmsnorm":
        return rms_norm(config.d_model, config)
    return nn.LayerNorm(config.d_model, eps=config.norm_eps)


def tanh_gelu(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


# the gate activation of each gated MLP: SwiGLU (Llama) and GeGLU with tanh-approximated GELU (Gemma)
GATES = {"swiglu": F.silu, "geglu": tanh_gelu}


class MLP(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.gate = GATES.get(config.mlp)  # None: an ungated GELU MLP
        hidden = config.ff_dim
        if self.gate is not None:
            self.gate_proj = Linear(config.d_model, hidden, bias=False)
        self.up_proj = Linear(config.d_model, hidden, bias=False)
        self.down_proj = Linear(hidden, config.d_model, bias=False)

    def forward(self, x):
        if self.gate is not None:
            return self.down_proj(self.gate(self.gate_proj(x)) * self.up_proj(x))
        return self.down_proj(F.gelu(self.up_proj(x)))


class Attention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = config.n_heads, config.kv_heads, config.head_dim
        qkv_bias = bool(config.qkv_bias)
        self.q_proj = Linear(config.d_model, self.heads * self.head_dim, bias=qkv_bias)
        self.k_proj = Linear(config.d_model, self.kv_heads * self.head_dim, bias=qkv_bias)
        self.v_proj = Linear(config.d_model, self.kv_heads * self.head_dim, bias=qkv_bias)
        self.o_proj = Linear(self.heads * self.head_dim, config.d_model, bias=False)
        if config.qk_norm:  # one RMSNorm over each head's width, shared by the heads (Qwen3, Gemma 3)
            self.q_norm = rms_norm(self.head_dim, config)
            self.k_norm = rms_norm(self.head_dim, config)
        self.qk_norm = bool(config.qk_norm)
        # the kernels divide scores by √head_dim: queries scaled by √(head_dim / s) make that q·k / √s
        self.query_scale = None if config.attention_scalar is None else (self.head_dim / config.attention_scalar) ** 0.5

    def forward(
        self, x, pos, encoding: PositionalEncoding, kernel: str, cache: dict | None = None, seq_len: int | None = None
    ):
        batch, length, _ = x.shape
        q = self.q_proj(x).view(batch, length, self.heads, self.head_dim)  # (B, T, H, Dh)
        k = self.k_proj(x).view(batch, length, self.kv_heads, self.head_dim)  # (B, T, Hkv, Dh)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)  # (B, H, T, Dh), (B, Hkv, T, Dh)
        v = self.v_proj(x).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)  # (B, Hkv, T, Dh)
        log_forget = encoding.log_forget(x)  # (B, H, T) float32 where a forget gate decays the scores (FoX)
        q, k = encoding.rotate(q, k, pos, seq_len)
        if self.query_scale is not None:
            q = q * self.query_scale
        if cache is not None:  # keys and values of earlier positions, already rotated
            if "k" in cache:
                k, v = (
                    torch.cat((cache["k"].expand(batch, -1, -1, -1), k), 2),
                    torch.cat((cache["v"].expand(batch, -1, -1, -1), v), 2),
                )
            cache["k"], cache["v"] = k, v
        if log_forget is not None:
            encoding = Decayed(encoding, cumulative_decay(log_forget, cache))
        out = causal_attention(q, k, v, encoding, kernel)  # (B, H, T, Dh)
        return self.o_proj(out.transpose(1, 2).reshape(batch, length, -1))


def cumulative_decay(log_forget: torch.Tensor, cache: dict | None) -> torch.Tensor:
    """(B, H, Tk) float32 c, the running sum of the log forget gate over every key position: the new
    positions' (B, H, T) continue the cache's, which keeps c of its positions."""
    if cache is None:
        return log_forget.cumsum(-1)
    if "decay" not in cache:
        cache["decay"] = log_forget.cumsum(-1)
        return cache["decay"]
    past = cache["decay"].expand(log_forget.shape[0], -1, -1)  # a cache of batch 1 serves any batch
    cache["decay"] = torch.cat((past, past[..., -1:] + log_forget.cumsum(-1)), -1)
    return cache["decay"]


class Block(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.attn_norm, self.attn = make_norm(config), Attention(config)
        self.mlp_norm, self.mlp = make_norm(config), MLP(config)
        self.post_norms = bool(config.post_norms)
        if self.post_norms:  # Gemma 2 and 3: each output normed again before it joins the residual
            self.attn_out_norm, self.mlp_out_norm = make_norm(config), make_norm(config)

    def forward(self, x, pos, encoding, kernel, cache=None, seq_len=None):
        if self.post_norms:
            x = x + self.attn_out_norm(self.attn(self.attn_norm(x), pos, encoding, kernel, cache, seq_len))
            return x + self.mlp_out_norm(self.mlp(self.mlp_norm(x)))
        x = x + self.attn(self.attn_norm(x), pos, encoding, kernel, cache, seq_len)
        return x + self.mlp(self.mlp_norm(x))


class SoftCappedHead(Linear):
    """The output head with its logits soft-capped to (-c, c) as c·tanh(logits / c) (Gemma 2's final
    soft-capping), so every caller of `lm_head` gets the logits the checkpoint computes."""

    def __init__(self, d_model: int, vocab_size: int, cap: float):
        super().__init__(d_model, vocab_size, bias=False)
        self.cap = cap

    def forward(self, x):
        return soft_cap(super().forward(x), self.cap)


def sliding_rope(config: ModelConfig) -> PositionalEncoding | None:
    """The sliding layers' own plain RoPE (Gemma 3's local base); None where they rotate as the full layers."""
    if config.sliding_rope_base is None:
        return None
    return encoding_for(dataclasses.replace(config, rope_base=config.sliding_rope_base), "rope")


class TransformerLM(nn.Module):
    def __init__(self, config: ModelConfig, encoding: PositionalEncoding | None = None):
        super().__init__()
        self.config = config.validate()
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = make_norm(config)
        if config.logit_softcap is None:
            self.lm_head = Linear(config.d_model, config.vocab_size, bias=False)
        else:
            self.lm_head = SoftCappedHead(config.d_model, config.vocab_size, config.logit_softcap)
        if config.tie_embeddings:
            self.lm_head.weight = self.embed.weight
        self._kernel = "auto"  # the requested attention kernel: `use_kernel`
        self.training_forward = None  # a compiled `hidden_states` for training steps (`compile_training`)
        # recompute each block's activations in the backward pass instead of keeping them: training at long
        # lengths (a pretrained model fine-tuned at 16k) then holds one block's activations, not all of them
        self.checkpointing = False
        self.apply(self._init_weights)
        if config.embed_std is not None:
            nn.init.normal_(self.embed.weight, std=config.embed_std)
        self.sliding_rope = sliding_rope(config)  # kept by `set_encoding`, which swaps the full layers' encoding
        self.set_encoding(encoding or encoding_for(config))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=GPT2_INIT_STD)

    @property
    def kernel(self) -> str:
        """The requested attention kernel (one of `kernels.attention.KERNELS`); `causal_attention` plans what
        runs from it for each call's shapes, device and dtype."""
        return self._kernel

    def use_kernel(self, requested: str) -> None:
        """Request an attention kernel by name (`--kernel`): the one way the model is given one."""
        self._kernel = requested

    def set_encoding(self, encoding: PositionalEncoding) -> None:
        """Swap the positional encoding (e.g. a RoPE scaling at evaluation); encodings with their own
        parameters keep them, so only parameter-free kinds should be swapped onto a trained model. With sliding
        and full layers (Gemma), the full layers take it; the sliding layers keep their window, and their own
        RoPE where they have one (Gemma 3's local RoPE: an extension of such a checkpoint stretches its full
        layers only, as a replaced `rope_parameters` of its full layers does in transformers), unless the
        encoding replaces every layer's (`every_layer`: DroPE removes the rotation everywhere). Every layer keeps
        the checkpoint's soft cap of attention scores (Gemma 2)."""
        config, cap = self.config, self.config.attention_softcap
        if config.layer_types is None:
            self.encoding = windowed(capped(encoding, cap), config.sliding_window)  # a checkpoint's window stays
            return
        self.encoding = capped(encoding, cap)
        keeps_local = self.sliding_rope is not None and not getattr(encoding, "every_layer", False)
        local = capped(self.sliding_rope, cap) if keeps_local else self.encoding
        self.sliding_encoding = windowed(local, config.sliding_window)

    def layer_encodings(self) -> list[PositionalEncoding]:
        """The encoding each layer attends with, in layer order: `encoding` in every layer, or, where the config
        names sliding and full layers, `sliding_encoding` in the sliding ones."""
        if self.config.layer_types is None:
            per_layer = getattr(self.encoding, "for_layer", None)  # a hybrid: each layer its own (rope-nope)
            if per_layer is not None:
                return [per_layer(index) for index in range(len(self.blocks))]
            return [self.encoding] * len(self.blocks)
        return [self.sliding_encoding if kind == "sliding" else self.encoding for kind in self.config.layer_types]

    def ran_kernels(self, requested: str, device, dtype: torch.dtype, shapes) -> str:
        """What attention calls of these (queries, keys) `shapes` ran (`kernels.attention.recorded_kernel`)."""
        return recorded_kernel(self.attention_encodings(), requested, device, dtype, shapes)

    def attention_encodings(self) -> list[PositionalEncoding]:
        """The distinct encodings the layers attend with, in the order the layers first use them: what the
        kernels a measurement ran are planned for."""
        return list({id(encoding): encoding for encoding in self.layer_encodings()}.values())

    def token_embeddings(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, T) -> (B, T, D): the embedding rows, times the config's multiplier in their dtype (Gemma's
        √d_model, rounded to that dtype as its checkpoints compute it)."""
        x = self.embed(tokens)  # (B, T, D)
        multiplier = self.config.embed_multiplier
        return x if multiplier is None else x * x.new_tensor(multiplier)

    def hidden_states(
        self,
        tokens: torch.Tensor,
        cache: list[dict] | None = None,
        seq_len: int | None = None,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """tokens: (B, T) int64 -> final normed hidden states (B, T, D).

        With `cache` (one dict per layer, from `new_cache`), the tokens continue the cached sequence and
        their keys and values are appended; a cache of batch 1 serves any batch of continuations.
        `seq_len`: the full length when a sequence is fed in pieces (length-dependent RoPE scalings).
        `positions`: (T,) increasing position ids of the tokens in place of 0 … T-1 (PoSE's skipped ids while
        fine-tuning, as transformers' `position_ids`); without a cache only."""
        if positions is None:
            offset = cache[0]["k"].shape[2] if cache and "k" in cache[0] else 0
            positions = torch.arange(offset, offset + tokens.shape[1], device=tokens.device)  # (T,)
        pos = self.encoding.positions(positions)  # (T,) once per forward: every layer sees the same positions
        x = self.encoding.embed(self.token_embeddings(tokens), pos)
        recompute = self.checkpointing and torch.is_grad_enabled() and cache is None
        for i, (block, encoding) in enumerate(zip(self.blocks, self.layer_encodings())):
            if recompute:
                x = checkpoint(block, x, pos, encoding, self.kernel, None, seq_len, use_reentrant=False)
                continue
            x = block(x, pos, encoding, self.kernel, cache[i] if cache is not None else None, seq_len)
        return self.norm(x)

    def compile_training(self) -> None:
        """Training steps (gradients on, no cache) run `hidden_states` through torch.compile; evaluation, the
        retrieval probes and decoding from a cache stay eager, so their many shapes never recompile."""
        self.training_forward = torch.compile(self.hidden_states)

    def new_cache(self) -> list[dict]:
        return [{} for _ in self.blocks]

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T) -> logits (B, T, V). For long inputs prefer `token_nll`, which never holds all logits."""
        return self.lm_head(self.hidden_states(tokens, positions=positions))

    def token_nll(
        self, tokens: torch.Tensor, targets: torch.Tensor, chunk: int = 2048, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Per-token negative log-likelihood (B, T) in float32; the head and the loss run in chunks of
        positions so a (B, T, vocabulary) logits tensor is never held at once. In training each chunk holds at
        most TRAIN_LOGITS logits and is recomputed in the backward pass instead of kept for it, so training
        memory grows with the model and the batch's hidden states, not with batch × length × vocabulary
        (gradients are the same: the recomputation repeats the forward exactly)."""
        compiled = self.training_forward is not None and torch.is_grad_enabled()
        forward = self.training_forward if compiled else self.hidden_states
        hidden = forward(tokens, positions=positions)  # (B, T, D)
        batch, length = targets.shape
        training = torch.is_grad_enabled() and hidden.requires_grad
        if training:
            chunk = max(1, TRAIN_LOGITS // (batch * self.config.vocab_size))
        if chunk >= length:  # one chunk: nothing to save by recomputing it
            return self._chunk_nll(hidden, targets)
        pieces = []
        # split, not slices: the backward of a split concatenates the chunks' gradients once, where each
        # slice's backward would allocate a zero gradient of the whole (B, T, D) hidden state
        for part, wanted in zip(hidden.split(chunk, dim=1), targets.split(chunk, dim=1)):  # (B, c, D), (B, c)
            pieces.append(
                checkpoint(self._chunk_nll, part, wanted, use_reentrant=False)
                if training
                else self._chunk_nll(part, wanted)
            )  # (B, c)
        return torch.cat(pieces, dim=1)

    def _chunk_nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """hidden (B, c, D), targets (B, c) -> NLL (B, c) float32 through the (B, c, V) logits."""
        return token_cross_entropy(self.lm_head(hidden).float(), targets)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
