"""Shared test fixtures: a small local corpus made by the test itself."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from extrapolate.core.faults import KILL_AT_STEP
from extrapolate.core.intervals import proportion_interval

ROOT = Path(__file__).resolve().parents[1]  # the repository

WORDS = (
    "the grass is green and the sky is blue while the sun is yellow over the quiet river where "
    "old ships sail slowly past the harbour wall at dusk and gulls cry"
).split()


def make_corpus(folder: Path, documents: int = 6, words: int = 900, seed: int = 0) -> Path:
    """Plain-text documents (one file each) of pseudo-English long enough for short evaluation lengths."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(documents):
        text = " ".join(rng.choice(WORDS) for _ in range(words))
        (folder / f"doc{i:02d}.txt").write_text(text + ".\n")
    return folder


def tiny_options(steps: int = 4, batch_size: int = 4, eval_len: int = 128, eval_tokens: int = 256) -> list[str]:
    """The CLI options of a `tiny` model trained at L = 32 for a few steps: a run or sweep in seconds."""
    return [
        *("--model", "tiny", "--steps", str(steps), "--batch-size", str(batch_size), "--train-len", "32"),
        *("--eval-len", str(eval_len), "--eval-tokens", str(eval_tokens)),
    ]


# A bound on waiting exists only against a hung process: tests wait for events (a process ending, a job
# leaving the queue), never for a duration. The bound is generous, set here alone, and scaled by
# EXTRAPOLATE_TEST_PATIENCE (a factor, default 1) on a machine slower still.
HUNG_AFTER_SECONDS = 3600


def patience() -> float:
    """Seconds after which a waited-for event counts as never coming (a hung process)."""
    return HUNG_AFTER_SECONDS * float(os.environ.get("EXTRAPOLATE_TEST_PATIENCE", "1") or 1)


def wait_for(done, what: str, poll: float = 1.0) -> None:
    """Poll `done()` until it is true; past `patience()` fail saying this is a timeout, not a defect."""
    give_up = time.monotonic() + patience()
    while not done():
        if time.monotonic() > give_up:
            pytest.fail(
                f"timeout, not a defect found: {what} did not happen within {patience():.0f} s "
                "(a hung process?); on a slower machine set EXTRAPOLATE_TEST_PATIENCE to a larger factor"
            )
        time.sleep(poll)


def killed_at_step(command: list[str], env: dict, step: int, **popen) -> subprocess.CompletedProcess:
    """Run `command` with the training's deliberate crash after `step` (extrapolate.core.faults) and check it
    died of it: a run that ends any other way fails the test with that run's own error output."""
    done = subprocess.run(command, env={**env, KILL_AT_STEP: str(step)}, capture_output=True, text=True, **popen)
    assert done.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), (
        f"the run was to die of SIGKILL after step {step} but exited with {done.returncode}:\n"
        f"{done.stdout[-2000:]}{done.stderr[-4000:]}"
    )
    return done


def project_files(pattern: str) -> list[Path]:
    """The repository's own files matching `pattern` (a git pathspec such as "*.md"): tracked or new, not what
    git ignores (a user's results folders, perhaps being written while the tests run). Outside a git checkout,
    every matching file under the root."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", pattern],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        return sorted(ROOT / name for name in listed if (ROOT / name).is_file())
    except (OSError, subprocess.CalledProcessError):
        found = ROOT.glob(f"**/{pattern}")
        return sorted(p for p in found if not {".git", "node_modules"} & set(p.parts) and "egg-info" not in str(p))


def load_script(name: str):
    """A script of scripts/ imported as a module (scripts/ is not a package), for its functions and `main`."""
    import importlib.util

    path = ROOT / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def six_steps(model):
    """A training of `model` for 6 steps at L = 32 with a checkpoint every 3: stopped at 3, resumed to 6."""
    from extrapolate.core.config import TrainConfig

    return TrainConfig(
        model=model, corpus="test", seq_len=32, batch_size=4, steps=6, warmup_steps=2, checkpoint_every=3
    )


def pooled_hits(cells) -> tuple[int, int]:
    """(hits, prompts) of retrieval rows pooled (a length's depths, or a seed's cells): each row's share × n."""
    return int(sum(round(v * k) for v, k in zip(cells.value, cells.n))), int(cells.n.sum())


def wilson_cell(hits: int, n: int) -> str:
    """A pooled proportion as the tables print it, with Wilson's 95% interval: "71% [61–79]"."""
    low, high = proportion_interval(hits, n)
    return f"{100 * hits / n:.0f}% [{100 * low:.0f}–{100 * high:.0f}]"


def bench_rows(folder: Path) -> list:
    """A committed bench.csv read back as the `BenchRow`s `extrapolate bench` wrote (empty cells as None)."""
    import dataclasses

    import pandas as pd

    from extrapolate.bench.measure import BenchRow

    frame = pd.read_csv(folder / "bench.csv")
    names = [f.name for f in dataclasses.fields(BenchRow)]
    return [BenchRow(**{k: None if pd.isna(r[k]) else r[k] for k in names if k in r}) for _, r in frame.iterrows()]


def continued_and_whole(encoding: str):
    """(hidden states of 150 tokens fed as 70 then 80 through a cache, the same fed whole) of a small random
    model with `encoding` (L = 64, so the cache runs past L), and the model."""
    import torch

    from extrapolate.core.config import ModelConfig
    from extrapolate.model import TransformerLM

    torch.manual_seed(0)
    config = ModelConfig(vocab_size=64, d_model=32, n_heads=2, n_layers=2, max_len=64, encoding=encoding)
    model = TransformerLM(config).eval()
    tokens = torch.randint(0, 64, (2, 150))  # past L = 64
    with torch.no_grad():
        whole = model.hidden_states(tokens)
        cache = model.new_cache()
        pieces = [model.hidden_states(tokens[:, :70], cache=cache), model.hidden_states(tokens[:, 70:], cache=cache)]
    return torch.cat(pieces, dim=1), whole, model


def transformers_llama(ours, rope_parameters: dict, max_positions: int | None = None):
    """transformers' Llama (eager attention) holding the weights of `ours`, a project Llama, with `rope_parameters`."""
    import transformers

    from extrapolate.data.weight_names import to_hf_names

    c = ours.config
    config = transformers.LlamaConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.d_model,
        intermediate_size=c.ff_dim,
        num_hidden_layers=c.n_layers,
        num_attention_heads=c.n_heads,
        num_key_value_heads=c.kv_heads,
        max_position_embeddings=max_positions or c.max_len,
        rms_norm_eps=c.norm_eps,
        tie_word_embeddings=c.tie_embeddings,
        rope_parameters=rope_parameters,
        attn_implementation="eager",
    )
    theirs = transformers.LlamaForCausalLM(config).eval()
    theirs.load_state_dict(to_hf_names(ours.state_dict()), strict=False)
    return theirs
