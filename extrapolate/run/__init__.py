"""One (encoding, seed) cell, from a request to its rows: the request (`request.py`) is resolved once at the
edge (`resolution.py`: `resolve`), the data prepared once per job (`prepare.py`), each cell resolved into one
immutable plan (`resolved.py`), then trained or loaded and evaluated (`evaluate.py`), laid out as rows
(`rows.py`) and written (`cell.py`). `sweep.py` runs many cells through the same functions (`estimate.py`
times a dry run, `cluster.py` submits them as SLURM jobs); `export.py` writes a trained model as a Hugging
Face checkpoint. May import `report` and below."""

from extrapolate.core.lazy import lazy_exports

# each public name and the module it comes from, imported on first use (core/lazy.py); `prepare` is the
# module's (`from extrapolate.run.prepare import prepare`), a name an attribute of the package cannot share
EXPORTS = {
    "run": "cell",
    "run_cell": "cell",
    "Prepared": "prepare",
    "Reporter": "reporter",
    "ResolvedRequest": "resolution",
    "resolve": "resolution",
    "resolve_request": "resolution",
    "RunRequest": "request",
    "ResolvedRun": "resolved",
    "resolve_run": "resolved",
}
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
__all__ = sorted(EXPORTS)
