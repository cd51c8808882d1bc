"""The row layout of the results and position tables: one row per measurement and metric."""

from __future__ import annotations

from extrapolate.core.machine import machine_line
from extrapolate.report.table import provenance
from extrapolate.run.evaluate import Measurement
from extrapolate.run.prepare import Prepared
from extrapolate.run.resolved import ResolvedRun, task_setup
from extrapolate.tasks.kinds import TASK_KINDS, asked_kinds


def common_columns(resolved: ResolvedRun, prepared: Prepared) -> dict:
    request = resolved.request
    return {
        "run_id": resolved.run_id,
        "encoding": resolved.spec.name,
        "base_encoding": resolved.spec.base_encoding,
        "train_len": request.train_len,
        "seed": request.seed,
        "protocol": resolved.protocol_label,
        "model": request.model,
        "corpus": prepared.corpus.name,
        "tokenizer": prepared.tokenizer.identity,
        "device": prepared.device.type,
        "machine": machine_line(prepared.device),
        "dtype": request.dtype,
        "finetune_steps": request.finetune_steps,
        "finetune_len": resolved.finetune_len,
        # the zero-step point of a sweep with adapters is the scaling on the base model: nothing trained
        "finetune_adapter": request.finetune_adapter
        if request.finetune_steps and request.finetune_adapter != "none"
        else None,
        # PoSE's rows (a fine-tune's zero-step point read none): recorded where they were read
        "finetune_positions": "pose" if request.finetune_steps and request.finetune_positions == "pose" else None,
        "finetune_loss": request.finetune_loss if request.finetune_steps and request.finetune_loss != "ce" else None,
        **provenance(),
    }


def measurement_rows(
    resolved: ResolvedRun, prepared: Prepared, params: int, measurements: list[Measurement]
) -> tuple[list[dict], list[dict]]:
    """(results rows, position rows) of a cell's measurements, each laid out by its kind."""
    common = {**common_columns(resolved, prepared), "factor": resolved.factor, "params": params}
    setup = task_setup(resolved, prepared)
    rows, positions = [], []
    for m in measurements:
        kind = TASK_KINDS.get(m.task)
        at = {**common, "kernel": m.kernel, "eval_len": m.length, "task": kind.task_name(setup), "kind": m.task}
        at["status"] = m.status
        at["reason"] = m.reason or None
        at["protocol"] = kind.protocol(setup)
        rows += [{**at, **row} for row in kind.rows(setup, m.length, m.result)]
        positions += position_rows(resolved, m.length, kind.position_rows(m.result, m.length))
    return rows, positions


def measurement_samples(resolved: ResolvedRun, prepared: Prepared, measurements: list[Measurement]) -> list[dict]:
    """Every prompt's record of a cell's measurements (report/samples.py), each with its cell's task, protocol
    and length."""
    setup = task_setup(resolved, prepared)
    out = []
    for m in measurements:
        kind = TASK_KINDS.get(m.task)
        at = {"task": kind.task_name(setup), "protocol": kind.protocol(setup), "eval_len": m.length}
        out += [{**at, **record} for record in kind.samples(m.result)]
    return out


def position_rows(resolved: ResolvedRun, length: int, buckets: list[dict]) -> list[dict]:
    """The position table's rows of one measurement: its kind's loss by position bucket, with the cell's keys."""
    keys = {
        "run_id": resolved.run_id,
        "encoding": resolved.spec.name,
        "seed": resolved.request.seed,
        "train_len": resolved.request.train_len,
        "eval_len": length,
    }
    return [{**keys, **bucket} for bucket in buckets]


def diverged_rows(resolved: ResolvedRun, prepared: Prepared, reason: str = "") -> list[dict]:
    """The rows of a cell whose training diverged: every planned measurement, status `diverged`, each kind's
    rows under the run's protocol."""
    common = {
        **common_columns(resolved, prepared),
        "factor": None,
        "params": None,
        "kernel": None,
        "value": float("nan"),
        "n_tokens": 0,
        "status": "diverged",
        "reason": reason or "training diverged",
    }
    setup = task_setup(resolved, prepared)
    rows = []
    for length in resolved.lengths:
        for kind in asked_kinds(resolved.request.tasks):
            at = {**common, "eval_len": length, "task": kind.task_name(setup), "kind": kind.name}
            rows += [{**at, **row} for row in kind.failed_rows(setup, length)]
    return rows
