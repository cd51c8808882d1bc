"""One (encoding, seed) cell, from a request to its rows: the request is resolved once at the edge
(`request.py`), the data prepared once per job (`prepare.py`), each cell resolved into one immutable plan
(`resolved.py`), then trained or loaded and evaluated (`evaluate.py`), laid out as rows (`rows.py`) and written
(`cell.py`). `sweep.py` runs many cells through the same functions."""

from .cell import run, run_cell
from .prepare import Prepared, prepare
from .reporter import Reporter
from .request import RunRequest, resolve_request
from .resolved import ResolvedRun, resolve_run

__all__ = ["Prepared", "Reporter", "ResolvedRun", "RunRequest", "prepare", "resolve_request", "resolve_run", "run",
           "run_cell"]
