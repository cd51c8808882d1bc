"""Evaluation tasks: each kind turns (model, documents or prompts, length) into measurements and rows —
perplexity (`perplexity`), retrieval (`passkey`, its token-exact prompts in `prompt`, its resumable depth logs
in `depth_log`), RULER's tasks (`ruler`), BABILong's (`babilong`) — behind one protocol and registry (`kinds`),
and the declarative task files behind retrieval (`files`). A new task is a TOML file under the repository's
tasks/ and, for a new kind, one module here with its `TaskKind`, registered on import (below). May import
`data` and below."""

# Each module registers its kind on import; the order of these lines is the order in which a cell measures the
# kinds and writes their rows (perplexity first, as every committed table has it).
from extrapolate.tasks import perplexity  # noqa: F401

# isort: split
from extrapolate.tasks import passkey  # noqa: F401

# isort: split
from extrapolate.tasks import ruler  # noqa: F401

# isort: split
from extrapolate.tasks import babilong  # noqa: F401

# isort: split
from extrapolate.tasks import longppl  # noqa: F401
