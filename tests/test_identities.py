"""Run ids and model-cache folders are part of every committed result (the `run_id` column, the cache a later
run reuses): a change to the code's layout must not move them. The golden file holds the identities of a
spread of cells — every encoding, a fine-tune, options, a pretrained-style tokenizer choice — resolved from a
generated corpus; `UPDATE_IDENTITIES=1 pytest tests/test_identities.py` rewrites it, only for a change that
means to change them (a new model field, a new task version)."""

import json
import os
from pathlib import Path

from extrapolate.encodings import ENCODINGS
from extrapolate.run import RunRequest, resolve, resolve_run
from extrapolate.run.prepare import prepare

from .helpers import make_corpus

GOLDEN = Path(__file__).parent / "data" / "identities.json"


def cells():
    base = dict(
        model="tiny",
        train_len=32,
        eval_lens=(32, 64),
        eval_tokens=128,
        tasks=("perplexity",),
        steps=4,
        batch_size=2,
        device="cpu",
        # pinned: "auto" resolves to bfloat16 only on CPUs with fast bf16 matmuls, and the resolved dtype is
        # part of the model's identity, so the golden names would depend on the machine's instruction set
        train_dtype="bfloat16",
    )
    for name, spec in ENCODINGS:
        depth = {"layers": 4} if spec.check_depth else {}  # a NoPE layer (every 4th) takes 4 of them
        yield name, dict(base, encoding=name, **depth)
    yield "yarn+ft", dict(base, encoding="yarn", finetune_steps=3)
    yield "rope-seed1-bytes", dict(base, encoding="rope", seed=1, tokenizer="bytes")
    yield "self-extend-options", dict(base, encoding="self-extend", encoding_options=(("group", 2), ("window", 8)))
    yield (
        "alibi-passkey",
        dict(base, encoding="alibi", train_len=128, eval_lens=(128,), tasks=("perplexity", "retrieval")),
    )
    yield "learned-clamp", dict(base, encoding="learned", learned_policy="clamp", position_std=0.02)
    yield "rope-compiled", dict(base, encoding="rope", compile=True)


def identities(tmp_path) -> dict:
    corpus = make_corpus(tmp_path / "corpus")
    out = {}
    for label, fields in cells():
        request = resolve(RunRequest(corpus=str(corpus), out=tmp_path / label, **fields))
        resolved = resolve_run(request, prepare(request))
        out[label] = {"run_id": resolved.run_id, "model": resolved.model_folder.name}
    return out


def test_run_ids_and_model_folders_are_unchanged(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    now = identities(tmp_path)
    if os.environ.get("UPDATE_IDENTITIES"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    assert now == json.loads(GOLDEN.read_text())
