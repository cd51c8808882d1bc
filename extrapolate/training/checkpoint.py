"""Checkpoints: weights as safetensors, the config as JSON, optimizer and progress as a torch file.
Every file is written atomically, so a kill at any moment leaves the previous checkpoint intact. The progress
file holds its own copy of the weights: a kill between the two files' renames would otherwise pair one step's
weights with another step's optimizer, and the resumed training would go on from neither."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from extrapolate.core.atomic import atomic_path, write_text
from extrapolate.core.config import TrainConfig, canonical_json, train_config_from_dict
from extrapolate.core.errors import UserError
from extrapolate.core.readers import read_json, reading
from extrapolate.model import TransformerLM

WEIGHTS, CONFIG, STATE, COMPLETE = "model.safetensors", "config.json", "state.pt", "complete.json"
RETRAIN = "delete its folder to train it again"


def weights_dict(model: TransformerLM) -> dict[str, torch.Tensor]:
    # tied embeddings share storage: store the head only when it is a separate tensor
    return {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items() if model.config.stored(k)}


def save_checkpoint(folder: Path, config: TrainConfig, model: TransformerLM, state: dict | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_text(folder / CONFIG, json.dumps(json.loads(canonical_json(config)), indent=2))
    weights = weights_dict(model)
    with atomic_path(folder / WEIGHTS) as tmp:
        save_file(weights, str(tmp), metadata={"config": canonical_json(config)})
    if state is not None:  # the resume point, whole in one file: its step's optimizer and weights
        with atomic_path(folder / STATE) as tmp:
            torch.save({**state, "model": weights}, tmp)


def read_config(folder: Path) -> TrainConfig:
    path = folder / CONFIG
    if not path.exists():
        raise UserError(f"{folder} is not a checkpoint (no {CONFIG})")
    data = read_json(path, "checkpoint config", fields=("model",), hint=RETRAIN)
    with reading(path, "checkpoint config", RETRAIN):
        return train_config_from_dict(data)


def load_weights(folder: Path, model: TransformerLM, expected: TrainConfig | None = None) -> None:
    path = folder / WEIGHTS
    if not path.exists():
        raise UserError(f"checkpoint {folder} has no {WEIGHTS}")
    with reading(path, "checkpoint weights", RETRAIN):
        tensors = load_file(str(path))
    if expected is not None:
        from safetensors import safe_open

        with safe_open(str(path), "pt") as handle:
            stored = (handle.metadata() or {}).get("config")
        if stored is not None and stored != canonical_json(expected):
            raise UserError(f"checkpoint {folder} was trained with a different config than its config.json")
    with reading(path, "checkpoint weights", RETRAIN):  # a tensor of the wrong shape: not this model's weights
        missing, unexpected = model.load_state_dict(tensors, strict=False)
    check_loaded(folder, model, missing, unexpected)


def check_loaded(folder: Path, model: TransformerLM, missing: list[str], unexpected: list[str]) -> None:
    missing = [k for k in missing if model.config.stored(k)]
    if missing or unexpected:
        raise UserError(
            f"checkpoint {folder} does not match the model (missing {missing[:3]}, unexpected {unexpected[:3]})"
        )


def restore_weights(folder: Path, model: TransformerLM, state: dict) -> None:
    """The weights a resumed training goes on from: the progress file's own copy, saved with its optimizer;
    the weights file for a progress file written before it kept one."""
    if "model" not in state:
        load_weights(folder, model)
        return
    with reading(folder / STATE, "training state", RESTART):
        missing, unexpected = model.load_state_dict(state["model"], strict=False)
    check_loaded(folder, model, missing, unexpected)


STATE_FIELDS = ("optimizer", "step", "losses", "elapsed", "config_hash")
RESTART = "delete it to restart"


def plain_data(path: Path):
    """A torch file's content as plain data: torch's weights-only unpickler builds tensors, numbers, strings
    and containers, and refuses any other object before building it (building one could run code). Read
    inside `core.readers.reading`, whose line names the file."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # torch's own message suggests loading the file unsafely: not advice to pass on
        raise ValueError(
            "not plain data; only tensors, numbers and strings are read, as building any other object could run code"
        ) from None


def load_state(folder: Path) -> dict | None:
    """The optimizer and progress a resumed training starts from; None when the folder has none. The file is
    read as plain data only (tensors, numbers, strings, lists, dicts: what `train` saves): a pickle naming any
    other object is refused without building it (`plain_data`)."""
    path = folder / STATE
    if not path.exists():
        return None
    with reading(path, "training state", RESTART):
        state = plain_data(path)
        if not isinstance(state, dict) or not set(STATE_FIELDS) <= set(state):
            raise ValueError(f"not a training state: it needs {', '.join(STATE_FIELDS)}")
        if not isinstance(state["optimizer"], dict) or not {"state", "param_groups"} <= set(state["optimizer"]):
            raise ValueError("its optimizer entry is not an optimizer state")
        weights = state.get("model", {})
        if not isinstance(weights, dict) or not all(isinstance(t, torch.Tensor) for t in weights.values()):
            raise ValueError("its model entry is not a set of weights")
    return state


def mark_complete(folder: Path, summary: dict) -> None:
    write_text(folder / COMPLETE, json.dumps(summary, indent=2))


def is_complete(folder: Path) -> bool:
    return (folder / COMPLETE).exists() and (folder / WEIGHTS).exists()


def read_summary(folder: Path) -> dict:
    return read_json(folder / COMPLETE, "checkpoint summary", hint=RETRAIN)
