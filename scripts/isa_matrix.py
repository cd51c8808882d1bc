"""Run `extrapolate reproduce` under every CPU code path PyTorch, oneDNN and MKL can be pinned to on this
machine, and record how far each moves the suite's quantities from the committed reference.

    python scripts/isa_matrix.py                       # every setting, writes results/<suite>/isa-drift.csv
    python scripts/isa_matrix.py --settings avx2,onednn-avx2 --suite reference

Each setting runs in a process of its own (these variables are read once, when the libraries load). A
setting whose instructions this CPU lacks still runs: the libraries fall back to what the CPU has."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from extrapolate.report.table import load_results
from extrapolate.reproduce import compare, load_suite, quantities, read_spread, reference_folder
from extrapolate.reproduce.quantities import QUANTITY_KEY

SETTINGS = {
    "native": {},
    "aten-avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "aten-default": {"ATEN_CPU_CAPABILITY": "default"},
    "onednn-avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2"},
    "onednn-avx512-core": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"},
    "mkl-avx2": {"MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "all-avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
}


def drift(reference: pd.DataFrame, fresh: pd.DataFrame, spread: pd.DataFrame | None, suite) -> dict:
    """How far a run moved from the committed reference run of the same seed (largest change of a perplexity
    NLL in nats and of a mean passkey accuracy), and, with a spread, how much of its tolerance the worst
    quantity used under the rule `reproduce` applies."""
    ref, new = (quantities(t.drop(columns="seed")).set_index(QUANTITY_KEY) for t in (reference, fresh))
    both = ref.merge(new, left_index=True, right_index=True, suffixes=("_ref", "_new"))
    both = both[(both["status_ref"] == "ok") & (both["status_new"] == "ok")]
    change = (both["value_new"] - both["value_ref"]).abs()
    is_nll = both.index.get_level_values("metric") == "nll"
    out = {"max_nll_change": change[is_nll].max(), "max_accuracy_change": change[~is_nll].max()}
    if spread is not None:
        checks = compare(reference, fresh, spread, suite).checks
        out["max_change_over_tolerance"] = float((checks["change"].abs() / checks["tolerance"]).max())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="reference")
    parser.add_argument("--settings", default=",".join(SETTINGS), help=f"any of {', '.join(SETTINGS)}")
    parser.add_argument("--out", type=Path, help="CSV to write (default results/<suite>/isa-drift.csv)")
    parser.add_argument("--keep", type=Path, help="keep each setting's results table here, as <setting>.csv")
    args = parser.parse_args()
    suite = load_suite(args.suite)
    reference_dir = reference_folder(suite)
    reference = load_results(reference_dir)
    spread = read_spread(reference_dir) if (reference_dir / "spread.csv").is_file() else None
    rows = []
    for name in args.settings.split(","):
        env = SETTINGS[name]
        with tempfile.TemporaryDirectory(prefix=f"isa-{name}-") as folder:
            start = time.perf_counter()
            command = [sys.executable, "-m", "extrapolate", "reproduce", "--suite", args.suite, "--out", folder]
            done = subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True)
            seconds = time.perf_counter() - start
            fresh = load_results(Path(folder))
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                fresh.to_csv(args.keep / f"{name}.csv", index=False)
        row = {
            "setting": name,
            "env": " ".join(f"{k}={v}" for k, v in env.items()) or "(none)",
            "reproduce_exit": done.returncode,
            "wall_seconds": round(seconds, 1),
            **drift(reference, fresh, spread, suite),
        }
        rows.append(row)
        print(", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
        if done.returncode not in (0, 1):
            print(done.stderr[-2000:], file=sys.stderr)
    out = args.out or reference_dir / "isa-drift.csv"
    pd.DataFrame(rows).to_csv(out, index=False, float_format="%.5g")
    print(f"wrote {out}")
    return 0 if all(r["reproduce_exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
