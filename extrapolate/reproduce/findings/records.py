"""The findings as records (records.toml, package data): each one's statement, the folder it reads, the check
that decides it (a function of seeds.py, training_free.py, trained_2025.py or smollm2.py, by name) and, for the
README's front page, its headline. A record naming no check, two records of one name, or a headline past the
front page's bounds is refused at import."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

from extrapolate.reproduce.findings import cells, seeds, smollm2, trained_2025, training_free
from extrapolate.reproduce.findings.cells import Outcome
from extrapolate.tasks.files import tomllib  # tomli before Python 3.11

CHECK_MODULES = (seeds, training_free, trained_2025, smollm2)
MOST_HEADLINES, HEADLINE_CHARACTERS = 6, 200  # the README's front page: one screen


@dataclass(frozen=True)
class Finding:
    name: str
    statement: str
    folder: str  # under results/
    check: Callable[[], Outcome]

    def source(self, prefix: str) -> str:
        readme = "summary.md" if (cells.ROOT / "results" / self.folder / "summary.md").exists() else "README.md"
        return f"[{self.folder}]({prefix}results/{self.folder}/{readme})"


def checks() -> dict[str, Callable[[], Outcome]]:
    """Every public function of the check modules, by name."""
    return {
        name: function
        for module in CHECK_MODULES
        for name, function in vars(module).items()
        if callable(function) and getattr(function, "__module__", "") == module.__name__ and not name.startswith("_")
    }


def load() -> tuple[tuple[Finding, ...], dict[str, str]]:
    """(the findings in their records' order, {name: headline})."""
    records = tomllib.loads(resources.files(__package__).joinpath("records.toml").read_text(encoding="utf-8"))
    known = checks()
    findings, headlines = [], {}
    for record in records["finding"]:
        if record["check"] not in known:
            raise LookupError(f"finding {record['name']}: no check named {record['check']}")
        findings.append(Finding(record["name"], record["statement"], record["folder"], known[record["check"]]))
        if "headline" in record:
            headlines[record["name"]] = record["headline"]
    names = [f.name for f in findings]
    if len(set(names)) != len(names):
        raise ValueError("two findings share a name")
    if len(headlines) > MOST_HEADLINES or any(len(h) > HEADLINE_CHARACTERS for h in headlines.values()):
        raise ValueError(f"the README holds at most {MOST_HEADLINES} headlines of {HEADLINE_CHARACTERS} characters")
    return tuple(findings), headlines


FINDINGS, HEADLINES = load()
