"""Train a committed run's model again with the code that trained it, so that its cells can be measured again
(`scripts/recover_samples.py`) where today's code would train another model.

A model is the seed, the data and the training code: the same request trained today gives another model
wherever the training code has changed since (a fused loss, another kernel), and the run's rows do not come
back. For each run of FOLDER named, this script checks the commit the run's record names (`git_sha`) out into a
git worktree, runs that commit's own `extrapolate run` with the record's request (evaluated at L only, which
leaves the model as it is) into the model cache CACHE, and compares the training with the record's fingerprint:
the final loss and the retrieval probes, step by step. A model whose fingerprint differs (another CPU's
arithmetic, or a model trained at an earlier commit) is removed from CACHE, and the run is named; one that
matches is the model the run measured, and

    EXTRAPOLATE_CACHE=CACHE python scripts/recover_samples.py FOLDER --runs RUN_ID ...

measures its cells again with today's code and keeps the answers where every row comes back exactly.

    python scripts/retrain_at_commit.py results/showcase --runs fd9591a54d,44daff4d9c --cache /tmp/models
    python scripts/retrain_at_commit.py results/showcase --runs cb084e2d96 --cache /tmp/models \\
        --env ONEDNN_MAX_CPU_ISA=AVX2 --env ATEN_CPU_CAPABILITY=avx2    # a model trained on an AVX2-only CPU

Models are trained one at a time with the machine's default threads; the same CPU model (or code path) as the
one that trained them is what makes the arithmetic, and so the fingerprint, the same.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIPPED = {"name", "out", "eval_len", "eval_lens", "device"}  # set below, or of no bearing on the model


def fingerprint(training: dict) -> dict:
    """What a training's record and its checkpoint both keep: steps, final loss and the retrieval probes."""
    return {key: training.get(key) for key in ("steps", "final_loss", "probes")}


def trained_request(record: dict) -> dict:
    """The record's request, with the training dtype `auto` chose on the machine that trained the model (float32
    on a CPU without fast bf16) in place of `auto`, which on this machine may choose another."""
    request = dict(record["request"])
    if request.get("train_dtype") == "auto" and record["train_config"].get("dtype"):
        request["train_dtype"] = record["train_config"]["dtype"]
    return request


def run_options(request: dict, known: set[str], out: Path, eval_lens: list[int] | None = None) -> list[str]:
    """The command-line options of `request` that the old command knows (`known`), evaluated at `eval_lens`
    (default: at L only, which is all a training needs)."""
    options = []
    for field, value in request.items():
        flag = "--encoding-option" if field == "encoding_options" else "--" + field.replace("_", "-")
        if field in SKIPPED or value is None or value == [] or flag not in known:
            continue
        if field == "encoding_options":
            for name, setting in value:
                options += ["--encoding-option", f"{name}={setting}"]
        elif isinstance(value, list):
            options += [flag, ",".join(str(v) for v in value)]
        elif isinstance(value, bool):
            options.append(flag if value else "--no-" + flag[2:])
        else:
            options += [flag, str(value)]
    lengths = ",".join(str(n) for n in eval_lens or [request["train_len"]])
    return options + ["--eval-lens", lengths, "--device", "cpu", "--out", str(out)]


def worktree(commit: str, under: Path) -> Path:
    """A checkout of `commit` (reused while this script runs)."""
    path = under / commit[:12]
    if not path.is_dir():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(path), commit], check=True)
    return path


def known_options(checkout: Path, env: dict) -> set[str]:
    shown = subprocess.run(
        [sys.executable, "-m", "extrapolate", "run", "--help"],
        cwd=checkout,
        env={**env, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {word.strip("│,[]") for word in shown.split() if word.startswith("--")}


def retrain(folder: Path, run_id: str, cache: Path, under: Path, extra_env: dict) -> str:
    record = json.loads((folder / "runs" / f"{run_id}.json").read_text())
    model = cache / "models" / Path(record["model_folder"]).name
    wanted = fingerprint(record["training"])
    done = model / "complete.json"
    if done.is_file() and fingerprint(json.loads(done.read_text())) == wanted:
        return f"{run_id}: {model.name} already in the cache, its fingerprint the record's"
    if record["git_sha"].endswith("+dirty"):  # made by code edited after its commit: no commit holds it
        return f"{run_id}: made by code edited after {record['git_sha'][:12]}, which no commit holds; skipped"
    checkout = worktree(record["git_sha"], under)
    env = {**os.environ, **extra_env, "EXTRAPOLATE_CACHE": str(cache), "PYTHONPATH": str(checkout)}
    options = run_options(trained_request(record), known_options(checkout, env), under / f"out-{run_id}")
    made = subprocess.run(
        [sys.executable, "-m", "extrapolate", "run", *options], cwd=checkout, env=env, capture_output=True, text=True
    )
    if made.returncode != 0:
        return f"{run_id}: the run at {record['git_sha'][:12]} failed: {made.stderr.strip().splitlines()[-1:]}"
    if not done.is_file():
        return f"{run_id}: trained at {record['git_sha'][:12]} into another model than {model.name}; skipped"
    again = fingerprint(json.loads(done.read_text()))
    if again != wanted:
        shutil.rmtree(model)  # not the run's model: recover_samples would only find its rows differ
        return (
            f"{run_id}: trained at {record['git_sha'][:12]}, final loss {again['final_loss']} against the record's "
            f"{wanted['final_loss']}: another model, removed"
        )
    return f"{run_id}: {model.name} trained at {record['git_sha'][:12]}, its fingerprint the record's"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument(
        "--runs", required=True, help="run ids (comma-separated); a model several share is trained once"
    )
    parser.add_argument("--cache", type=Path, required=True, help="the model cache to train into (EXTRAPOLATE_CACHE)")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="for the old command only")
    args = parser.parse_args(argv)
    if any("=" not in pair for pair in args.env):
        parser.error("--env takes KEY=VALUE, e.g. ONEDNN_MAX_CPU_ISA=AVX2")
    extra_env = dict(pair.split("=", 1) for pair in args.env)
    under = Path(tempfile.mkdtemp(prefix="retrain-"))
    try:
        for run_id in args.runs.split(","):
            print(retrain(args.folder.resolve(), run_id, args.cache.resolve(), under, extra_env), flush=True)
    finally:
        for checkout in under.iterdir():
            if checkout.name[:4] != "out-":
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(checkout)], check=False)
        shutil.rmtree(under, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
