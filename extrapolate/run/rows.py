"""The row layout of the results and position tables: one row per measurement and metric."""

from __future__ import annotations

import torch

from extrapolate.report.table import provenance
from extrapolate.run.evaluate import Measurement
from extrapolate.run.prepare import Prepared
from extrapolate.run.resolved import ResolvedRun


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
        "dtype": request.dtype,
        "finetune_steps": request.finetune_steps,
        "finetune_len": resolved.finetune_len,
        **provenance(),
    }


def measurement_rows(
    resolved: ResolvedRun, prepared: Prepared, params: int, measurements: list[Measurement]
) -> tuple[list[dict], list[dict]]:
    """(results rows, position rows) of a cell's measurements."""
    common = {**common_columns(resolved, prepared), "factor": resolved.factor, "params": params}
    rows, positions = [], []
    for m in measurements:
        at = {**common, "kernel": m.kernel, "eval_len": m.length, "task": m.task, "status": m.status}
        if m.task == "perplexity":
            nll = m.result.nll if m.result else float("nan")
            tokens = m.result.tokens if m.result else 0
            rows += [
                {**at, "metric": metric, "value": value, "depth": None, "n_tokens": tokens}
                for metric, value in (("nll", nll), ("ppl", float(torch.tensor(nll).exp())))
            ]
            positions += position_rows(resolved, m)
            continue
        at["protocol"] = resolved.retrieval_protocol(prepared.passkey_builder.task.identity)
        if m.status != "ok":
            cells = [(d, float("nan"), float("nan"), 0) for d in prepared.passkey_builder.task.depths]
        else:
            cells = [(c.depth, c.accuracy, c.rank_accuracy, c.trials) for c in m.result]
        for depth, accuracy, rank_accuracy, trials in cells:
            rows += [
                {**at, "metric": metric, "value": value, "depth": depth, "n_tokens": trials * m.length}
                for metric, value in (("accuracy", accuracy), ("rank_accuracy", rank_accuracy))
            ]
    return rows, positions


def position_rows(resolved: ResolvedRun, m: Measurement) -> list[dict]:
    """Loss by position bucket inside the window, for one perplexity measurement."""
    if not m.result:
        return []
    result, width = m.result, m.result.bucket_width
    return [
        {
            "run_id": resolved.run_id,
            "encoding": resolved.spec.name,
            "seed": resolved.request.seed,
            "train_len": resolved.request.train_len,
            "eval_len": m.length,
            "bucket_start": b * width,
            "bucket_end": min((b + 1) * width, m.length),
            "nll": result.bucket_nll[b] / result.bucket_tokens[b],
            "n_tokens": result.bucket_tokens[b],
        }
        for b in sorted(result.bucket_nll)
    ]


def diverged_rows(resolved: ResolvedRun, prepared: Prepared) -> list[dict]:
    """The rows of a cell whose training diverged: every planned measurement, status `diverged`."""
    common = {
        **common_columns(resolved, prepared),
        "factor": None,
        "params": None,
        "kernel": None,
        "value": float("nan"),
        "n_tokens": 0,
        "status": "diverged",
    }
    rows = []
    for length in resolved.lengths:
        if "perplexity" in resolved.request.tasks:
            rows += [
                {**common, "eval_len": length, "task": "perplexity", "metric": m, "depth": None} for m in ("nll", "ppl")
            ]
        if "passkey" in resolved.request.tasks:
            rows += [
                {**common, "eval_len": length, "task": "passkey", "metric": m, "depth": depth}
                for depth in prepared.passkey_builder.task.depths
                for m in ("accuracy", "rank_accuracy")
            ]
    return rows
