"""The closing panel of `run` and `sweep`: what the job found, read back from its rows, and the files it wrote."""

from __future__ import annotations

import json
from pathlib import Path

from extrapolate.cli.util import print_table, stdout


def latest_run_id(folder) -> str:
    """The run id of the folder's latest run (its run.json)."""
    record = Path(folder) / "run.json"
    return str(json.loads(record.read_text(encoding="utf-8")).get("run_id", "")) if record.exists() else ""


def render_closing(folder, run_ids: list[str], page: str) -> None:
    """What a finished job found, read back from its rows (report/headline.py), and the files it wrote."""
    from extrapolate.report.headline import headline

    folder = Path(folder)
    frame = headline(folder, run_ids)
    if len(frame):
        longest = int(frame["longest"].max())
        columns = ["encoding", "seeds", "ppl at L", f"ppl at {longest}", "retrieval at L", f"retrieval at {longest}"]
        columns += ["effective length (ppl / retrieval)"]
        rows = [
            [
                str(r.encoding),
                str(r.seeds),
                number(r.ppl_L),
                number(r.ppl_longest),
                share(r.retrieval_L),
                share(r.retrieval_longest),
                f"{r.effective_perplexity or '–'} / {r.effective_retrieval or '–'}",
            ]
            for r in frame.itertuples()
        ]
        print_table(f"found (L = {int(frame['train_len'].iloc[0])}; means over seeds)", columns, rows)
    written = [page, "results.csv", *sorted(p.name for p in folder.glob("*.png"))]
    stdout.print(f"wrote {folder}/: {', '.join(name for name in written if (folder / name).exists())}", highlight=False)


def number(value: float) -> str:
    return "–" if value != value else (f"{value:.2f}" if value < 100 else f"{value:,.1f}")


def share(value: float) -> str:
    return "–" if value != value else f"{value:.0%}"
