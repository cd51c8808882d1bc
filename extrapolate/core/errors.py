"""Typed errors. `UserError` is a mistake the user can fix: the CLI prints it as one line and exits 2."""


class UserError(Exception):
    """Bad input from the user (unknown name, invalid parameter, missing file, ...)."""


class PositionOutOfRange(UserError):
    """An encoding was asked for a position it has no representation for (a learned table past its rows)."""

    def __init__(self, position: int, limit: int):
        super().__init__(f"position {position} is past the learned table of {limit} rows")
        self.position = position
        self.limit = limit
