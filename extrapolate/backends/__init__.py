"""Backends: what computes a pretrained checkpoint. Each is one module behind the interface the task kinds
call (`hidden_states`, `lm_head`, `token_nll`, `new_cache`, `config`, `set_encoding`, `use_kernel`,
`ran_kernels`), so a new backend is one new module:

- `native`: the project's own `TransformerLM`, holding the checkpoint's weights (the Llama-block and Gemma
  families, `data/families.py`); every encoding and kernel of the project applies.
- `transformers`: transformers' own model for any causal LM it loads (GPT-2, BLOOM, GPT-NeoX, mixtures of
  experts, RoPE/NoPE hybrids, …), behind an adapter; the RoPE scalings transformers implements apply through
  the checkpoint's `rope_parameters`.

- `vllm`: vLLM's engine for the generation tasks (passkey's greedy answer, RULER), the checkpoint as released;
  an optional extra, refused by name where it is not installed.

`auto` takes the native model where the family is implemented (so every committed run id stays as it is) and
transformers otherwise. May import `data`, `model`, `encodings` and `core`.
"""

from __future__ import annotations

BACKENDS = ("auto", "native", "transformers", "vllm")
RESOLVED_BACKENDS = ("native", "transformers", "vllm")
