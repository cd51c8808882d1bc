"""Running a suite: re-derive it in a scratch model cache, compare with the committed reference, or
replace the reference (and, with `spread`, re-measure the seed spread that sets the tolerances)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from extrapolate.core.errors import UserError
from extrapolate.core.paths import RUNS_FOLDER, SAMPLES_FOLDER, cache_dir, data_dir
from extrapolate.report.table import RESULTS_FILE, load_results
from extrapolate.reproduce.compare import Comparison, claims_over_seeds, compare
from extrapolate.reproduce.quantities import measure_spread, quantities, read_spread, write_spread
from extrapolate.reproduce.suite import Suite
from extrapolate.run import Reporter

REFERENCE_DIR = data_dir("results")  # results/<suite>: the checkout's, or the copy an installed wheel carries


def reference_folder(suite: Suite) -> Path:
    return REFERENCE_DIR / suite.name


@contextlib.contextmanager
def scratch_cache():
    """Models trained in a temporary cache, so the check re-derives everything from the code; corpora are
    pinned by checksum, not trained, so they are shared."""
    previous = os.environ.get("EXTRAPOLATE_CACHE")
    corpora = cache_dir() / "corpora"
    scratch = tempfile.mkdtemp(prefix="extrapolate-reproduce-")
    if corpora.exists():
        os.symlink(corpora, Path(scratch) / "corpora")
    os.environ["EXTRAPOLATE_CACHE"] = scratch
    try:
        yield
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if previous is None:
            os.environ.pop("EXTRAPOLATE_CACHE", None)
        else:
            os.environ["EXTRAPOLATE_CACHE"] = previous


def run_suite(
    suite: Suite, folder: Path, reporter: Reporter, seeds: list[int] | None = None, fresh_models: bool = True
) -> pd.DataFrame:
    """Run the suite's cells for `seeds` (default: the reference seed) into `folder`; returns its table."""
    from extrapolate.run.sweep import resolve_encodings, sweep

    request = dataclasses.replace(suite.request, out=folder)
    seeds = seeds if seeds is not None else [suite.seed]
    with scratch_cache() if fresh_models else contextlib.nullcontext():
        sweep(request, resolve_encodings(suite.encodings), seeds, folder, reporter)
    return load_results(folder)


@dataclass
class Outcome:
    comparison: Comparison | None  # None when there was no reference to compare with
    folder: Path  # the fresh run
    spread_claims: list[tuple[str, bool, str]] | None = None  # claims over every seed, after measuring spread
    reference: Path | None = None  # the committed reference compared with (or replaced)


def reproduce_job(
    suite_name: str,
    reporter: Reporter,
    replace_reference: bool = False,
    spread: bool = False,
    reuse_models: bool = False,
    keep: Path | None = None,
) -> Outcome:
    """`extrapolate reproduce`: compare a fresh run of the suite with its reference, or replace the
    reference. The fresh run goes to a temporary folder, removed afterwards, unless `keep` names one."""
    from extrapolate.reproduce.suite import load_suite

    if spread and not replace_reference:
        raise UserError("--spread re-measures the reference's spread: use it with --update")
    suite = load_suite(suite_name)
    folder = keep or Path(tempfile.mkdtemp(prefix="extrapolate-fresh-"))
    try:
        if replace_reference:
            outcome = update(suite, reporter, folder, spread=spread, reuse_models=reuse_models)
        else:
            outcome = reproduce(suite, reporter, folder, reuse_models=reuse_models)
    finally:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    outcome.reference = reference_folder(suite)
    return outcome


def reproduce(suite: Suite, reporter: Reporter, folder: Path, reuse_models: bool = False) -> Outcome:
    """Re-derive the suite into `folder` and compare it with the committed reference."""
    target = reference_folder(suite)
    if not (target / RESULTS_FILE).is_file():
        raise UserError(f"no committed reference in {target}; create it with `extrapolate reproduce --update --spread`")
    reference, spread = load_results(target), read_spread(target)
    fresh = run_suite(suite, folder, reporter, fresh_models=not reuse_models)
    return Outcome(compare(reference, fresh, spread, suite), folder)


def update(suite: Suite, reporter: Reporter, folder: Path, spread: bool, reuse_models: bool = False) -> Outcome:
    """Replace the reference with a fresh run (compared with the old one first, for the diff). With `spread`,
    also run the spread seeds, write the spread file and check every claim on every seed; the reference is
    only replaced if they all hold."""
    target = reference_folder(suite)
    fresh = run_suite(suite, folder, reporter, fresh_models=not reuse_models)
    old = load_results(target) if (target / RESULTS_FILE).is_file() else None
    comparison = None
    if old is not None and not old.empty and (spread or (target / "spread.csv").is_file()):
        with contextlib.suppress(UserError):  # an old spread file may be missing or stale: the diff is optional
            comparison = compare(old, fresh, read_spread(target), suite)
    outcome = Outcome(comparison, folder)
    measured = per_seed = None
    if spread:
        seeds_folder = folder / "spread-seeds"
        others = run_suite(suite, seeds_folder, reporter, seeds=list(suite.spread_seeds), fresh_models=not reuse_models)
        tables = [fresh] + [others[others["seed"] == s] for s in suite.spread_seeds]
        measured, per_seed = measure_spread(tables), quantities(pd.concat(tables, ignore_index=True))
        outcome.spread_claims = claims_over_seeds(tables, suite)
        if not all(holds for _, holds, _ in outcome.spread_claims):
            return outcome  # a claim that fails for some seed is no claim: keep the old reference
    install_reference(folder, target)
    if measured is not None:
        write_spread(target, measured, per_seed)
    return outcome


KEPT_FOLDERS = (RUNS_FOLDER, SAMPLES_FOLDER)  # each run's record and what its models answered


def install_reference(fresh_folder: Path, target: Path) -> None:
    """Replace the committed reference with a fresh run (tables, report, figures, each run's record and its
    prompts' answers); the old run's records and answers go with it."""
    from extrapolate.report.pages import write_report

    target.mkdir(parents=True, exist_ok=True)
    for name in KEPT_FOLDERS:
        shutil.rmtree(target / name, ignore_errors=True)
    for item in fresh_folder.iterdir():
        if item.name.startswith("."):
            continue
        if item.is_dir():
            if item.name in KEPT_FOLDERS:
                shutil.copytree(item, target / item.name)
            continue
        shutil.copy2(item, target / item.name)
    write_report(target)
