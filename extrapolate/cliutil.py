"""Small parsing helpers shared by CLI commands; every failure is a one-line UserError."""

from __future__ import annotations

from .errors import UserError


def parse_int_list(text: str, what: str, minimum: int | None = None) -> list[int]:
    values = []
    for part in text.split(","):
        part = part.strip().lower().replace("_", "")
        if not part:
            continue
        scale = 1
        if part.endswith("k"):
            part, scale = part[:-1], 1024
        try:
            value = int(part) * scale
        except ValueError:
            raise UserError(f"{what}: {part!r} is not a whole number") from None
        if minimum is not None and value < minimum:
            raise UserError(f"{what} must be ≥ {minimum}, got {value}")
        values.append(value)
    if not values:
        raise UserError(f"{what}: give at least one number")
    return values


def parse_name_list(text: str) -> list[str]:
    return [part.strip().lower() for part in text.split(",") if part.strip()]
