"""Give a committed run its passkey answers (`samples/<run id>.jsonl`) by measuring its cells again with the
code that measured them, where today's code cannot measure them as they were made.

`scripts/recover_samples.py` measures a run again with today's code, which needs today's code to build the
run's model and prompts as the run did. Where it does not (a task version whose scoring rule the code no longer
has, such as `passkey-single` version 1; a model configuration it no longer builds), this script checks the
commit the run's record names (`git_sha`) out into a git worktree and runs that commit's own `extrapolate run`
with the record's request, at the lengths of the run's retrieval rows, with `scripts/answers_hook.py` loaded
into it to write down each prompt's greedy answer (which that code measured and did not keep). A model that
is not in the cache is trained there by the same command, and its training must then show the record's
fingerprint (final loss and retrieval probes). The answers are written into FOLDER only where every retrieval
row the old command measured equals the committed row, and every cell's answers give its row's value.

    python scripts/answers_at_commit.py results/smollm2 --runs 217882d723,1d4a3ddb8c
    python scripts/answers_at_commit.py results/position-share --runs ID --cache /tmp/models

The run measures on this machine's CPU: bf16 arithmetic takes other paths on other CPUs (AMX, AVX-512, AVX2),
so a row that sat at a margin may come out otherwise; such a run is named and nothing is written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/ is not a package

from retrain_at_commit import ROOT, fingerprint, known_options, run_options, trained_request, worktree  # noqa: E402

from extrapolate.report.samples import samples_path, write_samples  # noqa: E402
from extrapolate.report.table import load_results, row_kinds, with_task_names  # noqa: E402
from extrapolate.tasks.kinds import RENAMED_KINDS  # noqa: E402

HOOK = Path(__file__).resolve().parent
RETRIEVAL_METRICS = {"accuracy": "score", "rank_accuracy": "ranked_first"}  # a row's metric: its answers' field
BOOTSTRAP = (
    "import runpy, answers_hook; answers_hook.install(); "
    "runpy.run_module('extrapolate', run_name='__main__', alter_sys=True)"
)


def old_rows(out: Path) -> pd.DataFrame:
    """The rows an old command wrote (its table's columns, whatever they were then), their tasks named as now."""
    table = with_task_names(pd.read_csv(out / "results.csv"))
    return table[table["status"].fillna("ok") == "ok"] if "status" in table else table


def row_differences(committed: pd.DataFrame, again: pd.DataFrame) -> list[str]:
    """Each committed retrieval row the old command did not give back with its exact value, as one line."""
    key = ["task", "protocol", "eval_len", "depth", "metric"]
    measured = {
        (r.task, r.protocol, int(r.eval_len), float(r.depth), r.metric): float(r.value)
        for r in again.itertuples()
        if r.metric in RETRIEVAL_METRICS
    }
    out = []
    for row in committed[key + ["value"]].itertuples(index=False):
        where = (row.task, row.protocol, int(row.eval_len), float(row.depth), row.metric)
        value = measured.get(where)
        if value is None or abs(value - float(row.value)) > 1e-9:
            out.append(f"{where}: committed {float(row.value):g}, again {value}")
    return out


def measurement(answers: list[dict]) -> list[dict]:
    """The answers of each (task, length)'s last `evaluate_passkey` call: earlier calls were training's probes."""
    last = {}
    for answer in answers:
        last[answer["task"], answer["eval_len"]] = max(
            last.get((answer["task"], answer["eval_len"]), 0), answer["call"]
        )
    return [a for a in answers if a["call"] == last[a["task"], a["eval_len"]]]


def samples_from(answers: list[dict], committed: pd.DataFrame) -> tuple[list[dict], list[str]]:
    """The logged answers of the measurement as samples lines (each with its cell's protocol and its index in
    trial order), and each committed row its cell's answers do not average to (the log and the rows must tell
    one story)."""
    protocols = dict(zip(committed["protocol"].str.rsplit("-v", n=1).str[0], committed["protocol"]))
    kind = dict(zip(committed["protocol"], committed["task"]))
    records, seen = [], {}
    for answer in measurement(answers):
        protocol = protocols.get(answer["task"])
        if protocol is None:
            continue  # a task the committed rows do not hold
        cell = (protocol, answer["eval_len"], answer["depth"])
        seen[cell] = seen.get(cell, -1) + 1
        record = {"task": kind[protocol], "protocol": protocol, "eval_len": answer["eval_len"]}
        record |= {"depth": answer["depth"], "index": seen[cell]}
        record |= {
            k: answer[k] for k in ("reference", "prediction", "score", "ranked_first", "rank_margin") if k in answer
        }
        records.append(record)
    means = {}  # (protocol, length, depth, field): the cell's answers' mean
    for field in RETRIEVAL_METRICS.values():
        for record in records:
            means.setdefault((record["protocol"], record["eval_len"], record["depth"], field), []).append(
                float(record.get(field, float("nan")))
            )
    wrong = []
    for row in committed.itertuples(index=False):
        cell = means.get((row.protocol, int(row.eval_len), float(row.depth), RETRIEVAL_METRICS[row.metric]))
        if not cell or not abs(sum(cell) / len(cell) - float(row.value)) <= 1e-9:  # NaN: a rank not logged
            wrong.append(f"({row.protocol}, {int(row.eval_len)}, {row.depth}, {row.metric}): answers do not give it")
    return records, wrong


def commit_tasks(checkout: Path, kinds: list[str]) -> list[str]:
    """The kinds as --tasks of the checked-out commit names them: `retrieval` where it has that name, else the
    kind's name then (the key-line kind was "passkey" until task files got a name of their own)."""
    if 'RETRIEVAL = "retrieval"' in (checkout / "extrapolate" / "tasks" / "kinds.py").read_text(encoding="utf-8"):
        return [kind if kind == "perplexity" else "retrieval" for kind in kinds]
    earlier = {now: then for then, now in RENAMED_KINDS.items()}
    return [earlier.get(kind, kind) for kind in kinds]


def recover(folder: Path, run_id: str, cache: Path | None, under: Path, extra_env: dict) -> str:
    if samples_path(folder, run_id).exists():
        return f"{run_id}: nothing to recover"
    table = load_results(folder)
    committed = table[
        (table["run_id"].astype(str) == run_id)
        & (table["status"].fillna("ok") == "ok")
        & table["metric"].isin(list(RETRIEVAL_METRICS))
    ]
    if committed.empty:
        return f"{run_id}: no passkey rows"
    record_path = folder / "runs" / f"{run_id}.json"
    if not record_path.is_file():
        return f"{run_id}: no record in runs/ (made before each run's was kept); skipped"
    record = json.loads(record_path.read_text())
    if record["git_sha"].endswith("+dirty"):  # made by code edited after its commit: no commit holds it
        return f"{run_id}: made by code edited after {record['git_sha'][:12]}, which no commit holds; skipped"
    checkout = worktree(record["git_sha"], under)
    log, out = under / f"answers-{run_id}.jsonl", under / f"out-{run_id}"
    env = {**os.environ, **extra_env, "PYTHONPATH": os.pathsep.join([str(HOOK), str(checkout)])}
    env |= {"EXTRAPOLATE_ANSWERS_LOG": str(log)} | ({"EXTRAPOLATE_CACHE": str(cache)} if cache else {})
    request = trained_request(record) | {"tasks": commit_tasks(checkout, list(dict.fromkeys(row_kinds(committed))))}
    lengths = sorted({int(n) for n in committed["eval_len"]})
    options = run_options(request, known_options(checkout, env), out, lengths)
    made = subprocess.run(
        [sys.executable, "-c", BOOTSTRAP, "run", *options], cwd=checkout, env=env, capture_output=True, text=True
    )
    if made.returncode != 0:
        return f"{run_id}: the run at {record['git_sha'][:12]} failed: {made.stderr.strip().splitlines()[-1:]}"
    if record.get("training"):
        (again,) = [json.loads(p.read_text()) for p in (out / "runs").glob("*.json")] or [{}]
        if fingerprint(again.get("training") or {}) != fingerprint(record["training"]):
            return f"{run_id}: the model measured at {record['git_sha'][:12]} is not the record's (fingerprint)"
    differ = row_differences(committed, old_rows(out))
    if differ:
        return f"{run_id}: {len(differ)} of {len(committed)} rows not given back, nothing written ({differ[0]})"
    answers = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []
    records, wrong = samples_from(answers, committed)
    if wrong:
        return f"{run_id}: the answers logged do not give the rows, nothing written ({wrong[0]})"
    write_samples(folder, run_id, records)
    return f"{run_id}: every one of {len(committed)} rows given back at {record['git_sha'][:12]}; samples written"


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--runs", required=True, help="run ids (comma-separated)")
    parser.add_argument("--cache", type=Path, help="the model cache (EXTRAPOLATE_CACHE) for the old command")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="for the old command only")
    args = parser.parse_args(argv)
    if any("=" not in pair for pair in args.env):
        parser.error("--env takes KEY=VALUE, e.g. ONEDNN_MAX_CPU_ISA=AVX2")
    extra_env = dict(pair.split("=", 1) for pair in args.env)
    cache = args.cache.resolve() if args.cache else None
    under = Path(tempfile.mkdtemp(prefix="answers-"))
    try:
        for run_id in args.runs.split(","):
            try:
                said = recover(args.folder.resolve(), run_id, cache, under, extra_env)
            except Exception as error:  # one run that cannot be measured again does not stop the others
                said = f"{run_id}: failed ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})"
            print(said, flush=True)
    finally:
        for checkout in under.iterdir():
            if checkout.is_dir() and not checkout.name.startswith("out-"):
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(checkout)])
        shutil.rmtree(under, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
