"""What the floor under the key bias (`kernels.fused_bias._floor`) saves and costs on this CPU: ALiBi's and
FoX's fused kernels with and without it, beside RoPE's fused causal SDPA on the same shapes, attention alone,
in alternating rounds (best of `--rounds`), and how far the two outputs differ. `--flush-subnormals` runs with
the CPU flushing subnormal floats to zero (`torch.set_flush_denormal`), which emulates a CPU where they cost
nothing: there the floor may only cost, never save. One CSV row per kernel, with the machine it ran on. Run
from the repository root:

    python benchmarks/bias_floor.py --length 16384 --out results/bench-cpus/xeon-amx/floor.csv
    python benchmarks/bias_floor.py --length 16384 --flush-subnormals --out results/bench-cpus/xeon-amx/floor-ftz.csv
"""

import torch
from attention_shapes import random_qkv, shape_parser, timed_rows, write_rows

from extrapolate.encodings.bias import alibi_slopes
from extrapolate.kernels.fused_bias import FUSED_ROWS, key_bias_attention


def main() -> None:
    parser = shape_parser(__doc__)
    parser.add_argument("--flush-subnormals", action="store_true")
    args = parser.parse_args()
    if args.flush_subnormals and not torch.set_flush_denormal(True):
        parser.error("this CPU cannot flush subnormals to zero")
    q, k, v, generator = random_qkv(args)
    slope = torch.tensor(alibi_slopes(args.heads))[None, :, None, None]  # (1, H, 1, 1)
    positions = torch.arange(args.length, dtype=torch.float32)
    # FoX's cumulative log forget gate, gates drawn around sigmoid(2) ≈ 0.88 as a trained model's often are
    decay = torch.nn.functional.logsigmoid(2 + torch.randn(1, args.heads, args.length, generator=generator))
    decay = decay.cumsum(-1)  # (1, H, T)
    biases = {
        "alibi": lambda a0, end: slope * (positions[:end] - a0),  # (1, H, 1, end)
        "fox": lambda a0, end: (decay[..., a0 : a0 + 1] - decay[..., :end])[:, :, None],  # (1, H, 1, end)
    }
    contenders = {}
    for name, bias in biases.items():
        for floor in (True, False):
            label = "floor" if floor else "no floor"
            contenders[(name, label)] = lambda b=bias, f=floor: key_bias_attention(q, k, v, b, FUSED_ROWS, f)
    subnormals = "flushed" if args.flush_subnormals else "kept"
    rows = timed_rows(args, q, k, v, contenders, subnormals=subnormals)
    with torch.no_grad():
        differ = {
            name: (key_bias_attention(q, k, v, b, FUSED_ROWS) - key_bias_attention(q, k, v, b, FUSED_ROWS, False))
            .abs()
            .max()
            .item()
            for name, b in biases.items()
        }
    for row in rows:
        row["max_difference"] = differ.get(row["encoding"], 0.0)
    write_rows(rows, args.out)
    for row in rows:
        print(
            f"{row['encoding']:6} {row['variant']:9} {row['seconds']:.3f} s  {row['vs_rope']:.2f}× RoPE"
            f"  floored vs not: {row['max_difference']:.1e}"
        )


if __name__ == "__main__":
    main()
