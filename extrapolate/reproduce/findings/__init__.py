"""The README's findings, computed from the committed results: each finding a record (records.toml) whose
check reads its results folder, states its numbers with their 95% intervals and n, and says whether it holds
under the intervals and the validity rule (a cell past L counts only for a model that retrieves at L); over the
whole family, Holm's adjustment of each finding's p-value (reproduce/family.py). The pages are generated from
them alone (pages.py: `python -m extrapolate.reproduce.findings --write`).

- cells.py: the tables, cells and rules the checks share;
- seeds.py, training_free.py, trained_2025.py, smollm2.py: the checks, one per finding;
- records.py and records.toml: the findings as records;
- pages.py: the README's and docs/results.md's blocks, and the command line.
"""

from extrapolate.reproduce.findings import cells  # noqa: F401
from extrapolate.reproduce.findings.cells import (  # noqa: F401
    BAR,
    DEGRADES,
    PERPLEXITY_SHAPES,
    PPL_MARGIN,
    RETRIEVAL_SHAPES,
    ROOT,
    RULER_BAR,
    AcrossSeeds,
    Cell,
    Outcome,
    at_least_over,
    below_over,
    by_depth,
    depth_cells,
    flat,
    flat_over,
    greedy,
    held,
    lost,
    outcome,
    over_seeds,
    plain_prompts,
    pool,
    ppl,
    ppl_of_seed,
    prompts_cell,
    ratio,
    ratios,
    retrieves,
    ruler,
    samples,
    scored,
    seed_cell,
    seed_rises,
    table,
)
from extrapolate.reproduce.findings.pages import (  # noqa: F401
    END,
    START,
    TARGETS,
    block,
    evaluated,
    family_line,
    family_of,
    family_size,
    main,
    rewritten,
    targets,
    verdict,
)
from extrapolate.reproduce.findings.records import FINDINGS, HEADLINES, Finding  # noqa: F401
from extrapolate.reproduce.findings.seeds import *  # noqa: F401,F403
from extrapolate.reproduce.findings.smollm2 import *  # noqa: F401,F403
from extrapolate.reproduce.findings.trained_2025 import *  # noqa: F401,F403
from extrapolate.reproduce.findings.training_free import *  # noqa: F401,F403
