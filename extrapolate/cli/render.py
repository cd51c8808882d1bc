"""Rendering for the CLI: progress on stderr, tables and verdicts on stdout (rich). No logic here."""

from __future__ import annotations

import time

from rich.table import Table

from extrapolate.cli.quiet import silence_library_bars
from extrapolate.cli.util import print_table, stderr, stdout, warn
from extrapolate.run.reporter import Reporter

LOG_EVERY = 30.0  # seconds between plain progress lines where stderr is no terminal (a log file, SLURM, CI)


class RichReporter:
    """Renders training and evaluation progress with rich (on stderr, so stdout stays clean). Where stderr is not
    a terminal a bar draws nothing until it ends, so training also prints a plain line at least every
    LOG_EVERY seconds: step, loss, tokens/s and the time left."""

    def __init__(self, log_every: float = LOG_EVERY):
        self.log_every = log_every
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=stderr,
            transient=False,
        )
        self.task = None

    def training(self, total: int, reused: bool, label: str = "training"):
        self.reused = reused
        if reused:
            return None
        for finished in list(self.progress.task_ids):  # an earlier phase's bar was printed when it stopped
            self.progress.remove_task(finished)
        self.progress.start()
        self.task = self.progress.add_task(label, total=total, info="")
        kept = [None]  # the steps a checkpoint held: not run by this process, so not in its time left
        started, logged = time.monotonic(), [time.monotonic()]
        plain = not stderr.is_terminal

        def on_step(step, total, loss, tokens_per_second):
            if kept[0] is None:
                kept[0] = step - 1
                if kept[0]:  # the first step after a checkpoint: say the earlier steps are kept
                    self.progress.console.print(f"resumed from the checkpoint at step {kept[0]}", highlight=False)
                    self.progress.reset(self.task, total=total, completed=kept[0])  # the bar's speed: this run's
            self.progress.update(self.task, completed=step, info=f"loss {loss:.3f} · {tokens_per_second:,.0f} tok/s")
            now = time.monotonic()
            if plain and (now - logged[0] >= self.log_every or step == total):
                logged[0] = now
                left = (now - started) / max(step - kept[0], 1) * (total - step)
                stderr.print(
                    f"{label} step {step}/{total} · loss {loss:.3f} · {tokens_per_second:,.0f} tok/s · "
                    f"{left / 60:.1f} min left",
                    highlight=False,
                )

        return on_step

    def done_training(self):
        if getattr(self, "reused", False):
            stderr.print("[green]reused the trained model from the cache[/]")
            self.reused = False
        if self.task is not None:
            self.progress.stop()
            self.task = None

    def warn(self, message: str):
        warn(message)

    def plan(self, cells, folder):
        render_plan_table(cells, folder)

    def note(self, message: str):
        stderr.print(message, highlight=False)

    def cell(self, cell, index: int = 0, count: int = 0, eta: float | None = None):
        done = " · in the table already: skipped" if cell.done else ""
        place = f"{index}/{count} " if count else ""
        left = f" · about {minutes(eta)} left in the sweep" if eta is not None and not cell.done else ""
        stderr.print(f"[bold]cell {place}[/]{cell.encoding} · seed {cell.seed}{done}{left}", highlight=False)

    def evaluating(self, what: str, length: int):
        self.evaluation = {"what": what, "length": length, "start": time.monotonic(), "line": time.monotonic()}
        self.evaluation.update(logged=0, bar=None)
        stderr.print(f"evaluating {what} at {length} tokens", highlight=False)
        if stderr.is_terminal:  # a bar with its time left; off a terminal the lines below carry it
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            bar = Progress(
                TextColumn(f"  {what} at {length}"),
                BarColumn(),
                TextColumn("{task.fields[count]}"),
                TimeRemainingColumn(),
                console=stderr,
                transient=True,
            )
            bar.start()
            self.evaluation["bar"] = (bar, bar.add_task("", total=None, count=""))

    def evaluation_progress(self, done: int, total: int, summary: str, logged: bool, unit: str = "prompts"):
        state = getattr(self, "evaluation", None) or {"start": time.monotonic(), "line": 0.0, "logged": 0, "bar": None}
        now = time.monotonic()
        if logged:  # read back from a log: no time spent, so no part of the rate
            state["logged"] = done
        if state["bar"] is not None:
            bar, task = state["bar"]
            bar.update(task, completed=done, total=total, count=f"{done}/{total} {unit}")
        # a line per prompt batch or depth (minutes each at long lengths); windows, which come fast, every while
        if unit == "windows" and done < total and now - state["line"] < self.log_every:
            return
        if unit == "windows" and state["bar"] is not None:
            return  # the bar shows them
        state["line"] = now
        spent = now - state["start"]
        when = "logged earlier" if logged else f"{spent / 60:.1f} min"
        timed = done - state["logged"]
        left = f", about {minutes(spent / timed * (total - done))} left" if timed > 0 and done < total else ""
        head = f"{summary} · " if summary else ""
        stderr.print(f"  {head}{when} · {done}/{total} {unit}{left}", highlight=False)

    def evaluated(self, what: str, length: int, summary: str):
        state = getattr(self, "evaluation", None)
        if state is None:
            return
        if state["bar"] is not None:
            state["bar"][0].stop()
        spent = (time.monotonic() - state["start"]) / 60
        stderr.print(f"  {what} at {length}: {summary or 'done'} · {spent:.1f} min", highlight=False)
        self.evaluation = None


def minutes(seconds: float) -> str:
    """A time left as a person reads it: "40 s", "12 min", "3.5 h"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class QuietReporter(Reporter):
    """`--quiet`: the library's silent reporter, but for warnings (errors the CLI prints itself)."""

    def warn(self, message: str):
        warn(message)


def reporter_for(quiet: bool):
    """The progress sink of `run` and `sweep`: rich progress, or warnings alone with --quiet."""
    if quiet:
        silence_library_bars()
    return QuietReporter() if quiet else RichReporter()


def render_listing(title: str, rows: list[dict], as_json: bool) -> None:
    """A listing (`encodings`, `tasks`, `models`): as JSON (a list of objects, one per row); on a terminal as a
    table whose first column, the names a command takes, is never cut at any width (the other cells wrap);
    off a terminal as tab-separated lines with a header, no value cut or wrapped."""
    if as_json:
        import json
        import sys

        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    columns = list(rows[0])
    if not stdout.is_terminal:  # piped or redirected: plain tab-separated lines, every value whole, for grep/cut
        import sys

        lines = ["\t".join(columns)] + ["\t".join(" ".join(str(row[c]).split()) for c in columns) for row in rows]
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
        return
    table = Table(title=title)
    table.add_column(columns[0], no_wrap=True, min_width=max(len(str(row[columns[0]])) for row in rows))
    for column in columns[1:]:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(str(row[column]) for column in columns))
    stdout.print(table)


def render_comparison(result) -> None:
    checks = result.checks.copy()
    used = checks["change"].abs() / checks["tolerance"]  # share of its tolerance each quantity used
    failing = checks[checks["verdict"] != "ok"]
    if len(failing):
        table = Table(
            "encoding",
            "length",
            "metric",
            "seeds' mean",
            "now",
            "change",
            "tolerance",
            "verdict",
            title=f"{len(failing)} of {len(checks)} quantities out of tolerance (perplexity as NLL in "
            "nats, passkey as the mean over depths)",
        )
        for r in failing.itertuples():
            table.add_row(
                r.encoding,
                str(r.eval_len),
                r.metric,
                f"{r.reference:.4f}",
                f"{r.now:.4f}",
                f"{r.change:+.4f}",
                f"±{r.tolerance:.4f}",
                f"[red]{r.verdict}[/]",
            )
        stdout.print(table)
    if used.notna().any():
        worst = checks.loc[used.idxmax()]
        stdout.print(
            f"{(checks['verdict'] == 'ok').sum()} of {len(checks)} quantities within tolerance; the closest: "
            f"{worst['encoding']} {worst['metric']} at {worst['eval_len']} used {used.max():.0%} of its "
            f"tolerance ({worst['change']:+.4f} of ±{worst['tolerance']:.4f})",
            highlight=False,
        )
    for r in result.cells.itertuples():
        stdout.print(
            f"[red]cell changed[/]: {r.encoding} {r.eval_len} {r.task} {r.metric}: {r.reference} → {r.now}",
            highlight=False,
        )
    for text, holds, detail in result.claims:
        stdout.print(f"{'[green]✓[/]' if holds else '[red]✗[/]'} {text}: {detail}", highlight=False)


def planned_task_name(task: str, request) -> str:
    """A task as a plan names it: the retrieval kind by its task file (`vt-compact`, not `ruler`)."""
    from extrapolate.tasks.files import load_task
    from extrapolate.tasks.kinds import is_retrieval

    return load_task(request.passkey_task).name if is_retrieval(task) else task


def render_plan_table(cells, folder) -> None:
    from extrapolate.run.sweep import models_of

    columns = ("seed", "encoding", "factor", "model", "lengths", "tasks", "state")
    trained, rows = models_of(cells), []
    for cell in cells:
        state = "done (skipped)" if cell.done else ("reuse model" if trained[cell.model_folder] else "train + evaluate")
        resolved = cell.resolved
        factor = f"{resolved.factor:g}" if resolved.spec.kind == "rotary" and resolved.factor != 1 else "–"
        lengths = ",".join(f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n) for n in resolved.lengths)
        rows.append(
            (
                str(cell.seed),
                cell.encoding,
                factor,
                cell.model_folder.name,
                lengths,
                ",".join(planned_task_name(t, resolved.request) for t in resolved.request.tasks),
                state,
            )
        )
    skipped = [(cell, n, why) for cell in cells if not cell.done for n, why in cell.skips.items()]
    print_table(f"plan → {folder}", list(columns), rows)  # piped or logged: whole names, one line a cell
    for skip in skipped:
        stdout.print(skip_line(*skip), highlight=False, soft_wrap=True)
    curricula = {c.resolved.request.curriculum for c in cells if not trained[c.model_folder]} - {None, "none"}
    for curriculum in sorted(curricula):
        stdout.print(f"training reads rows of the curriculum {curriculum} (length:steps), then of L", highlight=False)


def skip_line(cell, length: int, why: str) -> str:
    """A length the plan measures without a value, and why (a learned table's end)."""
    return f"{cell.encoding} · seed {cell.seed} at {length}: will be recorded unsupported: {why}"


def resolved_device(device: str) -> str:
    """The device `auto` (or any name) stands for on this machine, e.g. "cpu" or "cuda (NVIDIA H100 …)"."""
    from extrapolate.core.device import resolve_device

    resolved = resolve_device(device)
    if resolved.type == "cuda":
        import torch

        return f"cuda ({torch.cuda.get_device_name(resolved)})"
    return resolved.type


def render_sweep_plan(plan, folder, device: str) -> None:
    """The dry run's last line (its table was printed as soon as the plan was known: `RichReporter.plan`)."""
    from extrapolate.run.sweep import models_of

    cells, estimate = plan
    trained = models_of(cells)
    to_train = sum(1 for done in trained.values() if not done)
    stdout.print(
        f"{to_train} model(s) to train, {len(trained) - to_train} reused; "
        f"{sum(not c.done for c in cells)} evaluation cell(s); "
        f"estimated {estimate / 60:.1f} min on {resolved_device(device)}",
        highlight=False,
    )


def render_submission(submission, folder) -> None:
    for run_id, job in submission.submitted.items():
        stdout.print(f"submitted {run_id} as job {job}", highlight=False)
    report = f"; report job {submission.report_job}" if submission.report_job else ""
    stdout.print(
        f"{len(submission.submitted)} job(s) submitted, {len(submission.waiting)} still queued or running, "
        f"{len(submission.done)} already in {folder}/results.csv{report}",
        highlight=False,
    )


def bench_extra(row) -> str:
    """MFU for training rows, GFLOP/s for the matmul peak (an emulated bf16 matmul runs below 1)."""
    if row.mfu is not None:
        return f"{row.mfu:.0%} MFU"
    return (f"{row.gflops:,.0f} GFLOP/s" if row.gflops >= 10 else f"{row.gflops:.2g} GFLOP/s") if row.gflops else ""


def megabytes(value: float) -> str:
    """Peak memory, or "–" where a row has none (rows paired with another row's measurement)."""
    return f"{value:,.0f}" if value is not None and value == value else "–"


def rate(value: float) -> str:
    """Tokens per second, or "–" for a row that times none (a memory row, a matmul)."""
    return f"{value:,.0f}" if value is not None and value == value else "–"


def render_bench_row(row) -> None:
    stderr.print(
        f"{row.what:6} {row.implementation:12} {row.encoding:10} {row.length:6} "
        f"{rate(row.tokens_per_second):>10} tok/s {megabytes(row.peak_memory_mb):>8} MB {row.kernel:16} "
        f"{bench_extra(row)}",
        highlight=False,
    )


def render_bench(rows, summary: list[str], out) -> None:
    columns = ["what", "implementation", "encoding", "length", "tokens/s", "peak MB", "kernel", "dtype"]
    table = [
        [r.what, r.implementation, r.encoding, str(r.length), rate(r.tokens_per_second)]
        + [megabytes(r.peak_memory_mb), r.kernel, r.dtype, bench_extra(r)]
        for r in rows
    ]
    print_table("bench", [*columns, "MFU / GFLOP/s"], table)
    stdout.print("\n".join(summary), highlight=False)
    stdout.print(f"wrote {out}/bench.csv, summary.md and bench.png", highlight=False)
