"""`extrapolate export`: a RoPE model trained here as a Hugging Face Llama checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from .errors import UserError
from .finetune import read_lineage
from .model import TransformerLM
from .paths import folder_target
from .pretrained import llama_config, require_transformers, to_hf_names


def export_run(run_dir: Path, out: Path) -> None:
    """Export the model of a run folder (its run.json names the model) or of a checkpoint folder."""
    from .paths import cache_dir
    from .readers import read_json
    from .tokenizers import tokenizer_of_model
    from .train import load_trained

    folder = run_dir
    if (run_dir / "run.json").exists():
        record = read_json(run_dir / "run.json", "run record", fields=("model_folder",))
        folder = cache_dir() / "models" / str(record["model_folder"])
    if not (folder / "config.json").exists():
        if folder != run_dir:  # a run folder whose model is not in this machine's cache
            raise UserError(f"the model of run folder {run_dir} is not in the model cache ({folder}): run the same "
                            "command again to train it, then export")
        raise UserError(f"{run_dir} is neither a run folder nor a checkpoint folder")
    folder_target(out, "export folder")
    trained = load_trained(folder, torch.device("cpu"))
    export_hf(trained.model, out, tokenizer_of_model(folder, trained.config.tokenizer), read_lineage(folder))


def export_hf(model: TransformerLM, out: Path, tokenizer=None, finetune: dict | None = None) -> None:
    """Write a RoPE model of the project as a Hugging Face Llama checkpoint (config.json + safetensors), with
    its tokenizer when that is a BPE (tokenizer.json + tokenizer_config.json, for AutoTokenizer). A model
    fine-tuned with a RoPE scaling (`finetune`: its lineage) gets the matching `rope_parameters`, so that
    transformers computes the logits it was fine-tuned and evaluated with."""
    transformers = require_transformers()
    config = model.config
    if config.encoding != "rope":
        raise UserError(f"only RoPE models export to Llama checkpoints; this one uses {config.encoding}")
    if config.mlp != "swiglu" or config.norm != "rmsnorm":
        raise UserError("only RMSNorm + SwiGLU models export to Llama checkpoints")
    rope = scaled_rope(config, finetune)
    # transformers' "dynamic" type reads its original length from max_position_embeddings itself: written as
    # the fine-tune's L', dynamic scaling would only start past L' (the model was fine-tuned scaling from L)
    dynamic = rope is not None and rope["rope_type"] == "dynamic"
    hf_config = llama_config(config, rope_parameters=rope,
                             max_positions=int(finetune["original_len"]) if dynamic else None)
    hf_model = transformers.LlamaForCausalLM(hf_config)
    state = to_hf_names({k: v.detach().float() for k, v in model.state_dict().items()})
    state = {k: v for k, v in state.items() if config.stored(k)}
    missing, unexpected = hf_model.load_state_dict(state, strict=False)
    missing = [k for k in missing if config.stored(k)]
    if missing or unexpected:
        raise UserError(f"export failed: missing {missing[:3]}, unexpected {unexpected[:3]}")
    if config.tie_embeddings:
        hf_model.tie_weights()
    out.mkdir(parents=True, exist_ok=True)
    hf_model.save_pretrained(out)
    if hasattr(tokenizer, "to_transformers"):
        tokenizer.to_transformers().save_pretrained(out)
    record = {"source": "extrapolate", "train_len": config.max_len, "tokenizer": getattr(tokenizer, "identity", None),
              "finetune": finetune}
    (out / "extrapolate.json").write_text(json.dumps(record, indent=2))


def scaled_rope(config, finetune: dict | None) -> dict | None:
    """transformers' `rope_parameters` for a model fine-tuned with a RoPE scaling; None for plain RoPE."""
    from .encodings import get_spec
    from .pretrained import hf_rope_parameters

    if not finetune or get_spec(finetune["encoding"]).trains_own_model:
        return None
    return hf_rope_parameters(finetune["encoding"], config.rope_base, float(finetune["factor"]),
                              int(finetune["original_len"]), head_dim=config.head_dim)
