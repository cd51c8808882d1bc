"""Options given a value the job cannot use are named in a warning (a run takes them without complaint, so
without one a user would believe they changed the measurement); options it uses are never named."""

import pytest
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.run.ignored import ignored_options
from extrapolate.run.request import RunRequest

from .helpers import make_corpus

cli = CliRunner()


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))


def flagged(request: RunRequest, encodings=("rope",)) -> str:
    return " | ".join(ignored_options(request, list(encodings)))


def test_the_defaults_are_never_flagged():
    assert ignored_options(RunRequest(), ["rope"]) == []
    assert ignored_options(RunRequest(tasks=("passkey",)), ["alibi", "learned"]) == []


def test_factor_is_flagged_only_when_no_encoding_reads_it():
    assert "--factor" in flagged(RunRequest(encoding="alibi", factor=4.0), ["alibi"])
    assert "--factor" in flagged(RunRequest(factor=4.0), ["rope", "t5"])
    assert flagged(RunRequest(factor=4.0), ["rope", "yarn"]) == ""  # yarn reads it
    for name in ("llama4-temperature", "drope", "self-extend", "dynamic-yarn"):  # training-free, but no s read
        assert "--factor" in flagged(RunRequest(encoding=name, factor=4.0), [name]), name
    assert flagged(RunRequest(factor=4.0, finetune_steps=10), ["rope"]) == ""  # it sets the fine-tune's L'


def test_perplexity_options_are_flagged_without_the_perplexity_task():
    notes = flagged(RunRequest(tasks=("passkey",), protocol="sliding", stride=64, eval_docs=3))
    assert "--protocol, --stride set the perplexity evaluation," in notes
    assert "--eval-docs set the perplexity and longppl evaluations," in notes  # LongPPL reads its documents too
    assert flagged(RunRequest(tasks=("perplexity",), protocol="sliding", stride=64)) == ""


def test_longppl_reads_the_perplexity_documents_but_not_its_protocol():
    """LongPPL scores the full windows of the perplexity's documents: --eval-docs and --eval-tokens change it."""
    notes = flagged(RunRequest(tasks=("longppl",), eval_docs=1, eval_tokens=16384, protocol="sliding"))
    assert "--protocol set the perplexity evaluation" in notes
    assert "--eval-docs" not in notes and "--eval-tokens" not in notes


def test_an_option_of_two_evaluations_not_asked_is_one_sentence():
    notes = ignored_options(RunRequest(tasks=("passkey",), eval_tokens=100, protocol="sliding"), ["rope"])
    assert "--eval-tokens set the perplexity and longppl evaluations, which --tasks does not include: ignored" in notes
    assert sum("--eval-tokens" in note for note in notes) == 1 and "--protocol set the perplexity evaluation," in (
        " | ".join(notes)
    )


def test_passkey_task_is_flagged_where_neither_measured_nor_trained_on():
    asked = dict(tasks=("perplexity",), train_tasks=("qa1-compact",), passkey_task="passkey")
    assert "--passkey-task names the retrieval task measured" in flagged(RunRequest(**asked))
    assert "--passkey-task" not in flagged(RunRequest(**{**asked, "tasks": ("perplexity", "retrieval")}))
    assert "--passkey-task" not in flagged(RunRequest(**{**asked, "tasks": ("perplexity", "qa1")}))
    assert "--passkey-task" not in flagged(RunRequest(**{**asked, "train_tasks": ()}))  # its prompts train


def test_stride_is_flagged_with_the_full_protocol_only():
    assert "--stride" in flagged(RunRequest(stride=64))
    assert flagged(RunRequest(stride=64, protocol="sliding")) == ""


def test_training_options_are_flagged_for_a_pretrained_model(tmp_path):
    model = tmp_path / "model.gguf"  # a .gguf path is a pretrained model by its name alone
    notes = flagged(RunRequest(model=str(model), steps=10, lr=1e-4, tokenizer="bytes"))
    assert "--steps, --lr, --tokenizer" in notes and "pretrained" in notes
    # a fine-tune of it reads the training precision, and nothing above is about evaluation
    assert "--train-dtype" not in flagged(RunRequest(model=str(model), train_dtype="float32", finetune_steps=5))
    assert "--train-dtype" in flagged(RunRequest(model=str(model), train_dtype="float32"))
    assert flagged(RunRequest(model=str(model), dtype="bfloat16", eval_tokens=100)) == ""


def test_finetune_lr_is_flagged_without_a_fine_tune():
    assert "--finetune-lr" in flagged(RunRequest(finetune_lr=1e-4))
    assert "--finetune-lr" in flagged(RunRequest(finetune_lr=1e-4, finetune_len=128))  # the zero-shot point
    assert flagged(RunRequest(finetune_lr=1e-4, finetune_steps=5)) == ""


def test_a_kernel_the_encoding_cannot_run_is_named_with_the_one_it_runs():
    notes = flagged(RunRequest(kernel="sdpa"), ["rope", "alibi", "self-extend"])
    assert "--kernel sdpa cannot run alibi (it runs fused-bias), self-extend (it runs two-part)" in notes
    assert "fused-bias" in flagged(RunRequest(kernel="fused-bias"), ["rope"])  # no bias: the fused causal call
    assert flagged(RunRequest(kernel="sdpa"), ["rope", "yarn"]) == ""
    assert flagged(RunRequest(kernel="blocked"), ["rope", "alibi", "t5", "self-extend"]) == ""


def test_learned_policy_is_flagged_without_the_learned_encoding():
    assert "--learned-policy" in flagged(RunRequest(learned_policy="clamp"), ["rope"])
    assert flagged(RunRequest(learned_policy="clamp"), ["learned"]) == ""


def test_run_prints_the_warning_and_still_measures(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", documents=3, words=200)
    out = tmp_path / "out"
    result = cli.invoke(
        app,
        [
            "run",
            "--encoding",
            "alibi",
            "--factor",
            "4",
            "--model",
            "tiny",
            "--steps",
            "2",
            "--train-len",
            "16",
            "--eval-lens",
            "16",
            "--eval-tokens",
            "32",
            "--tokenizer",
            "bytes",
            "--corpus",
            str(corpus),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "warning: --factor" in result.output and (out / "results.csv").exists()


def test_sweep_names_cluster_options_the_local_executor_cannot_use_on_one_line(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", documents=3, words=200)
    result = cli.invoke(
        app,
        [
            "sweep",
            "--encodings",
            "rope",
            "--dry-run",
            "--partition",
            "gpu",
            "--time-min",
            "30",
            "--model",
            "tiny",
            "--train-len",
            "16",
            "--eval-lens",
            "16",
            "--tokenizer",
            "bytes",
            "--tasks",
            "perplexity",
            "--corpus",
            str(corpus),
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "warning:" in line]
    assert lines == ["warning: --partition, --time-min configure SLURM jobs, and --executor is local: ignored"]


def test_longce_settings_are_flagged_without_longce():
    assert "--longce-window" in flagged(RunRequest(longce_window=8, finetune_steps=10))
    assert flagged(RunRequest(longce_window=8, finetune_steps=10, finetune_loss="longce")) == ""


def test_a_dry_run_on_a_checkpoint_names_only_the_options_given(tmp_path):
    """`run --dry-run` resolves its request before planning: the warnings are taken before the defaults fill."""
    pytest.importorskip("transformers")
    import torch

    from extrapolate.core.config import ModelConfig
    from extrapolate.data.corpora import load_corpus
    from extrapolate.data.tokenizers import load_tokenizer
    from extrapolate.model import TransformerLM
    from extrapolate.run.export import export_hf

    corpus = make_corpus(tmp_path / "corpus", documents=4, words=600)
    tokenizer = load_tokenizer("bpe:300", load_corpus(str(corpus)))
    torch.manual_seed(0)
    export_hf(TransformerLM(ModelConfig(d_model=32, n_layers=2, n_heads=2, vocab_size=tokenizer.vocab_size)),
              tmp_path / "llama", tokenizer)  # fmt: skip
    args = ["run", "--model", str(tmp_path / "llama"), "--tasks", "perplexity", "--eval-lens", "64"]
    args += ["--corpus", str(corpus), "--dry-run"]
    for extra, said in (([], None), (["--steps", "5"], "--steps configure a model trained here")):
        result = cli.invoke(app, [*args, *extra])
        assert result.exit_code == 0, result.output
        warnings = [line for line in result.output.splitlines() if line.startswith("warning: --")]
        assert warnings == ([] if said is None else [w for w in warnings if said in w]) and len(warnings) == bool(said)


def test_trust_remote_code_is_flagged_on_a_model_trained_here():
    assert "--trust-remote-code lets a checkpoint's own code run, and small is a model trained here: ignored" in (
        flagged(RunRequest(trust_remote_code=True))
    )
    assert flagged(RunRequest(trust_remote_code=False)) == ""
