"""The interop check of docs/pretrained.md on a real checkpoint: SmolLM2-135M (GGUF, dequantized) in the project's
model vs transformers' own Llama with the matching rope_type, max |Δ logit| in fp32 per encoding.

    python benchmarks/smollm2_interop.py [--length 8448]
"""

import argparse

import torch

from extrapolate.data.hf_extra import require_transformers
from extrapolate.data.known_models import fetch_known
from extrapolate.data.pretrained import from_hf_model
from extrapolate.data.rope_config import hf_rope_parameters
from extrapolate.encodings import build_encoding


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--length", type=int, default=8448, help="tokens (past the 8192-token context)")
    parser.add_argument("--factor", type=float, default=2.0)
    args = parser.parse_args()
    transformers = require_transformers()
    path = fetch_known("smollm2-135m")
    reference = transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, torch_dtype=torch.float32
    )
    ours = from_hf_model(reference)
    config, original = ours.config, ours.config.max_len
    torch.manual_seed(0)
    tokens = torch.randint(0, config.vocab_size, (1, args.length))
    for encoding in ("rope", "pi", "dynamic-ntk", "yarn", "llama3"):
        factor = 1.0 if encoding == "rope" else args.factor
        ours.set_encoding(
            build_encoding(
                encoding,
                d_model=config.d_model,
                n_heads=config.n_heads,
                head_dim=config.head_dim,
                max_len=original,
                base=config.rope_base,
                factor=factor,
                original_len=original,
            )
        )
        hf_config = reference.config.__class__.from_dict(reference.config.to_dict())
        hf_config.rope_parameters = hf_rope_parameters(encoding, config.rope_base, factor, original)
        theirs = transformers.LlamaForCausalLM(hf_config).eval()
        theirs.load_state_dict(reference.state_dict())
        with torch.no_grad():
            expected = theirs(tokens).logits[0, -512:]
            hidden = ours.hidden_states(tokens)
            got = ours.lm_head(hidden[0, -512:])
            diff = (got - expected).abs().max().item()
        print(
            f"{encoding:12s} length {args.length}: max |Δ logit| over the last 512 positions = {diff:.2e}", flush=True
        )
        del theirs


if __name__ == "__main__":
    main()
