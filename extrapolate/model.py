"""A decoder-only transformer LM that calls the encoding's three hooks and knows no encoding by name.

It can host Llama-family weights (RMSNorm, SwiGLU, grouped-query attention, untied head) as well as the
small models trained here (LayerNorm/GELU variants included).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from extrapolate.core.config import ModelConfig
from extrapolate.core.identity import GPT2_INIT_STD
from extrapolate.encodings import PositionalEncoding, encoding_for
from extrapolate.encodings.window import windowed
from extrapolate.kernels.attention import causal_attention
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


def make_norm(config: ModelConfig) -> nn.Module:
    if config.norm == "rmsnorm":
        return RMSNorm(config.d_model, config.norm_eps)
    return nn.LayerNorm(config.d_model, eps=config.norm_eps)


class MLP(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.swiglu = config.mlp == "swiglu"
        hidden = config.ff_dim
        if self.swiglu:
            self.gate_proj = Linear(config.d_model, hidden, bias=False)
        self.up_proj = Linear(config.d_model, hidden, bias=False)
        self.down_proj = Linear(hidden, config.d_model, bias=False)

    def forward(self, x):
        if self.swiglu:
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
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
        if config.qk_norm:  # one RMSNorm over each head's width, shared by the heads (Qwen3)
            self.q_norm = RMSNorm(self.head_dim, config.norm_eps)
            self.k_norm = RMSNorm(self.head_dim, config.norm_eps)
        self.qk_norm = bool(config.qk_norm)

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
        q, k = encoding.rotate(q, k, pos, seq_len)
        if cache is not None:  # keys and values of earlier positions, already rotated
            if "k" in cache:
                k, v = (
                    torch.cat((cache["k"].expand(batch, -1, -1, -1), k), 2),
                    torch.cat((cache["v"].expand(batch, -1, -1, -1), v), 2),
                )
            cache["k"], cache["v"] = k, v
        out = causal_attention(q, k, v, encoding, kernel)  # (B, H, T, Dh)
        return self.o_proj(out.transpose(1, 2).reshape(batch, length, -1))


class Block(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.attn_norm, self.attn = make_norm(config), Attention(config)
        self.mlp_norm, self.mlp = make_norm(config), MLP(config)

    def forward(self, x, pos, encoding, kernel, cache=None, seq_len=None):
        x = x + self.attn(self.attn_norm(x), pos, encoding, kernel, cache, seq_len)
        return x + self.mlp(self.mlp_norm(x))


class TransformerLM(nn.Module):
    def __init__(self, config: ModelConfig, encoding: PositionalEncoding | None = None):
        super().__init__()
        self.config = config.validate()
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = make_norm(config)
        self.lm_head = Linear(config.d_model, config.vocab_size, bias=False)
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
        self.encoding = windowed(encoding or encoding_for(config), config.sliding_window)

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
        parameters keep them, so only parameter-free kinds should be swapped onto a trained model."""
        self.encoding = windowed(encoding, self.config.sliding_window)  # a checkpoint's window stays

    def hidden_states(
        self, tokens: torch.Tensor, cache: list[dict] | None = None, seq_len: int | None = None
    ) -> torch.Tensor:
        """tokens: (B, T) int64 -> final normed hidden states (B, T, D).

        With `cache` (one dict per layer, from `new_cache`), the tokens continue the cached sequence and
        their keys and values are appended; a cache of batch 1 serves any batch of continuations.
        `seq_len`: the full length when a sequence is fed in pieces (length-dependent RoPE scalings)."""
        offset = cache[0]["k"].shape[2] if cache and "k" in cache[0] else 0
        pos = torch.arange(offset, offset + tokens.shape[1], device=tokens.device)  # (T,)
        pos = self.encoding.positions(pos)  # (T,) once per forward: every layer sees the same positions
        x = self.encoding.embed(self.embed(tokens), pos)
        recompute = self.checkpointing and torch.is_grad_enabled() and cache is None
        for i, block in enumerate(self.blocks):
            if recompute:
                x = checkpoint(block, x, pos, self.encoding, self.kernel, None, seq_len, use_reentrant=False)
                continue
            x = block(x, pos, self.encoding, self.kernel, cache[i] if cache is not None else None, seq_len)
        return self.norm(x)

    def compile_training(self) -> None:
        """Training steps (gradients on, no cache) run `hidden_states` through torch.compile; evaluation, the
        retrieval probes and decoding from a cache stay eager, so their many shapes never recompile."""
        self.training_forward = torch.compile(self.hidden_states)

    def new_cache(self) -> list[dict]:
        return [{} for _ in self.blocks]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, T) -> logits (B, T, V). For long inputs prefer `token_nll`, which never holds all logits."""
        return self.lm_head(self.hidden_states(tokens))

    def token_nll(self, tokens: torch.Tensor, targets: torch.Tensor, chunk: int = 2048) -> torch.Tensor:
        """Per-token negative log-likelihood (B, T) in float32; the head and the loss run in chunks of
        positions so a (B, T, vocabulary) logits tensor is never held at once. In training each chunk holds at
        most TRAIN_LOGITS logits and is recomputed in the backward pass instead of kept for it, so training
        memory grows with the model and the batch's hidden states, not with batch × length × vocabulary
        (gradients are the same: the recomputation repeats the forward exactly)."""
        compiled = self.training_forward is not None and torch.is_grad_enabled()
        hidden = (self.training_forward if compiled else self.hidden_states)(tokens)  # (B, T, D)
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
