"""Fine-tuning at an extended length L' = s·L, the way PI, NTK and YaRN are used: start from the cached base model
trained at L, set the encoding for L' (a RoPE scaling with factor s; the model's own encoding otherwise, a
learned table stretched to L' rows), continue training at L' for N steps, evaluate.

The schedule is a short linear warmup, then a constant learning rate (as in the PI and YaRN papers), and batches
depend on (seed, step) alone, so the first N steps of a longer fine-tune are exactly the N-step fine-tune: a
fine-tune continues from the longest finished shorter one of the same kind instead of starting again, and a
sweep over 0, 25, 100, 400 steps costs 400 steps. Fine-tuned models are cached by (base model, fine-tune
config), resumable after a kill, and carry their lineage (`finetune.json`, run.json, results rows)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from extrapolate.core.atomic import atomic_path, write_text
from extrapolate.core.config import AdapterConfig, LongCEConfig, TrainConfig, config_hash
from extrapolate.core.defaults import FINETUNE_WARMUP_STEPS
from extrapolate.core.errors import UserError
from extrapolate.core.identity import finetune_folder_name, omit_unset
from extrapolate.core.paths import cache_dir
from extrapolate.encodings import encoding_for, get_spec
from extrapolate.encodings.base import ShiftedSparse
from extrapolate.model import TransformerLM
from extrapolate.training import checkpoint as ckpt
from extrapolate.training.adapters import with_adapters
from extrapolate.training.train import TrainedModel, train

LINEAGE = "finetune.json"
CHECKPOINT_EVERY = 25


@dataclass(frozen=True)
class FinetuneConfig:
    base: str  # config hash of the base model (trained at L)
    encoding: str  # what the model is fine-tuned with: a RoPE scaling, or the base model's own encoding
    factor: float  # a RoPE scaling's s = L'/L; 1.0 for encodings that train their own model
    original_len: int  # L
    phase: TrainConfig  # the training at L': seq_len = L', steps = N, constant rate after warmup
    # PoSE: the phase reads rows of L whose position ids skip to cover this L' (data/pose.py); None: rows of L'
    pose_len: int | None = None

    @property
    def steps(self) -> int:
        return self.phase.steps

    @property
    def length(self) -> int:
        """L', the length the fine-tune is for (PoSE's rows are shorter: `phase.seq_len`)."""
        return self.pose_len or self.phase.seq_len


def finetune_config(
    base: TrainConfig,
    encoding: str,
    factor: float,
    length: int,
    steps: int,
    lr: float | None = None,
    batch_size: int | None = None,
    base_hash: str | None = None,
    adapter: AdapterConfig | None = None,
    pose: bool = False,
    longce: LongCEConfig | None = None,
) -> FinetuneConfig:
    """The fine-tune of `base` with `encoding` at `length` for `steps` steps. Defaults: a tenth of the base
    model's peak rate, and as many tokens per step as the base training (batch·L / L' rows, at least 1).
    `base_hash` names a base model not trained here (a pretrained checkpoint); default the hash of `base`.
    `adapter`: low-rank adapters train in place of the full weights (training/adapters.py). `pose`: rows of
    L with PoSE's skipped position ids up to `length` (data/pose.py) in place of rows of `length`. `longce`:
    LongCE's weights on the loss (training/longce.py)."""
    model = dataclasses.replace(base.model, max_len=length)
    rows = base.seq_len if pose else length
    phase = dataclasses.replace(
        base,
        model=model,
        seq_len=rows,
        steps=steps,
        lr=lr if lr is not None else base.lr / 10,
        batch_size=batch_size or max(1, base.batch_size * base.seq_len // rows),
        warmup_steps=FINETUNE_WARMUP_STEPS,
        min_lr_ratio=1.0,
        curriculum=None,  # a fine-tune reads rows of L' from its first step
        checkpoint_every=CHECKPOINT_EVERY,
        adapter=adapter,
        longce=longce,
    )  # constant after warmup
    name, pose_len = get_spec(encoding).name, length if pose else None
    return FinetuneConfig(base_hash or config_hash(base), name, factor, base.seq_len, phase, pose_len)


def finetune_folder(config: FinetuneConfig, root: Path | None = None) -> Path:
    name = finetune_folder_name(config.encoding, config.original_len, config.length, config.steps, config_hash(config))
    return (root or cache_dir() / "models") / name


def finetune(
    config: FinetuneConfig,
    base: TransformerLM,
    source,
    device: torch.device,
    on_step=None,
    stop_after: int | None = None,
    checkpointing: bool = False,
) -> TrainedModel:
    """The fine-tuned model: cached, resumed after a kill, or continued from a shorter finished fine-tune."""
    folder = finetune_folder(config)
    if not ckpt.is_complete(folder) and ckpt.load_state(folder) is None:
        shorter = shorter_finished(config)
        if shorter is not None:
            continue_from(shorter, folder, config)
    write_lineage(folder, config)
    return train(
        config.phase,
        source,
        device,
        folder=folder,
        on_step=on_step,
        stop_after=stop_after,
        start=lambda: starting_model(config, base, device, checkpointing),
    )


def fitted_weights(weights: dict, fresh: dict) -> dict:
    """The base model's weights, those whose shape the model at L' changes fitted to it: FoPE's frequencies
    and coefficients, which a longer L' keeps more of (encodings/fope.py `grown_to`)."""
    from extrapolate.encodings.fope import grown_to

    fitted = {}
    for name, value in weights.items():
        if name in fresh and fresh[name].shape != value.shape:
            if not name.endswith(("inv_freq", "cos_coef", "sin_coef")):
                raise UserError(f"the fine-tune's model has another shape for {name}: {tuple(fresh[name].shape)}")
            value = grown_to(value, fresh[name], name)
        fitted[name] = value
    return fitted


def starting_model(
    config: FinetuneConfig, base: TransformerLM, device: torch.device, checkpointing: bool = False
) -> TransformerLM:
    """A model of the fine-tune's shape holding the base model's weights, with the encoding it trains under
    at L': a RoPE scaling with the fine-tune's factor, or the base model's own encoding (a learned table
    stretched to L' rows by linear interpolation, so row p·L'/L starts where row p was)."""
    torch.manual_seed(config.phase.seed)
    model = TransformerLM(config.phase.model)
    weights = {k: v for k, v in base.state_dict().items()}
    table = "encoding.table.weight"
    if table in weights and config.phase.model.encoding == "learned":
        rows = weights[table]  # (L, D)
        weights[table] = F.interpolate(rows.T[None], size=config.length, mode="linear", align_corners=True)[0].T
    model.load_state_dict(fitted_weights(weights, model.state_dict()), strict=False)
    model = model.to(device)
    model.checkpointing = checkpointing  # activations recomputed in the backward pass (long L')
    model = with_training_encoding(model, config)
    adapter = config.phase.adapter
    if adapter is None:
        return model
    if adapter.group_ratio is not None:  # LongLoRA: S²-attention while fine-tuning
        model.set_encoding(ShiftedSparse(model.encoding, sparse_group(config.phase.seq_len, adapter.group_ratio)))
    return with_adapters(model, adapter).to(device)


def sparse_group(length: int, ratio: float) -> int:
    """S²-attention's group size at L': the share `ratio` of it, even and dividing it (LongLoRA asks the same)."""
    group = int(length * ratio)
    if group < 2 or group % 2 or length % group:
        raise UserError(f"LongLoRA's groups of {ratio:g}·L' = {group} tokens must be even and divide L' = {length}")
    return group


def with_training_encoding(model: TransformerLM, config: FinetuneConfig) -> TransformerLM:
    spec = get_spec(config.encoding)
    if not spec.trains_own_model:  # a RoPE scaling, parameter-free: set for L'
        encoding = encoding_for(model.config, spec.name, factor=config.factor, original_len=config.original_len)
        model.set_encoding(encoding.to(next(model.parameters()).device))
    return model


def shorter_finished(config: FinetuneConfig, root: Path | None = None) -> Path | None:
    """The finished fine-tune of the same kind with the most steps below this one's, if any is cached."""
    kind = finetune_folder_name(config.encoding, config.original_len, config.length, "*", "*")
    folders = (root or cache_dir() / "models").glob(kind)
    best, best_steps = None, 0
    for folder in folders:
        lineage = read_lineage(folder)
        if lineage is None or not ckpt.is_complete(folder):
            continue
        steps = lineage["phase"]["steps"]
        same_kind = omit_unset(lineage) == omit_unset(
            as_json(dataclasses.replace(config, phase=dataclasses.replace(config.phase, steps=steps)))
        )  # a lineage written before an optional field existed lacks it: the same as it unset
        if same_kind and best_steps < steps < config.steps:
            best, best_steps = folder, steps
    return best


def continue_from(shorter: Path, folder: Path, config: FinetuneConfig) -> None:
    """Seed `folder` with a shorter fine-tune's weights and optimizer: its steps are this run's first steps."""
    state = ckpt.load_state(shorter)
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_path(folder / ckpt.WEIGHTS) as tmp:
        shutil.copyfile(shorter / ckpt.WEIGHTS, tmp)
    with atomic_path(folder / ckpt.STATE) as tmp:
        torch.save({**state, "config_hash": config_hash(config.phase)}, tmp)


def read_lineage(folder: Path) -> dict | None:
    try:
        return json.loads((folder / LINEAGE).read_text())
    except (OSError, ValueError):
        return None


def as_json(config: FinetuneConfig) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(config), default=str))


def write_lineage(folder: Path, config: FinetuneConfig) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_text(folder / LINEAGE, json.dumps(as_json(config), indent=2))
