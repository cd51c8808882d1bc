"""RULER's tasks (Hsieh et al., 2024): needles, variable tracking, common and frequent words, QA, as
declarative task files (`kind = "ruler"`) — the file's fields (`task`), the prompts exact in tokens
(`builder`, its haystacks in `haystack`, each task's draw in `generators`, QA's files in `qa`), the
scores (`score`) and the kind that runs them (`kind`, registered on import)."""

from extrapolate.tasks.ruler import kind  # noqa: F401
