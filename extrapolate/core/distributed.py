"""Running one model across processes under `torchrun` (DistributedDataParallel): which process this is,
the process group's life, and the few collectives training and evaluation need.

Outside torchrun everything here is the one-process case (`World()`), so single-process code paths call the
same functions and pay nothing. Every rank builds the same global batch (batches depend on (seed, step)
only) and trains on its contiguous share of the rows; evaluation splits windows and prompts across ranks
and sums the counts. Only rank 0 writes checkpoints, caches, tables and reports.
"""

from __future__ import annotations

import contextlib
import datetime
import os
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.distributed as dist

from extrapolate.core.errors import UserError
from extrapolate.core.launch import launched


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    def rows(self, total: int) -> slice:
        """This rank's contiguous share of `total` batch rows (the batch size is checked to divide evenly)."""
        share = total // self.size
        return slice(self.rank * share, (self.rank + 1) * share)

    def mine(self, count: int) -> list[int]:
        """Indices of `count` items (windows, prompts) this rank evaluates: every size-th one."""
        return list(range(self.rank, count, self.size))

    def sum(self, values: torch.Tensor) -> torch.Tensor:
        """Element-wise sum over ranks (a copy; identity for one process). Sums in float64."""
        if self.size == 1:
            return values
        total = values.detach().to(device=_collective_device(), dtype=torch.float64).clone()
        dist.all_reduce(total)
        return total.to(device=values.device, dtype=values.dtype)

    def gather(self, items: list) -> list:
        """Every rank's `items` (picklable, e.g. per-prompt records) joined in rank order; `items` itself for
        one process."""
        if self.size == 1:
            return items
        parts: list = [None] * self.size
        dist.all_gather_object(parts, items)
        return [item for part in parts for item in part]

    def barrier(self) -> None:
        if self.size > 1:
            dist.barrier()


SINGLE = World()


def current() -> World:
    if not (dist.is_available() and dist.is_initialized()):
        return SINGLE
    return World(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def _collective_device() -> torch.device:
    """gloo reduces CPU tensors, nccl CUDA ones."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def backend_for(device_name: str) -> str:
    wants_cuda = device_name.startswith("cuda") or (device_name == "auto" and torch.cuda.is_available())
    return "nccl" if wants_cuda and torch.cuda.is_available() else "gloo"


@contextlib.contextmanager
def process_group(device_name: str) -> Iterator[World]:
    """The process group of a torchrun launch for the duration of a job (nccl on CUDA, gloo otherwise); a
    no-op outside torchrun or when a group already exists."""
    if not launched() or (dist.is_available() and dist.is_initialized()):
        yield current()
        return
    if not dist.is_available():
        raise UserError("this torch build has no torch.distributed; run without torchrun")
    backend = backend_for(device_name)
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    # long evaluations on rank 0 alone (the report) must not time the others out
    dist.init_process_group(backend, timeout=datetime.timedelta(hours=2))
    try:
        yield current()
    finally:
        dist.destroy_process_group()


@contextlib.contextmanager
def main_first(world: World) -> Iterator[None]:
    """Rank 0 runs the block first (filling a cache: corpus, tokenizer), the other ranks after it, reading
    what rank 0 wrote instead of writing the same files at the same time."""
    if not world.main:
        world.barrier()
    yield
    if world.main:
        world.barrier()


def check_batch(batch_size: int, world: World) -> None:
    if batch_size % world.size:
        raise UserError(
            f"--batch-size {batch_size} does not split evenly over {world.size} processes; "
            f"use a multiple of {world.size}"
        )


class _TokenNLL(torch.nn.Module):
    """The model's per-token loss as `forward`, which is the call DistributedDataParallel hooks."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, inputs: torch.Tensor, targets: torch.Tensor, positions: torch.Tensor | None = None):
        return self.model.token_nll(inputs, targets, positions=positions)  # (B, T)


class _Replicated(torch.nn.parallel.DistributedDataParallel):
    def token_nll(self, inputs: torch.Tensor, targets: torch.Tensor, positions: torch.Tensor | None = None):
        return self(inputs, targets, positions)


def for_training(model: torch.nn.Module, world: World):
    """Something with `token_nll` and `parameters` whose backward averages gradients over ranks."""
    return model if world.size == 1 else _Replicated(_TokenNLL(model))
