"""What the floor under the key bias (`kernels.fused_bias._floor`) saves and costs on this CPU: ALiBi's and
FoX's fused kernels with and without it, beside RoPE's fused causal SDPA on the same shapes, attention alone,
in alternating rounds (best of `--rounds`), and how far the two outputs differ. `--flush-subnormals` runs with
the CPU flushing subnormal floats to zero (`torch.set_flush_denormal`), which emulates a CPU where they cost
nothing: there the floor may only cost, never save. One CSV row per kernel, with the machine it ran on. Run
from the repository root:

    python benchmarks/bias_floor.py --length 16384 --out results/bench-cpus/xeon-amx/floor.csv
    python benchmarks/bias_floor.py --length 16384 --flush-subnormals --out results/bench-cpus/xeon-amx/floor-ftz.csv
"""

import argparse
from pathlib import Path

import pandas as pd
import torch

from extrapolate.bench.measure import alternating_best
from extrapolate.core.machine import machine
from extrapolate.encodings.bias import alibi_slopes
from extrapolate.kernels.fused_bias import FUSED_ROWS, key_bias_attention
from extrapolate.kernels.sdpa import sdpa

CPU = torch.device("cpu")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=16384)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--flush-subnormals", action="store_true")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.flush_subnormals and not torch.set_flush_denormal(True):
        parser.error("this CPU cannot flush subnormals to zero")
    generator = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(3, 1, args.heads, args.length, args.head_dim, generator=generator)
    slope = torch.tensor(alibi_slopes(args.heads))[None, :, None, None]  # (1, H, 1, 1)
    positions = torch.arange(args.length, dtype=torch.float32)
    # FoX's cumulative log forget gate, gates drawn around sigmoid(2) ≈ 0.88 as a trained model's often are
    decay = torch.nn.functional.logsigmoid(2 + torch.randn(1, args.heads, args.length, generator=generator))
    decay = decay.cumsum(-1)  # (1, H, T)
    biases = {
        "alibi": lambda a0, end: slope * (positions[:end] - a0),  # (1, H, 1, end)
        "fox": lambda a0, end: (decay[..., a0 : a0 + 1] - decay[..., :end])[:, :, None],  # (1, H, 1, end)
    }
    contenders = {("rope", "sdpa"): lambda: sdpa(q, k, v, is_causal=True)}
    for name, bias in biases.items():
        for floor in (True, False):
            label = "floor" if floor else "no floor"
            contenders[(name, label)] = lambda b=bias, f=floor: key_bias_attention(q, k, v, b, FUSED_ROWS, f)
    with torch.no_grad():
        best = alternating_best(contenders, args.rounds, CPU)
        differ = {
            name: (key_bias_attention(q, k, v, b, FUSED_ROWS) - key_bias_attention(q, k, v, b, FUSED_ROWS, False))
            .abs()
            .max()
            .item()
            for name, b in biases.items()
        }
    rope = best[("rope", "sdpa")]
    rows = [
        {
            "encoding": name,
            "variant": label,
            "length": args.length,
            "heads": args.heads,
            "head_dim": args.head_dim,
            "subnormals": "flushed" if args.flush_subnormals else "kept",
            "seconds": seconds,
            "vs_rope": seconds / rope,
            "max_difference": differ.get(name, 0.0),
            **machine(CPU),
        }
        for (name, label), seconds in best.items()
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(args.out, index=False)
    for row in rows:
        print(
            f"{row['encoding']:6} {row['variant']:9} {row['seconds']:.3f} s  {row['vs_rope']:.2f}× RoPE"
            f"  floored vs not: {row['max_difference']:.1e}"
        )


if __name__ == "__main__":
    main()
