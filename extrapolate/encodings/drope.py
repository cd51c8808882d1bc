"""DroPE (Gelberg et al., ICLR 2026, "Extending the Context of Pretrained LLMs by Dropping Their Positional
Embeddings"): a model pretrained with RoPE has its rotation removed in every layer and is recalibrated briefly
at its own training length; with no positions left, no distance past L is new to it. As the authors' code
(SakanaAI/DroPE, `custom_models/attention.py`, the `nope` attention: cos = 1 and sin = 0 in every layer, the
weights kept): applied to the RoPE model, `--finetune-steps N` recalibrates it at L (`--finetune-len`
defaults to L for it, and may not be longer). Without the recalibration it is the RoPE model without its
rotation, which the paper reports does not work: the zero-step point of the comparison. The authors' variant with
new QK norms (`qk_norm_nope`) is left out.
"""

from __future__ import annotations

from extrapolate.encodings.absolute import NoPE
from extrapolate.encodings.spec import EncodingSpec


class DroPE(NoPE):
    name = "drope"
    every_layer = True  # a model's sliding layers lose their own (local) RoPE too: no rotation is left anywhere


DROPE = EncodingSpec(
    "drope",
    "none",
    "DroPE: the RoPE model with its rotation removed in every layer, recalibrated at L by --finetune-steps "
    "(Gelberg et al. 2026)",
    lambda shape: DroPE(),
    colour="#666666",
    show=lambda query: {"note": "no positional signal: RoPE's rotation removed from a RoPE model"},
    trains_own_model=False,
    recalibrates=True,
)
