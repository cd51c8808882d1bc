"""One (encoding, seed) cell, from a request to its rows: the request is resolved once at the edge
(`request.py`: `resolve`), the data prepared once per job (`prepare.py`), each cell resolved into one immutable plan
(`resolved.py`), then trained or loaded and evaluated (`evaluate.py`), laid out as rows (`rows.py`) and written
(`cell.py`). `sweep.py` runs many cells through the same functions (`estimate.py` times a dry run,
`cluster.py` submits them as SLURM jobs); `export.py` writes a trained model as a Hugging Face checkpoint.
May import `report` and below."""

from extrapolate.run.cell import run, run_cell
from extrapolate.run.prepare import Prepared, prepare
from extrapolate.run.reporter import Reporter
from extrapolate.run.request import ResolvedRequest, RunRequest, resolve, resolve_request
from extrapolate.run.resolved import ResolvedRun, resolve_run

__all__ = [
    "Prepared",
    "Reporter",
    "ResolvedRequest",
    "ResolvedRun",
    "RunRequest",
    "prepare",
    "resolve",
    "resolve_request",
    "resolve_run",
    "run",
    "run_cell",
]
