"""How a report labels a row: the encoding with what sets it apart in its table (factor, fine-tuning, adapters,
model and backend, run), the order of encodings and of one encoding's variants, and reading a label back."""

from __future__ import annotations

import pandas as pd


def in_encoding_order(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows in the registry's order of encodings (the order of every table and figure), unknown names after
    the known ones by name; the order of rows within an encoding is kept."""
    from extrapolate.encodings import sweep_order

    rank = {name: i for i, name in enumerate(sweep_order())}
    base, steps = split_label(frame["encoding"])
    place = base.map(lambda name: rank.get(name, len(rank)))
    ordered = frame.assign(_place=place, _name=base.where(place == len(rank), ""), _steps=steps)
    return ordered.sort_values(["_place", "_name", "_steps"], kind="stable").drop(columns=["_place", "_name", "_steps"])


FINETUNED = "+ft"  # "yarn+ft100": yarn fine-tuned for 100 steps at its extended length
ADAPTED = "+"  # "yarn+lora+ft100": fine-tuned through adapters (LoRA, LongLoRA), where a table holds both kinds
SCALED = " s="  # "yarn s=4": the scaling at factor 4, where a table holds the encoding at several factors
SOURCE = " @"  # "rope @gpt2": the model (and backend) a row ran on, where a table holds one encoding on several
OPTIONS = " ["  # "string [attention_factor=1]": the options of a run, where they set apart two runs of one cell
RUN = " #"  # "longrope #458e77": the run, where two runs of one label measured the same cell (other options)
CELL = ["seed", "task", "metric", "eval_len", "depth", "protocol"]  # with the label: one measured cell
# the kernel column's prefix on a row another backend than the native model computed (backends/): its label
BACKEND_KERNELS = {"transformers:": " (transformers)", "vllm:": " (vllm)"}


def finetuned_label(encoding: str, steps) -> str:
    return f"{encoding}{FINETUNED}{int(steps)}" if pd.notna(steps) and steps > 0 else encoding


def split_label(names: pd.Series) -> tuple[pd.Series, pd.Series]:
    """(encoding, fine-tune steps) of labels such as "yarn+ft100" or "yarn s=4+ft100" (0 steps for a plain name)."""
    names = names.astype(str).str.split(RUN, n=1, regex=False).str[0].str.split(OPTIONS, n=1, regex=False).str[0]
    parts = names.str.split(SOURCE, n=1, regex=False).str[0].str.split(FINETUNED, n=1, regex=False)
    encoding = parts.str[0].str.split(SCALED, n=1, regex=False).str[0]
    return encoding, parts.map(lambda p: int(p[1]) if len(p) > 1 and p[1].isdigit() else 0)


def label_variants(table: pd.DataFrame) -> pd.DataFrame:
    """The table with each row's encoding shown with what sets it apart in this table, so every report table
    and figure keeps such rows apart instead of averaging them (the stored table keeps the plain name):
    the factor where one encoding was run at several ("yarn s=4"), fine-tuning ("yarn+ft100", through adapters
    "yarn+lora+ft100"), the model and backend where one encoding ran on several ("rope @smollm2-135m",
    "rope @smollm2-135m (transformers)"), and where two runs still measured one cell, their options (a table
    with the `options` column of report/run_options.py: "string [attention_factor=1]"), else their run ids
    ("longrope #458e77")."""
    labels = table["encoding"].astype(str)
    if "factor" in table.columns and len(table):
        several = table.groupby("encoding")["factor"].transform("nunique") > 1
        labels = labels.where(~several, labels + SCALED + table["factor"].map(lambda f: f"{float(f):g}"))
    for how in ("finetune_adapter", "finetune_positions", "finetune_loss"):  # "yarn+lora", "yarn+pose", "yarn+longce"
        if how in table.columns and table[how].notna().any():
            labels = labels.where(table[how].isna(), labels + ADAPTED + table[how].astype(str))
    if "finetune_steps" in table.columns and (table["finetune_steps"].fillna(0) > 0).any():
        labels = pd.Series([finetuned_label(e, n) for e, n in zip(labels, table["finetune_steps"])], index=table.index)
    if len(table) and "model" in table.columns:
        source = row_sources(table)
        several = source.groupby(table["encoding"]).transform("nunique") > 1
        labels = labels.where(~several, labels + SOURCE + source)
    if len(table) and set(CELL) <= set(table.columns):
        runs = table["run_id"].astype(str)
        several = clashing(table, labels)  # two runs measured one cell: other options
        if "options" in table.columns:  # named by their options where the run records give them
            options = table["options"].fillna("").astype(str)
            labels = labels.where(~several | (options == ""), labels + OPTIONS + options + "]")
            several = clashing(table, labels)
        labels = labels.where(~several, labels + RUN + runs.str[:6])
    if labels.equals(table["encoding"].astype(str)):
        return table
    return in_encoding_order(table.assign(encoding=labels))


def clashing(table: pd.DataFrame, labels: pd.Series) -> pd.Series:
    """Rows of a label under which two runs measured one cell (every row of such a label)."""
    cell = [labels, *(table[c].astype(str) for c in CELL)]
    clash = table["run_id"].astype(str).groupby(cell, dropna=False).transform("nunique") > 1
    return labels.isin(set(labels[clash]))


def row_sources(table: pd.DataFrame) -> pd.Series:
    """What each row ran on, as a label shows it: the model's name (a path or hub id by its last part), and
    "(transformers)" or "(vllm)" where that backend computed it."""
    models = table["model"].fillna("").astype(str).map(lambda name: name.rstrip("/").rsplit("/", 1)[-1])
    kernels = table["kernel"] if "kernel" in table.columns else pd.Series("", index=table.index)

    def backend(kernel) -> str:
        prefix = next((p for p in BACKEND_KERNELS if isinstance(kernel, str) and kernel.startswith(p)), None)
        return BACKEND_KERNELS[prefix] if prefix else ""

    return models + kernels.map(backend)


def encoding_of(label: str) -> str:
    """The encoding a table label names: "yarn s=4+lora+ft100 @gpt2" -> "yarn" (`label_variants`)."""
    return label.split(RUN, 1)[0].split(OPTIONS, 1)[0].split(SOURCE, 1)[0].split(ADAPTED, 1)[0].split(SCALED, 1)[0]


def without_factor(label: str) -> str:
    """A label with its factor left out: "string s=2 [attention_factor=1]" -> "string [attention_factor=1]"."""
    head, mark, rest = label.partition(SCALED)
    if not mark:
        return label
    factor = rest.split(" ", 1)[0].split(FINETUNED, 1)[0].split(ADAPTED, 1)[0]
    return head + rest[len(factor) :]


def variant_order(label: str) -> tuple[float, int]:
    """(factor, fine-tuning steps) of a label, (0, 0) for a plain name: the order of one encoding's variants."""
    scaled, _, steps = label.split(RUN, 1)[0].split(OPTIONS, 1)[0].split(SOURCE, 1)[0].partition(FINETUNED)
    _, _, factor = scaled.partition(SCALED)
    try:
        return float(factor or 0), int(steps or 0)
    except ValueError:
        return 0.0, 0
