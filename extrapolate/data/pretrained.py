"""Pretrained Llama-family and Gemma checkpoints in the project's own model class: a Hugging Face folder or model id
(safetensors + config.json), or a GGUF file (dequantized by the `gguf` package through `transformers`).

Loading into `TransformerLM` means every RoPE scaling and attention kernel of the project applies to them.
Needs the optional extra: pip install 'extrapolate[hf]'.
"""

import contextlib
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from extrapolate.core.errors import UserError
from extrapolate.core.readers import first_line, read_json, reading
from extrapolate.data.families import config_from_hf, rope_parameters
from extrapolate.data.hf_extra import quiet_hub, require_transformers
from extrapolate.data.known_models import KNOWN, fetch_known
from extrapolate.data.rope_config import ReleasedRope, released_rope, replace_rope
from extrapolate.data.weight_names import split_fused, to_project_names
from extrapolate.model import TransformerLM


@dataclass
class PretrainedModel:
    """A loaded checkpoint: the project's model holding its weights, its own tokenizer, the name it was asked
    for by, and its original context."""

    model: TransformerLM
    tokenizer: object
    name: str
    original_len: int | None  # the context the checkpoint was trained with (None: its config states none)
    released: ReleasedRope  # the positional encoding it is released with
    backend: str = "native"  # what computes it (backends/): native, transformers or vllm


class HFTokenizer:
    """A transformers tokenizer behind the project's tokenizer interface (no special tokens added). With `rows`
    (the model's embedding rows) every id it gives the run is checked against them: a tokenizer may hold ids
    no text reaches (transformers' classes add default special tokens), so the refusal is of an id fed, not of
    the tokenizer's size, as transformers computes such a checkpoint without complaint."""

    def __init__(self, tokenizer, name: str, rows: int | None = None):
        self.tokenizer, self.name, self.rows = tokenizer, name, rows
        self.vocab_size = len(tokenizer)
        backend = getattr(tokenizer, "backend_tokenizer", None)  # fast tokenizers: the whole definition as JSON
        digest = hashlib.sha256(backend.to_str().encode()).hexdigest()[:10] if backend is not None else "slow"
        self.identity = f"hf{self.vocab_size}-{digest}"  # recorded with results, like a trained model's tokenizer
        self.bos_id = tokenizer.bos_token_id  # None: the tokenizer has no BOS token
        self.eos_id = tokenizer.eos_token_id  # where a generated answer ends (None: it runs its full length)
        # whether it puts the BOS first when asked to add its special tokens (its default for a text)
        marked = tokenizer("a", add_special_tokens=True).input_ids if self.bos_id is not None else []
        self.adds_bos = bool(marked) and marked[0] == self.bos_id

    def encode(self, text: str) -> list[int]:
        return self.fed(self.tokenizer.encode(text, add_special_tokens=False))

    def fed(self, ids):
        """`ids` (a list, or a (T,) tensor), once each is known to have a row in the embedding; else one line
        naming the first that has not."""
        if self.rows is None or len(ids) == 0:
            return ids
        tensor = torch.as_tensor(ids)  # (T,)
        if int(tensor.max()) >= self.rows:
            past = int(tensor[tensor >= self.rows][0])
            token = self.tokenizer.convert_ids_to_tokens(past)
            raise UserError(
                f"model {self.name!r}: its tokenizer gives id {past} ({token!r}), past the {self.rows} rows of its "
                "embedding; a tokenizer of another model?"
            )
        return ids

    def chat_parts(self) -> tuple[list[int], list[int]] | None:
        """The tokens of the chat template before and after one user turn, the assistant's turn opened after it
        (where the answer is generated); None for a tokenizer without a template."""
        if not getattr(self.tokenizer, "chat_template", None):
            return None
        marker = "\x00USER\x00"  # no template writes this itself
        text = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": marker}], tokenize=False, add_generation_prompt=True
        )
        before, _, after = text.partition(marker)
        return self.encode(before), self.encode(after)

    def encode_tensor(self, text: str) -> torch.Tensor:
        return torch.tensor(self.encode(text), dtype=torch.int64)

    def decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids])

    def to_transformers(self):
        return self.tokenizer


def from_hf_model(hf_model) -> TransformerLM:
    """transformers' model as the project's, computing what it computes: its weights, and its RoPE as released
    (plain, or the scaling it ships with, `released_rope`)."""
    from extrapolate.encodings import encoding_for

    config = config_from_hf(hf_model.config)
    released = released_rope(hf_model.config)
    encoding = encoding_for(
        config,
        released.encoding,
        factor=released.factor or 1.0,
        original_len=released.original_len,
        options=dict(released.options),
    )
    model = TransformerLM(config, encoding)
    state = split_fused({k: v.float() for k, v in hf_model.state_dict().items()}, config)
    state = to_project_names(state, post_norms=bool(config.post_norms))
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if config.stored(k)]
    if missing or unexpected:
        raise UserError(f"checkpoint does not map onto the model (missing {missing[:3]}, unexpected {unexpected[:3]})")
    return model.eval()


def names_a_path(spec: str) -> bool:
    """Whether `spec` can only be a local path: it starts as one does (`./`, `/`, `~`) or has more parts than
    a hub id's `owner/name`."""
    return spec.startswith((".", "/", "~", "\\")) or spec.count("/") > 1 or "\\" in spec


def checkpoint_files(spec: str, trust_remote_code: bool = False) -> tuple[str, str | None, dict]:
    """(folder or hub id, GGUF file name or None, transformers' loading options) of `spec`: a known name (see
    `extrapolate models`, fetched once), a folder with config.json, a .gguf file, or a hub id; a missing or
    corrupt file is named here, before transformers reads it."""
    local = Path(spec).expanduser()
    if spec.endswith(".gguf") and not local.exists():
        raise UserError(f"GGUF file {spec} does not exist")
    if names_a_path(spec) and not local.exists():  # not for the hub: its ids are `owner/name`
        raise UserError(f"model {spec}: no such folder or file")
    if spec not in KNOWN and not local.exists() and os.environ.get("HF_HUB_OFFLINE") == "1":
        raise UserError(f"model {spec!r} is neither a preset, a folder nor a known model, and the hub is offline")
    if local.is_file() and not spec.endswith(".gguf"):
        raise UserError(f"model {spec}: a file, not a GGUF checkpoint; give the folder that holds its config.json")
    if spec.endswith(".gguf"):
        check_gguf(local)
    elif local.is_dir():
        check_model_folder(local)
    require_transformers()
    if spec in KNOWN:
        path = fetch_known(spec)
        check_gguf(path)
        folder, gguf = str(path.parent), path.name
    elif spec.endswith(".gguf"):
        folder, gguf = str(local.parent), local.name
    else:
        folder, gguf = spec, None
    kwargs = {"gguf_file": gguf} if gguf else {}
    return folder, gguf, {**kwargs, "trust_remote_code": trust_remote_code}


@contextlib.contextmanager
def loading(spec: str, trust_remote_code: bool) -> Iterator[None]:
    """transformers' many error types for a checkpoint it cannot use, as one line (none is a bug of ours), the
    hub client's retry warnings silenced meanwhile."""
    try:
        with quiet_hub():
            yield
    except Exception as exc:
        if "trust_remote_code" in str(exc) and not trust_remote_code:
            raise UserError(
                f"model {spec!r} needs code from its own folder to load; pass --trust-remote-code to run that code"
            ) from None
        if "ignore_mismatched_sizes" in str(exc):  # its words point to a report it logged, not shown here
            raise UserError(
                f"could not load model {spec!r}: its weights have other shapes than its config gives (a config of "
                "another model, or one missing sizes, which transformers fills with its defaults)"
            ) from None
        raise UserError(f"could not load model {spec!r}: {first_line(exc)}") from None


def with_gguf_rope(config, folder: str, gguf: str | None):
    """The config with the RoPE scaling transformers' GGUF loader drops, read from the file itself."""
    if gguf:
        from extrapolate.data.gguf_rope import gguf_rope_parameters

        base = float(rope_parameters(config).get("rope_theta", getattr(config, "rope_theta", 10000.0)))
        params = gguf_rope_parameters(Path(folder) / gguf, base, int(config.max_position_embeddings))
        if params is not None:
            replace_rope(config, params)
    return config


def load_config(spec: str, trust_remote_code: bool = False):
    """transformers' config of `spec` alone, its weights unread: what a request can be checked against before
    a large checkpoint is loaded."""
    transformers = require_transformers()
    folder, gguf, kwargs = checkpoint_files(spec, trust_remote_code)
    with loading(spec, trust_remote_code):
        config = transformers.AutoConfig.from_pretrained(folder, **kwargs)
    return with_gguf_rope(config, folder, gguf)


def load_transformers(spec: str, trust_remote_code: bool = False):
    """transformers' own (model, tokenizer) of `spec` (`checkpoint_files`). A checkpoint's own code runs only
    with `trust_remote_code`; its weights are read from safetensors, or from a pickle by torch's weights-only
    loader (never unpickled)."""
    transformers = require_transformers()
    folder, gguf, kwargs = checkpoint_files(spec, trust_remote_code)
    with loading(spec, trust_remote_code):
        hf_model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, **kwargs)
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, **kwargs)
    with_gguf_rope(hf_model.config, folder, gguf)
    return hf_model, tokenizer


def check_gguf(path: Path) -> None:
    """Parse a GGUF file's header and tensor table before transformers does, so a corrupt file is named."""
    try:
        import gguf  # noqa: F401
    except ImportError:  # the optional extra is missing: require_transformers says so
        return
    from extrapolate.data.gguf_rope import gguf_reader

    with reading(path, "GGUF file"):
        tensors = {tensor.name for tensor in gguf_reader(path).tensors}
    if "token_embd.weight" not in tensors:  # transformers would build its default-sized model for the sizes
        raise UserError(f"GGUF file {path} holds no model: no token embedding among its {len(tensors)} tensors")


WEIGHT_FILES = ("*.safetensors", "*.bin")  # what transformers reads a folder's weights from


def check_model_folder(folder: Path) -> None:
    """Parse a model folder's config.json and every safetensors header before transformers does, so a corrupt
    file is named (transformers reports most of them without the file's name)."""
    from safetensors import safe_open

    if (folder / "config.json").exists():
        read_json(folder / "config.json", "model config")
        if not any(next(folder.glob(pattern), None) for pattern in WEIGHT_FILES):  # now, not once a run has trained
            raise UserError(f"model folder {folder} has a config.json but no weights (*.safetensors or *.bin)")
    for weights in sorted(folder.glob("*.safetensors")):
        with reading(weights, "safetensors file"), safe_open(str(weights), "pt") as handle:
            handle.keys()
