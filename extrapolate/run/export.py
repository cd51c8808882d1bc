"""`extrapolate export`: a RoPE model trained here as a Hugging Face Llama checkpoint, and a pretrained
checkpoint as a run stretched it (its own family, the run's RoPE scaling)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from extrapolate.core.atomic import atomic_folder
from extrapolate.core.errors import UserError
from extrapolate.core.paths import folder_target
from extrapolate.data.families import llama_config
from extrapolate.data.hf_extra import require_transformers
from extrapolate.data.weight_names import to_hf_names
from extrapolate.model import TransformerLM
from extrapolate.training.finetune import read_lineage


def export_run(source: Path, out: Path) -> None:
    """Export the model of a run folder (its one model and scaling), of a run record (`run.json` or
    `runs/<run id>.json`) or of a checkpoint folder. A run of a training-free RoPE scaling exports with that
    scaling's `rope_parameters`: the checkpoint computes what the run evaluated."""
    from extrapolate.core.paths import cache_dir
    from extrapolate.data.tokenizers import tokenizer_of_model
    from extrapolate.training.train import load_trained

    record = run_record(source)
    if record and (record.get("training") or {}).get("pretrained") and not record.get("finetune"):
        check_export_folder(out)
        return export_pretrained(record, out)
    folder = cache_dir() / "models" / str(record["model_folder"]) if record else source
    if not (folder / "config.json").exists():
        if record:  # a run whose model is not in this machine's cache
            raise UserError(
                f"the model of run {source} is not in the model cache ({folder}): run the same "
                "command again to train it, then export"
            )
        raise UserError(f"{source} is neither a run folder, a run record nor a checkpoint folder")
    check_export_folder(out)
    trained = load_trained(folder, torch.device("cpu"))
    lineage = read_lineage(folder)
    export_hf(
        trained.model,
        out,
        tokenizer_of_model(folder, trained.config.tokenizer),
        lineage,
        scaling=None if lineage else record and record.get("encoding"),
    )


def export_pretrained(record: dict, out: Path) -> None:
    """The pretrained checkpoint a run evaluated, with the RoPE it evaluated it with: transformers' own model of
    the checkpoint (any family that loads here), its `rope_parameters` replaced by the run's scaling the way
    transformers reads a replaced scaling, saved with its tokenizer. As released, the checkpoint is saved as it
    is. The folder appears whole or not at all."""
    from extrapolate.data.families import config_from_hf
    from extrapolate.data.pretrained import load_transformers
    from extrapolate.data.rope_config import released_rope, replace_rope

    name = str(record["training"]["pretrained"])
    hf_model, tokenizer = load_transformers(name)
    scaling = record.get("encoding") or {}
    released = released_rope(hf_model.config)
    config = hf_model.config
    if scaling.get("name", "rope") != "rope" or released.encoding != "rope":
        ours = config_from_hf(config)
        plain = {"rope_type": "default", "rope_theta": float(scaling.get("base", ours.rope_base))}
        rope = plain if scaling.get("name", "rope") == "rope" else zero_shot_rope(ours, scaling)
        if rope is None:
            raise UserError(f"{scaling.get('name')} has no transformers equivalent: the run cannot be exported")
        replace_rope(config, rope)
        # transformers' dynamic NTK counts from max_position_embeddings, every other type from the L it is given
        if rope["rope_type"] == "dynamic":
            config.max_position_embeddings = int(scaling.get("original_len", released.original_len))
        if hasattr(config, "original_max_position_embeddings"):  # Phi-3's own copy of L takes precedence
            config.original_max_position_embeddings = int(scaling.get("original_len", released.original_len))
    with atomic_folder(out) as staging:
        hf_model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / "extrapolate.json").write_text(
            json.dumps({"source": "extrapolate", "pretrained": name, "scaling": scaling}, indent=2)
        )


def run_record(source: Path) -> dict | None:
    """The run record `source` names (a record file, or a run folder whose runs all export to one
    checkpoint), or None for a checkpoint folder."""
    from extrapolate.core.paths import RUNS_FOLDER
    from extrapolate.core.readers import read_json

    if source.is_file():
        return read_json(source, "run record", fields=("model_folder",))
    if not (source / "run.json").exists():
        return None
    records = {
        path: read_json(path, "run record", fields=("model_folder",))
        for path in sorted((source / RUNS_FOLDER).glob("*.json"))
    }
    exports = {json.dumps([r["model_folder"], r.get("encoding")], sort_keys=True) for r in records.values()}
    if len(exports) > 1:  # a sweep: several models or scalings, each its own checkpoint
        names = ", ".join(f"{path.stem} {run_label(r)}" for path, r in list(records.items())[:4])
        names += ", …" if len(records) > 4 else ""
        raise UserError(
            f"{source} holds {len(records)} runs of {len(exports)} models or scalings; export one by its "
            f"record: {source / RUNS_FOLDER}/<run id>.json ({names})"
        )
    return read_json(source / "run.json", "run record", fields=("model_folder",))


def run_label(record: dict) -> str:
    """A run record's encoding and seed as a listing shows them beside its id, e.g. "(yarn, seed 0)"."""
    request = record.get("request") if isinstance(record.get("request"), dict) else {}
    encoding = (record.get("encoding") or {}).get("name") if isinstance(record.get("encoding"), dict) else None
    return f"({encoding or request.get('encoding', '?')}, seed {request.get('seed', '?')})"


def check_export_folder(out: Path) -> None:
    folder_target(out, "export folder")
    if out.is_dir() and any(out.iterdir()):
        raise UserError(f"export folder {out} is not empty: name a new folder")


def export_hf(
    model: TransformerLM, out: Path, tokenizer=None, finetune: dict | None = None, scaling: dict | None = None
) -> None:
    """Write a RoPE model of the project as a Hugging Face Llama checkpoint (config.json + safetensors), with
    its tokenizer when that is a BPE (tokenizer.json + tokenizer_config.json, for AutoTokenizer). A model
    fine-tuned with a RoPE scaling (`finetune`: its lineage), or evaluated with one without training
    (`scaling`: a run record's `encoding`), gets the matching `rope_parameters`, so that transformers
    computes the logits it was fine-tuned and evaluated with. The folder appears whole or not at all."""
    transformers = require_transformers()
    config = model.config
    if config.encoding != "rope":
        raise UserError(f"only RoPE models export to Llama checkpoints; this one uses {config.encoding}")
    if config.mlp != "swiglu" or config.norm != "rmsnorm":
        raise UserError("only RMSNorm + SwiGLU models export to Llama checkpoints")
    rope = scaled_rope(config, finetune) if finetune else zero_shot_rope(config, scaling)
    # transformers' "dynamic" type reads its original length from max_position_embeddings itself: written as
    # the fine-tune's L', dynamic scaling would only start past L' (the model was fine-tuned scaling from L)
    dynamic = finetune is not None and rope is not None and rope["rope_type"] == "dynamic"
    hf_config = llama_config(
        config, rope_parameters=rope, max_positions=int(finetune["original_len"]) if dynamic else None
    )
    hf_model = transformers.LlamaForCausalLM(hf_config)
    state = to_hf_names({k: v.detach().float() for k, v in model.state_dict().items()})
    state = {k: v for k, v in state.items() if config.stored(k)}
    missing, unexpected = hf_model.load_state_dict(state, strict=False)
    missing = [k for k in missing if config.stored(k)]
    if missing or unexpected:
        raise UserError(f"export failed: missing {missing[:3]}, unexpected {unexpected[:3]}")
    if config.tie_embeddings:
        hf_model.tie_weights()
    record = {
        "source": "extrapolate",
        "train_len": config.max_len,
        "tokenizer": getattr(tokenizer, "identity", None),
        "finetune": finetune,
        "scaling": scaling if rope is not None and not finetune else None,
    }
    with atomic_folder(out) as staging:
        hf_model.save_pretrained(staging)
        if hasattr(tokenizer, "to_transformers"):
            tokenizer.to_transformers().save_pretrained(staging)
        (staging / "extrapolate.json").write_text(json.dumps(record, indent=2))


def zero_shot_rope(config, scaling: dict | None) -> dict | None:
    """transformers' `rope_parameters` for a training-free scaling a run evaluated the model with (its record's
    `encoding`: name, base, factor, original length and options); None for the model's own encoding."""
    from extrapolate.data.rope_config import hf_rope_parameters
    from extrapolate.encodings import get_spec

    if not scaling or get_spec(scaling["name"]).trains_own_model:
        return None
    options = {k: v for k, v in scaling.items() if k not in ("name", "base", "factor", "original_len")}
    return hf_rope_parameters(
        scaling["name"],
        float(scaling.get("base", config.rope_base)),
        float(scaling.get("factor", 1.0)),
        int(scaling.get("original_len", config.max_len)),
        options,
        head_dim=config.rotated_dim,
    )


def scaled_rope(config, finetune: dict | None) -> dict | None:
    """transformers' `rope_parameters` for a model fine-tuned with a RoPE scaling; None for plain RoPE."""
    from extrapolate.data.rope_config import hf_rope_parameters
    from extrapolate.encodings import get_spec

    if not finetune or get_spec(finetune["encoding"]).trains_own_model:
        return None
    return hf_rope_parameters(
        finetune["encoding"],
        config.rope_base,
        float(finetune["factor"]),
        int(finetune["original_len"]),
        head_dim=config.head_dim,
    )
