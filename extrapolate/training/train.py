"""train(config) -> a checkpoint folder. AdamW, warmup + cosine, clipping, bf16 autocast, atomic
checkpoints every N steps, resume from the last one, a NaN guard, and a cache keyed by the config hash."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from extrapolate.core.config import TrainConfig, config_hash
from extrapolate.core.device import autocast, synchronize
from extrapolate.core.distributed import SINGLE, World, check_batch, current, for_training
from extrapolate.core.errors import UserError
from extrapolate.core.faults import kill_now, kill_step
from extrapolate.core.identity import model_folder_name
from extrapolate.core.paths import cache_dir
from extrapolate.core.readers import reading
from extrapolate.data.batches import BatchSource, Curriculum, rows_of
from extrapolate.model import TransformerLM
from extrapolate.training import checkpoint as ckpt
from extrapolate.training.adapters import merged, trainable_parameters, with_adapters
from extrapolate.training.longce import longce_weights


class TrainingDiverged(UserError):
    def __init__(self, step: int, folder: Path):
        kept = (
            f"last good checkpoint kept in {folder}"
            if (folder / ckpt.STATE).exists()
            else "no checkpoint had been written yet"
        )
        super().__init__(f"training diverged (loss is NaN/Inf) at step {step}; {kept} (a lower --lr may help)")
        self.step = step


@dataclass
class TrainedModel:
    model: TransformerLM
    folder: Path
    config: TrainConfig
    summary: dict
    reused: bool


# step, total, loss, tokens per second
StepCallback = Callable[[int, int, float, float], None]


@dataclass(frozen=True)
class Probe:
    """Cheap measurements taken every `every` steps during training: retrieval accuracy at L on a few dozen
    prompts (when the model trains on retrieval prompts) and the held-out loss at L on a fixed sample (whether
    the model still generalises, or has started to memorise its corpus). They only observe: batches depend on
    (seed, step) alone, so the weights are the same with or without them; their values are kept in the
    checkpoint state, so a resumed run has the whole curve."""

    every: int
    retrieval: Callable[[TransformerLM], float] | None = None  # greedy accuracy at L
    heldout: Callable[[TransformerLM], float] | None = None  # mean NLL per held-out token at L

    def due(self, step: int, total: int) -> bool:
        return step % self.every == 0 or step == total

    def count(self, total: int) -> int:
        """How many of the steps 1 … total take a probe (`due`): every `every`-th, and the last."""
        return total // self.every + (total % self.every != 0)

    @torch.no_grad()
    def take(self, model: TransformerLM) -> list[float | None]:
        """[retrieval accuracy, held-out NLL], None for a measure this probe does not take."""
        model.eval()
        try:
            return [
                None if measure is None else round(float(measure(model)), 6)
                for measure in (self.retrieval, self.heldout)
            ]
        finally:
            model.train()


def model_folder(config: TrainConfig, root: Path | None = None) -> Path:
    name = model_folder_name(config.model.encoding, config.seq_len, config_hash(config))
    return (root or cache_dir() / "models") / name


def curriculum_of(config: TrainConfig) -> Curriculum | None:
    """The length curriculum `config` trains with, or None where every step reads rows of L."""
    return None if config.curriculum is None else Curriculum(config.curriculum)


def learning_rate(config: TrainConfig, step: int) -> float:
    """Linear warmup, then cosine decay to min_lr_ratio · lr."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    cosine = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return config.lr * (config.min_lr_ratio + (1 - config.min_lr_ratio) * cosine)


def make_optimizer(model: TransformerLM, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW, matrices decayed, vectors not; a module with an `lr_scale` other than 1 (a learned position table
    with its own recipe) gets a third group, whose rate is that multiple of the schedule's."""
    scaled = {id(p): m.lr_scale for m in model.modules() if getattr(m, "lr_scale", 1.0) != 1.0 for p in m.parameters()}
    rest = [p for p in model.parameters() if id(p) not in scaled]
    groups = [
        {"params": [p for p in rest if p.dim() >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in rest if p.dim() < 2], "weight_decay": 0.0},
    ]
    for scale in sorted(set(scaled.values())):
        params = [p for p in model.parameters() if scaled.get(id(p)) == scale]
        groups.append({"params": params, "weight_decay": config.weight_decay, "lr_scale": scale})
    return torch.optim.AdamW(groups, lr=config.lr, betas=(0.9, 0.95), eps=1e-8)


def build_model(config: TrainConfig, device: torch.device) -> TransformerLM:
    torch.manual_seed(config.seed)
    return TransformerLM(config.model).to(device)


def load_trained(folder: Path, device: torch.device) -> TrainedModel:
    config = ckpt.read_config(folder)
    with reading(folder / ckpt.CONFIG, "checkpoint config", ckpt.RETRAIN):  # valid JSON, but not a model's config
        model = TransformerLM(config.model)
    if config.adapter is not None:  # the checkpoint keeps the adapters apart: load them, then merge them
        model = with_adapters(model, config.adapter)
    ckpt.load_weights(folder, model, expected=config)
    if config.adapter is not None:
        model = merged(model)
    return TrainedModel(model.to(device).eval(), folder, config, ckpt.read_summary(folder), reused=True)


PASS_TOKENS = 1 << 15  # tokens a training pass holds activations for (32 × 256 = 8192: the default is one pass)


def masked_loss(nll: torch.Tensor, mask: torch.Tensor, weighting: str) -> torch.Tensor:
    """Mean NLL over the masked targets (B, T): per token, or per row then over rows."""
    return loss_sum(nll, mask, weighting) / loss_count(mask, weighting)


def loss_sum(nll: torch.Tensor, mask: torch.Tensor, weighting: str) -> torch.Tensor:
    """The numerator of `masked_loss`: summed masked NLL (per token), or summed per-row means (per row)."""
    if weighting == "token":
        return (nll * mask).sum()
    counts = mask.sum(dim=1)  # (B,) scored targets per row; rows without any are left out
    kept = counts > 0
    return ((nll * mask).sum(dim=1)[kept] / counts[kept]).sum()


def loss_count(mask: torch.Tensor, weighting: str) -> torch.Tensor:
    """The denominator of `masked_loss`: scored targets (per token) or rows with any (per row), at least 1."""
    return (mask.sum() if weighting == "token" else (mask.sum(dim=1) > 0).sum()).clamp(min=1)


def training_step(
    model, optimizer: torch.optim.Optimizer, config: TrainConfig, batch, device: torch.device, world: World = SINGLE
) -> torch.Tensor:
    """One optimizer step on one batch (inputs, targets, mask: (B, T)) under `config`'s dtype, loss weighting
    and clipping; returns the loss. A NaN/Inf loss is returned without a step, for the caller to stop on.
    `model` is anything with `token_nll(inputs, targets) -> (B, T)` and parameters: training, the sweep's
    estimate and the benchmark all step through here. Under torchrun each rank scores its share of the rows
    of the one global batch and the loss is that of the whole batch, so N processes step as one would.

    Rows go through the model in passes of at most PASS_TOKENS tokens, their gradients added up before the
    step: the loss is a sum over rows divided by the batch's count, so the step is the one the whole batch
    gives at once (up to the order of float sums), while activations are held for one pass only — at L = 4096
    a batch of 32 rows would hold about 1 GB of them in the `tiny` model. A batch within one pass (the
    default, 32 × 256) runs exactly as one."""
    rows = world.rows(batch.inputs.shape[0])
    inputs, targets, mask = (t[rows].to(device) for t in (batch.inputs, batch.targets, batch.mask))
    count = loss_count(batch.mask, config.loss_weighting).to(device)
    # rows with position ids of their own (PoSE's skipped ids) go through the model one at a time, each with its ids
    per_pass = max(1, PASS_TOKENS // inputs.shape[1]) if batch.positions is None else 1
    positions = [None] * inputs.shape[0] if batch.positions is None else batch.positions[rows].to(device)  # (B, T)
    passes = list(zip(inputs.split(per_pass), targets.split(per_pass), mask.split(per_pass), positions[::per_pass]))
    optimizer.zero_grad(set_to_none=True)
    share = torch.zeros((), device=device)
    for i, (pass_inputs, pass_targets, pass_mask, pass_positions) in enumerate(passes):
        # under DDP only the last pass's backward averages gradients over the ranks
        syncing = i == len(passes) - 1 or not hasattr(model, "no_sync")
        with contextlib.nullcontext() if syncing else model.no_sync():
            with autocast(device, config.dtype):
                given = {} if pass_positions is None else {"positions": pass_positions}
                nll = model.token_nll(pass_inputs, pass_targets, **given)  # (rows of the pass, T) float32
            if config.longce is not None:  # LongCE: each target weighted by what the long context adds
                nll = nll * longce_weights(model, pass_inputs, pass_targets, nll, config.longce, device, config.dtype)
            part = loss_sum(nll, pass_mask, config.loss_weighting) / count
            (part * world.size).backward()  # replicas average gradients over ranks; × ranks makes it their sum
        share = share + part.detach()
    loss = world.sum(share)  # the global batch's loss, the same on every rank
    if not torch.isfinite(loss):
        optimizer.zero_grad(set_to_none=True)  # no step on a non-finite loss
        return loss
    torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
    optimizer.step()
    return loss


def train(
    config: TrainConfig,
    source: BatchSource,
    device: torch.device,
    folder: Path | None = None,
    on_step: StepCallback | None = None,
    stop_after: int | None = None,
    probe: Probe | None = None,
    start: Callable[[], TransformerLM] | None = None,
) -> TrainedModel:
    """Train, or reuse the finished model with this config, or resume an interrupted one. `start` builds the
    model training begins from (a fine-tune: the base model's weights, the encoding set for its length);
    default: freshly initialised from the config's seed."""
    folder = folder or model_folder(config)
    if ckpt.is_complete(folder):
        return load_trained(folder, device)
    model = start() if start is not None else build_model(config, device)
    optimizer = make_optimizer(model, config)
    step, losses, elapsed, probes = 0, [], 0.0, []
    state = ckpt.load_state(folder)
    if state is not None:
        if state.get("config_hash") != config_hash(config):
            raise UserError(f"checkpoint in {folder} belongs to another config; delete the folder to retrain")
        ckpt.restore_weights(folder, model, state)
        optimizer.load_state_dict(state["optimizer"])
        step, losses, elapsed = state["step"], state["losses"], state["elapsed"]
        probes = state.get("probes", [])
    model.train()
    if config.compile:
        model.compile_training()
    world = current()
    stages = source.curriculum.stages if source.curriculum is not None else ()
    for rows in {config.batch_size, *(rows_of(length, config.seq_len, config.batch_size) for length, _ in stages)}:
        check_batch(rows, world)  # a curriculum's short rows split over the ranks too
    replica = for_training(model, world)  # under torchrun: gradients averaged over ranks
    crash_after = kill_step(world.rank)  # None but in the kill-and-resume tests
    start = time.perf_counter()
    while step < config.steps:
        batch = source.batch(step)
        lr = learning_rate(config, step)
        for group in optimizer.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)
        loss = training_step(replica, optimizer, config, batch, device, world)
        if not torch.isfinite(loss):
            raise TrainingDiverged(step, folder)
        step += 1
        losses.append(round(loss.item(), 6))
        synchronize(device)
        now = time.perf_counter()
        if on_step is not None:
            run_time = elapsed + now - start
            on_step(step, config.steps, losses[-1], source.tokens(step) / max(run_time, 1e-9))
        if probe is not None and world.main and probe.due(step, config.steps):
            probes.append([step, *probe.take(model)])
        if world.main and (step % config.checkpoint_every == 0 or step == config.steps):
            state = {
                "optimizer": optimizer.state_dict(),
                "step": step,
                "losses": losses,
                "probes": probes,
                "elapsed": elapsed + now - start,
                "config_hash": config_hash(config),
            }
            ckpt.save_checkpoint(folder, config, model, state)
        if step == crash_after:
            kill_now()
        if stop_after is not None and step >= stop_after:
            break
    elapsed += time.perf_counter() - start
    summary = {
        "steps": step,
        "tokens": source.tokens(step),
        "final_loss": losses[-1] if losses else None,
        "train_seconds": round(elapsed, 2),
        "tokens_per_second": round(source.tokens(step) / max(elapsed, 1e-9), 1),
        "params": model.num_parameters(),
        "trainable_params": trainable_parameters(model),
        "config_hash": config_hash(config),
        "losses": losses,
        # [step, retrieval accuracy at L, held-out NLL at L] during training; a summary written without the
        # held-out probe holds [step, accuracy] rows, which its readers accept too
        "probes": probes,
    }
    if step >= config.steps and world.main:
        ckpt.mark_complete(folder, summary)
    world.barrier()  # no rank goes on (and reads the folder) before rank 0 has finished writing it
    if config.adapter is not None:  # saved with its adapters apart; evaluated merged, as `load_trained` gives it
        model = merged(model)
    return TrainedModel(model.eval(), folder, config, summary, reused=False)
