"""Why a length has no value: the reason a measurement records when an encoding has no representation for its
positions, and the same reason foreseen at planning, so a dry run says which lengths will be skipped."""

from __future__ import annotations

from extrapolate.core.errors import PositionOutOfRange
from extrapolate.run.prepare import Prepared
from extrapolate.run.resolved import ResolvedRun


def unsupported_reason(exc: PositionOutOfRange, length: int, resolved: ResolvedRun) -> str:
    """Why `length` has no value, with what would give it one: a learned table's end (a model trained here runs
    past it with --learned-policy clamp; a checkpoint's table is its own), or the encoding's own limit."""
    if not exc.table:
        return str(exc)
    return table_end(length, exc.limit, resolved)


def table_end(length: int, rows: int, resolved: ResolvedRun) -> str:
    if resolved.is_pretrained:
        return f"{length} > n_positions {rows} of {resolved.request.model}: its learned table ends there"
    return f"{length} > {rows} rows of the learned table: --learned-policy clamp to extend"


def table_rows(resolved: ResolvedRun, prepared: Prepared) -> int | None:
    """The rows of the learned position table a cell evaluates with, where positions past them are refused
    (a checkpoint's, or one trained here under --learned-policy error); None where there is no such end."""
    if resolved.is_pretrained:
        checkpoint = prepared.checkpoint
        return getattr(checkpoint.model, "position_limit", None) if checkpoint is not None else None
    if resolved.spec.name != "learned" or resolved.request.learned_policy != "error":
        return None
    config = resolved.finetune.phase if resolved.finetune is not None else resolved.train_config
    return config.model.max_len


def foreseen_skips(resolved: ResolvedRun, prepared: Prepared) -> dict[int, str]:
    """{length: why it will be recorded unsupported} for the cell's lengths past its learned table's end."""
    rows = table_rows(resolved, prepared)
    if rows is None:
        return {}
    return {n: table_end(n, rows, resolved) for n in resolved.lengths if n > rows}
