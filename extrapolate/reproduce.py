"""`extrapolate reproduce`: re-run a reference suite and compare it with the committed table, cell by cell,
and check the qualitative claims the suite exists to show."""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .errors import UserError
from .paths import cache_dir
from .results import RESULTS_FILE, load_results
from .runner import Reporter, RunRequest
from .taskfiles import TASKS_DIR, tomllib

REFERENCE_DIR = TASKS_DIR.parent / "results"
CELL_KEY = ["encoding", "eval_len", "task", "metric", "depth", "seed"]
CLAIM_KINDS = ("ratio_at_least", "ratio_at_most", "lower_than")


@dataclass(frozen=True)
class Suite:
    name: str
    version: int
    encodings: str
    seeds: tuple[int, ...]
    request: RunRequest
    ppl_tolerance: float
    accuracy_tolerance: float
    claims: tuple[dict, ...]


def load_suite(name_or_path: str) -> Suite:
    path = Path(name_or_path)
    if not path.exists():
        path = TASKS_DIR / "suites" / f"{name_or_path}.toml"
    if not path.exists():
        from .registry import unknown_name_message

        names = [p.stem for p in (TASKS_DIR / "suites").glob("*.toml")]
        raise UserError(unknown_name_message("suite", name_or_path, names))
    try:
        data = tomllib.loads(path.read_text())
        request = RunRequest(
            encoding="rope", model=data["model"], train_len=int(data["train_len"]),
            eval_lens=tuple(int(n) for n in data["eval_lens"]), steps=int(data["steps"]),
            batch_size=int(data["batch_size"]), lr=float(data["lr"]), tasks=tuple(data["tasks"]),
            passkey_task=data.get("passkey_task", "passkey"), eval_tokens=int(data["eval_tokens"]),
            device="cpu",
        )
        claims = tuple(data.get("claims", []))
        for claim in claims:
            if claim.get("kind") not in CLAIM_KINDS:
                raise UserError(f"suite {path.name}: claim kind must be one of {', '.join(CLAIM_KINDS)}")
        return Suite(data["name"], int(data["version"]), data["encodings"], tuple(int(s) for s in data["seeds"]),
                     request, float(data["ppl_tolerance"]), float(data["accuracy_tolerance"]), claims)
    except (KeyError, TypeError, ValueError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"suite file {path.name} is malformed: {exc}") from None


def run_suite(suite: Suite, folder: Path, reporter: Reporter, fresh_models: bool = True) -> pd.DataFrame:
    """Run the suite into `folder`; with `fresh_models`, models are trained in a temporary cache so the
    check re-derives everything from the code."""
    from .sweep import resolve_encodings, sweep

    previous = os.environ.get("EXTRAPOLATE_CACHE")
    scratch = tempfile.mkdtemp(prefix="extrapolate-reproduce-") if fresh_models else None
    if scratch:
        corpora = cache_dir() / "corpora"
        if corpora.exists():  # corpora are pinned by checksum, not trained: share them
            os.symlink(corpora, Path(scratch) / "corpora")
        os.environ["EXTRAPOLATE_CACHE"] = scratch
    try:
        request = dataclasses.replace(suite.request, out=folder)
        sweep(request, resolve_encodings(suite.encodings), list(suite.seeds), folder, reporter)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
            if previous is None:
                os.environ.pop("EXTRAPOLATE_CACHE", None)
            else:
                os.environ["EXTRAPOLATE_CACHE"] = previous
    return load_results(folder)


@dataclass
class Comparison:
    differing: pd.DataFrame  # every cell whose value changed (within tolerance or not)
    failing: pd.DataFrame  # cells out of tolerance, missing, or with another status
    claims: list[tuple[str, bool, str]]  # (text, holds, detail)

    @property
    def ok(self) -> bool:
        return self.failing.empty and all(holds for _, holds, _ in self.claims)


def _cells(table: pd.DataFrame) -> pd.DataFrame:
    frame = table.copy()
    frame["depth"] = frame["depth"].fillna(-1.0).astype(float)
    return frame.set_index(CELL_KEY)[["value", "status"]]


def compare(reference: pd.DataFrame, fresh: pd.DataFrame, suite: Suite) -> Comparison:
    ref, new = _cells(reference), _cells(fresh)
    joined = ref.join(new, how="outer", lsuffix="_reference", rsuffix="_now")
    rows = []
    for key, r in joined.iterrows():
        a, b = r["value_reference"], r["value_now"]
        metric = key[CELL_KEY.index("metric")]
        relative = metric in ("ppl", "nll")
        tolerance = suite.ppl_tolerance if relative else suite.accuracy_tolerance
        same_status = r["status_reference"] == r["status_now"]
        if pd.isna(r["status_reference"]) or pd.isna(r["status_now"]):
            verdict, delta = "missing", float("nan")
        elif not same_status:
            verdict, delta = "status", float("nan")
        elif pd.isna(a) and pd.isna(b):
            continue
        else:
            delta = (b - a) / abs(a) if relative and a else b - a
            if delta == 0:
                continue
            verdict = "ok" if abs(delta) <= tolerance else "out of tolerance"
        rows.append({**dict(zip(CELL_KEY, key)), "reference": a, "now": b,
                     "change": f"{delta:+.2%}" if relative and not math.isnan(delta) else
                     ("" if math.isnan(delta) else f"{delta:+.3f}"),
                     "status": r["status_now"] if same_status else f"{r['status_reference']} → {r['status_now']}",
                     "verdict": verdict})
    differing = pd.DataFrame(rows, columns=CELL_KEY + ["reference", "now", "change", "status", "verdict"])
    differing["depth"] = differing["depth"].replace(-1.0, float("nan"))
    failing = differing[differing["verdict"] != "ok"]
    return Comparison(differing, failing, check_claims(fresh, suite))


def check_claims(table: pd.DataFrame, suite: Suite) -> list[tuple[str, bool, str]]:
    ppl = table[(table["task"] == "perplexity") & (table["metric"] == "ppl") & (table["status"] == "ok")]
    means = ppl.groupby(["encoding", "eval_len"])["value"].mean()
    L = suite.request.train_len
    out = []
    for claim in suite.claims:
        encoding, length = claim["encoding"], int(claim["times_L"]) * L
        try:
            value = means[(encoding, length)]
            if claim["kind"] == "lower_than":
                other = means[(claim["other"], length)]
                holds, detail = value < other, f"{encoding} {value:.3f} vs {claim['other']} {other:.3f} at {length}"
            else:
                ratio = value / means[(encoding, L)]
                bound = float(claim["value"])
                holds = ratio >= bound if claim["kind"] == "ratio_at_least" else ratio <= bound
                detail = f"{encoding} ratio {ratio:.3f} at {length} ({'≥' if claim['kind'] == 'ratio_at_least' else '≤'} {bound})"
        except KeyError:
            holds, detail = False, f"no ok perplexity cell for {encoding} at {length}"
        out.append((claim["text"], bool(holds), detail))
    return out


def reference_folder(suite: Suite) -> Path:
    return REFERENCE_DIR / suite.name


def install_reference(fresh_folder: Path, target: Path) -> None:
    """Replace the committed reference with a fresh run (tables, report, figures)."""
    target.mkdir(parents=True, exist_ok=True)
    for item in fresh_folder.iterdir():
        # run.json names the scratch folder of this machine: the table's provenance columns suffice
        if item.name.startswith(".") or item.is_dir() or item.name == "run.json":
            continue
        shutil.copy2(item, target / item.name)


