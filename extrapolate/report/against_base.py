"""Each method against its base model, prompt by prompt: a scaling or training-free method (its `base_encoding`
another encoding, "yarn" on "rope") asked the same prompts as the plain base encoding on the same trained model
(same seed, model, corpus, length and fine-tune), so a retrieval or RULER cell's change is measured on each
prompt: the mean per-prompt difference with its paired interval, its exact sign-flip p-value, and that
p-value adjusted by Holm's method over every such cell of the folder (`core.significance`). Two cells whose own
intervals overlap can still differ this way, where the prompts that one method gets right the other gets wrong
in one direction only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from extrapolate.core.significance import holm
from extrapolate.report.labels import label_variants
from extrapolate.report.paired import FAMILY_LEVEL, moved, p_value, paired_cell
from extrapolate.report.run_options import with_options
from extrapolate.report.samples import load_samples
from extrapolate.report.table import load_results

# what makes two runs the same trained model (beside the encoding they are evaluated with)
MODEL_KEYS = [
    *("seed", "train_len", "model", "corpus", "tokenizer"),
    *("finetune_steps", "finetune_len", "finetune_adapter", "finetune_positions", "finetune_loss"),
]
PROMPT = ["task", "protocol", "eval_len", "depth", "index"]  # one prompt of a run
COLUMNS = [
    "label",
    "run_id",
    "base_run_id",
    "base",
    "seed",
    "protocol",
    "eval_len",
    "n",
    "base_score",
    "score",
    "difference",
    "low",
    "high",
    "p",
    "p_holm",
]


def base_differences(folder: Path) -> pd.DataFrame:
    """One row per (method run, cell) with a plain base run on the same model and both runs' answers to the same
    prompts: the two means over the prompts both kept (depths pooled), method − base with its paired 95%
    interval, the exact sign-flip p-value (`p`) and Holm's adjustment over every row (`p_holm`). A method with
    no such base run, or whose two runs hold other prompts, has no row."""
    folder = Path(folder)
    samples = load_samples(folder)
    table = load_results(folder)
    if samples.empty or table.empty:
        return pd.DataFrame(columns=COLUMNS)
    samples = samples.assign(depth=samples["depth"] if "depth" in samples else -1.0).fillna({"depth": -1.0})
    runs = table.drop_duplicates("run_id").set_index("run_id")
    labels = label_variants(with_options(table, folder)).drop_duplicates("run_id").set_index("run_id")["encoding"]
    keys = [k for k in MODEL_KEYS if k in runs.columns]
    model = {run: tuple(str(runs.at[run, k]) for k in keys) for run in runs.index}  # the trained model, NaN-safe
    plain = runs.index[runs["encoding"] == runs["base_encoding"]]
    rows = []
    for run in runs.index:
        base_name = runs.at[run, "base_encoding"]
        if runs.at[run, "encoding"] == base_name or pd.isna(base_name):
            continue
        bases = [b for b in plain if runs.at[b, "encoding"] == base_name and model[b] == model[run]]
        if len(bases) != 1:
            continue  # no plain run of its base on this model, or several: nothing to pair with
        base = bases[0]
        both = samples[samples["run_id"] == base].merge(
            samples[samples["run_id"] == run], on=PROMPT, suffixes=("_base", "_method")
        )
        for (protocol, length), cell in both.groupby(["protocol", "eval_len"], sort=True):
            if cell["reference_base"].astype(str).ne(cell["reference_method"].astype(str)).any():
                continue  # not the same prompts
            rows.append(
                {
                    "label": labels[run],
                    "run_id": run,
                    "base_run_id": base,
                    "base": base_name,
                    "seed": runs.at[run, "seed"],
                    "protocol": protocol,
                    "eval_len": int(length),
                    "base_score": float(cell["score_base"].mean()),
                    "score": float(cell["score_method"].mean()),
                    **paired_cell(cell["score_base"], cell["score_method"]),
                }
            )
    frame = pd.DataFrame(rows, columns=COLUMNS[:-1])
    frame["p_holm"] = holm(frame["p"].tolist())
    return frame


def base_section(folder: Path) -> list[str]:
    """The report's table of each method against its base model, cell by cell (× 100), or nothing where no
    method has a base run with the same prompts."""
    frame = base_differences(folder)
    if frame.empty:
        return []
    lines = [
        "## Against the base model, prompt by prompt",
        "",
        "Each method asked the same prompts as its base encoding on the same trained model (same seed): method − "
        "base, score × 100 over a length's prompts (depths pooled), with the 95% interval of the mean per-prompt "
        "difference (paired, each direction's moves by the exact interval; † where it excludes 0), the exact "
        "sign-flip p-value "
        f"(McNemar's test where every score is 0 or 1) and that p-value adjusted by Holm's method over the "
        f"{len(frame)} cells of this table (‡ below {FAMILY_LEVEL:g}: a change the table supports as a whole). "
        "Past L, a cell counts as a finding only where the base model retrieves at L.",
        "",
        "| method | base | seed | task | length | n | base | method | method − base | p | p (Holm) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in frame.sort_values(["label", "seed", "protocol", "eval_len"]).to_dict("records"):
        mark = (" †" if moved(row) else "") + (" ‡" if row["p_holm"] < FAMILY_LEVEL else "")
        lines.append(
            f"| {row['label']} | {row['base']} | {row['seed']} | `{row['protocol']}` | {row['eval_len']} | "
            f"{row['n']} | {100 * row['base_score']:.1f} | {100 * row['score']:.1f} | "
            f"{100 * row['difference']:+.1f} [{100 * row['low']:+.1f}, {100 * row['high']:+.1f}]{mark} | "
            f"{p_value(row['p'])} | {p_value(row['p_holm'])} |"
        )
    return lines + [""]
