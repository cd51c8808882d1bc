"""The page's set-up section: what was measured, on what, how: models and their sizes, corpus, seeds,
protocols and kernels, device, machine and commit, the prompt format, and the text perplexity scored."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from extrapolate.report.table import of_kind
from extrapolate.tasks.passkey import CHAT_MARK
from extrapolate.tasks.perplexity import PERPLEXITY

# a provenance cell left empty by rows written before it was recorded, and the text columns that show it
UNRECORDED, RECORDED_TEXT = (
    "unrecorded",
    ["protocol", "model", "corpus", "tokenizer", "device", "machine", "dtype", "kernel", "git_sha", "package_version"],
)
UNITS = {"t-documents": "documents", "bootstrap-documents": "documents", "bootstrap-windows": "windows"}


def distinct(table: pd.DataFrame, column: str, quote: str = "`") -> str:
    """Every value of a column, in order of first appearance: a table grown by several calls (other commits,
    other machines) must not be described by its first row alone."""
    return ", ".join(f"{quote}{v}{quote}" for v in table[column].astype(str).unique())


def model_sizes(table: pd.DataFrame) -> list[str]:
    """Each model with its parameters: "`small` (1,066,112 parameters)", or the range where encodings add their
    own (T5's bias table, FIRE's MLP), so the line does not depend on which row comes first; a model whose every
    row failed (diverged) has no count, and says so rather than guess."""
    from extrapolate.data.known_models import KNOWN

    out = []
    for model, counts in table.groupby("model", sort=False)["params"]:
        counts = counts.dropna()
        if counts.empty:
            size = "parameters not recorded"
        elif counts.min() == counts.max():
            size = f"{int(counts.min()):,} parameters"
        else:
            size = f"{int(counts.min()):,}–{int(counts.max()):,} parameters by encoding"
        known = KNOWN.get(str(model))  # a known checkpoint: named as it is, GGUF quantisation included
        what = f": {known.description}, dequantized to float32" if known is not None else ""
        out.append(f"`{model}` ({size}{what})")
    return out


def setup_lines(table: pd.DataFrame) -> list[str]:
    protocols = sorted(table["protocol"].astype(str).unique())
    seeds = sorted(table["seed"].unique())
    return [
        "- model: "
        + ", ".join(model_sizes(table))
        + f", training length L = {', '.join(str(v) for v in sorted(table['train_len'].unique()))}",
        f"- corpus: {distinct(table, 'corpus')}; seeds: {', '.join(str(s) for s in seeds)}",
        f"- protocols: {', '.join(f'`{p}`' for p in protocols)}; kernels: "
        + ", ".join(f"{e} → `{k}`" for e, k in table.groupby("encoding", sort=False)["kernel"].first().items()),
        f"- device {distinct(table, 'device')}, evaluation dtype {distinct(table, 'dtype')}, extrapolate "
        f"{distinct(table, 'package_version', '')} (commit {distinct(table, 'git_sha', '')})",
        f"- machine: {distinct(table, 'machine') if 'machine' in table else UNRECORDED}",
        *prompt_format(table),
        *scored_lines(table),
    ]


def scored_lines(table: pd.DataFrame) -> list[str]:
    """What perplexity scored at each length: the documents (or, of one document, windows) and tokens, from the
    rows' `n` and `n_tokens` (a range where the rows of one length differ); the tokens alone where rows were
    written before `n` was recorded."""
    if not {"task", "metric", "n_tokens"} <= set(table.columns):
        return []
    rows = table[of_kind(table, PERPLEXITY) & (table["metric"] == "ppl") & (table["status"] == "ok")]
    if rows.empty:
        return []
    n = pd.to_numeric(rows["n"], errors="coerce") if "n" in rows else pd.Series(float("nan"), index=rows.index)
    methods = rows["ci_method"] if "ci_method" in rows else pd.Series(None, index=rows.index, dtype=object)
    units = methods.map(lambda method: UNITS.get(str(method), "documents"))

    def span(values, fmt=str) -> str:
        low, high = min(values), max(values)
        return fmt(low) if low == high else f"{fmt(low)}–{fmt(high)}"

    parts = []
    for length, at in rows.assign(n=n, unit=units).dropna(subset=["n_tokens"]).groupby("eval_len"):
        tokens = span([int(t) for t in at["n_tokens"]], lambda t: f"{t:,}")
        counted = at.dropna(subset=["n"])
        if counted.empty:
            parts.append(f"{int(length)}: {tokens} tokens (documents not recorded)")
        else:
            unit = "/".join(dict.fromkeys(counted["unit"]))
            count = span([int(v) for v in counted["n"]])
            unit = unit[:-1] if count == "1" and unit.endswith("s") else unit  # "1 window", "1 document"
            parts.append(f"{int(length)}: {count} {unit}, {tokens} tokens")
    return [f"- perplexity scored (held-out text per length): {'; '.join(parts)}"]


def prompt_format(table: pd.DataFrame) -> list[str]:
    """How the retrieval and RULER prompts were given, from their protocols: plain text, or wrapped in the
    model's chat template (a protocol marked +chat); nothing for a table without such rows."""
    if not {"task", "protocol"} <= set(table.columns):
        return []
    protocols = table.loc[~of_kind(table, PERPLEXITY), "protocol"].dropna().astype(str)
    protocols = protocols[protocols != UNRECORDED]
    if protocols.empty:
        return []
    chat = protocols.str.contains(CHAT_MARK, regex=False)
    if chat.all():
        return ["- prompts: each wrapped in the model's chat template (protocols marked `+chat`)"]
    if chat.any():
        return ["- prompts: plain text, and in the model's chat template where the protocol is marked `+chat`"]
    return ["- prompts: plain text, no chat template"]


# text columns a table written before they existed (or edited by hand) may leave empty


def rotary_shape(folder: Path) -> tuple[int, float] | None:
    """(head size, RoPE base) of the run's model, from the run.json the run wrote (never guessed from a name);
    None when the folder has no readable run.json (the frequency figure is then left out)."""
    import json

    try:
        config = json.loads((folder / "run.json").read_text())["model_config"]
        head = config.get("head_size") or int(config["d_model"]) // int(config["n_heads"])
        return int(head), float(config["rope_base"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def checkpoint_lines(folder: Path) -> list[str]:
    """A pretrained model's original context (what a factor counts from) and the RoPE it is released with,
    from the run.json the run wrote; nothing for a model trained here or a folder without that record."""
    import json

    try:
        training = json.loads((folder / "run.json").read_text())["training"]
        name, original, released = training["pretrained"], training["original_context"], training["released_rope"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [f"Checkpoint `{name}`: pretrained at L = {original}; released with {released}.", ""]
