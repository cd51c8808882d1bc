"""bf16 evaluation on a CPU without native bf16: the prompt pass of a SmolLM2-135M-shaped model (random weights)
in float32, in bf16 with the float32-kernel linear path (`extrapolate/linear.py`) and in bf16 with torch's own
bf16 kernels, timed in one process, alternating, best of `--rounds`; plus how far the two bf16 paths' last
logits are apart. Run from the repository root: `python benchmarks/bf16_linear.py --tokens 2048`.

On a CPU with native bf16 (AVX-512 BF16, AMX) both bf16 rows take torch's kernels and time the same."""

import argparse
import time

import torch

import extrapolate.kernels.linear as linear
from extrapolate.core.config import ModelConfig
from extrapolate.core.device import autocast, cpu_has_fast_bf16
from extrapolate.model import TransformerLM

CPU = torch.device("cpu")
# SmolLM2-135M's shape: 30 layers, width 576, 9 query and 3 key/value heads, SwiGLU of 1536, 49152 tokens
SMOLLM2 = dict(
    vocab_size=49152,
    d_model=576,
    n_layers=30,
    n_heads=9,
    n_kv_heads=3,
    d_ff=1536,
    norm="rmsnorm",
    mlp="swiglu",
    tie_embeddings=True,
    norm_eps=1e-5,
    encoding="rope",
    rope_base=100000.0,
    max_len=8192,
)


def prompt_pass(model: TransformerLM, tokens: torch.Tensor, dtype: str, native: bool) -> tuple[float, torch.Tensor]:
    """Seconds for the hidden states of `tokens` (1, T), and the last position's logits (V,) in float32."""
    linear.cpu_has_fast_bf16 = (lambda: True) if native else cpu_has_fast_bf16
    with torch.no_grad(), autocast(CPU, dtype):
        start = time.perf_counter()
        hidden = model.hidden_states(tokens)  # (1, T, D)
        seconds = time.perf_counter() - start
        return seconds, model.lm_head(hidden[:, -1]).float()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(**SMOLLM2)).eval()
    tokens = torch.randint(0, SMOLLM2["vocab_size"], (1, args.tokens))
    contenders = {
        "float32": ("float32", False),
        "bf16, float32 kernels": ("bfloat16", False),
        "bf16, torch's bf16 kernels": ("bfloat16", True),
    }
    best, logits = {name: float("inf") for name in contenders}, {}
    for round_ in range(args.rounds):
        for name in contenders if round_ % 2 == 0 else reversed(contenders):
            seconds, logits[name] = prompt_pass(model, tokens, *contenders[name])
            best[name] = min(best[name], seconds)
    print(f"native bf16 on this CPU: {cpu_has_fast_bf16()}; prompt pass of {args.tokens} tokens, best of {args.rounds}")
    for name, seconds in best.items():
        print(f"  {name:28s} {seconds:7.2f} s  ({best['float32'] / seconds:.2f}x float32's speed)")
    ours, theirs = logits["bf16, float32 kernels"], logits["bf16, torch's bf16 kernels"]
    print(
        f"  last logits, the two bf16 paths: max |diff| {(ours - theirs).abs().max():.4f} at scale "
        f"{theirs.abs().max():.2f}; same argmax: {bool(ours.argmax() == theirs.argmax())}"
    )


if __name__ == "__main__":
    main()
