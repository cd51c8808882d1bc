"""Checkpoints: weights as safetensors, the config as JSON, optimizer and progress as a torch file.
Every file is written atomically, so a kill at any moment leaves the previous checkpoint intact."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from .atomic import atomic_path, write_text
from .config import TrainConfig, canonical_json, train_config_from_dict
from .errors import UserError
from .model import TransformerLM

WEIGHTS, CONFIG, STATE, COMPLETE = "model.safetensors", "config.json", "state.pt", "complete.json"


def weights_dict(model: TransformerLM) -> dict[str, torch.Tensor]:
    # tied embeddings share storage: store the head only when it is a separate tensor
    return {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()
            if not (model.config.tie_embeddings and k == "lm_head.weight")}


def save_checkpoint(folder: Path, config: TrainConfig, model: TransformerLM, state: dict | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_text(folder / CONFIG, json.dumps(json.loads(canonical_json(config)), indent=2))
    with atomic_path(folder / WEIGHTS) as tmp:
        save_file(weights_dict(model), str(tmp), metadata={"config": canonical_json(config)})
    if state is not None:
        with atomic_path(folder / STATE) as tmp:
            torch.save(state, tmp)


def read_config(folder: Path) -> TrainConfig:
    try:
        return train_config_from_dict(json.loads((folder / CONFIG).read_text()))
    except FileNotFoundError:
        raise UserError(f"{folder} is not a checkpoint (no {CONFIG})") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"checkpoint config {folder / CONFIG} is corrupt: {exc}") from None


def load_weights(folder: Path, model: TransformerLM, expected: TrainConfig | None = None) -> None:
    path = folder / WEIGHTS
    try:
        tensors = load_file(str(path))
    except FileNotFoundError:
        raise UserError(f"checkpoint {folder} has no {WEIGHTS}") from None
    except Exception as exc:  # safetensors raises its own error type for truncated or garbled files
        raise UserError(f"checkpoint {path} is corrupt ({str(exc).splitlines()[0]})") from None
    if expected is not None:
        from safetensors import safe_open

        with safe_open(str(path), "pt") as handle:
            stored = (handle.metadata() or {}).get("config")
        if stored is not None and stored != canonical_json(expected):
            raise UserError(f"checkpoint {folder} was trained with a different config than its config.json")
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    missing = [k for k in missing if not (model.config.tie_embeddings and k == "lm_head.weight")]
    if missing or unexpected:
        raise UserError(f"checkpoint {folder} does not match the model (missing {missing[:3]}, unexpected {unexpected[:3]})")


def load_state(folder: Path) -> dict | None:
    path = folder / STATE
    if not path.exists():
        return None
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:
        raise UserError(f"training state {path} is corrupt ({str(exc).splitlines()[0]}); delete it to restart") from None


def mark_complete(folder: Path, summary: dict) -> None:
    write_text(folder / COMPLETE, json.dumps(summary, indent=2))


def is_complete(folder: Path) -> bool:
    return (folder / COMPLETE).exists() and (folder / WEIGHTS).exists()


def read_summary(folder: Path) -> dict:
    return json.loads((folder / COMPLETE).read_text())
