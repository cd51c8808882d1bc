"""Every Markdown file of the repository renders as written and points at what exists: its code fences close
(CommonMark's rule: a closing fence carries no text after it), every relative link and image resolves, and
every `extrapolate …` command in a code block parses against the CLI (its commands, options and values); and
docs/cli.md is the reference generated from the CLI itself (`python -m extrapolate.cli.reference`)."""

import re
import shlex
from pathlib import Path

import pytest
import typer

from extrapolate.cli.app import app

from .helpers import ROOT, project_files

DOCS = project_files("*.md")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def code_blocks(text: str) -> tuple[list[list[str]], list[int]]:
    """The lines of each fenced block, and the line numbers of fences left open at the end."""
    blocks, current, opened = [], None, None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if current is None:
            if match:
                current, opened = [], (match.group(1), number)
            continue
        fence, info = (match.group(1), match.group(2)) if match else ("", "")
        if match and fence[0] == opened[0][0] and len(fence) >= len(opened[0]) and not info.strip():
            blocks.append(current)
            current = None
        else:
            current.append(line)
    return blocks, ([opened[1]] if current is not None else [])


def anchors(doc: Path) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings: lower case, punctuation but `-` and `_` dropped,
    spaces made `-`, a repeated heading numbered `-1`, `-2`, …"""
    blocks_removed = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.S)
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", blocks_removed, flags=re.M):
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a linked heading anchors its text
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        if count:
            seen[f"{slug}-{count}"] = 1
    return set(seen)


@pytest.mark.parametrize("doc", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_fences_close_and_relative_links_resolve(doc):
    text = doc.read_text(encoding="utf-8")
    _, unclosed = code_blocks(text)
    assert not unclosed, f"{doc.name}: the code fence opened at line {unclosed[0]} never closes"
    outside = re.sub(r"```.*?```", "", text, flags=re.S)  # links inside code are code, not links
    for target in LINK.findall(outside):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        assert path.exists(), f"{doc.relative_to(ROOT)}: {target} does not exist"
        if anchor and path.suffix == ".md":
            assert anchor in anchors(path), f"{doc.relative_to(ROOT)}: {target}: no such heading"


def test_an_anchor_is_the_slug_github_gives_its_heading(tmp_path):
    doc = tmp_path / "page.md"
    doc.write_text("# Retrieval past the context (`results/x/`)\n\n## Notes\n\n## Notes\n\n```\n# not a heading\n```\n")
    assert anchors(doc) == {"retrieval-past-the-context-resultsx", "notes", "notes-1"}


def commands(doc: Path) -> list[str]:
    """Each `extrapolate …` command of the file's code blocks, its continued lines joined."""
    blocks, _ = code_blocks(doc.read_text(encoding="utf-8"))
    found = []
    for block in blocks:
        joined = "\n".join(block).replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.split(" #")[0].strip().removeprefix("$ ")
            if line.startswith("extrapolate "):
                found.append(line)
    return found


COMMANDS = [(doc, command) for doc in DOCS for command in commands(doc)]


@pytest.mark.parametrize("doc,command", COMMANDS, ids=[f"{d.name}:{c[:60]}" for d, c in COMMANDS])
def test_every_documented_command_parses(doc, command):
    """Parsed down to its subcommand as the CLI would, without running it: an unknown command or option, or a
    value of the wrong type, fails here."""
    words = shlex.split(command.split(" > ")[0].split(" | ")[0])[1:]
    group = typer.main.get_command(app)
    ctx = group.make_context("extrapolate", list(words), resilient_parsing=False)
    while hasattr(group, "commands") and remaining(ctx):  # a group: descend into the subcommand named
        name, *rest = remaining(ctx)
        group = group.get_command(ctx, name)
        assert group is not None, f"{doc.name}: no command {name!r} in `{command}`"
        ctx = group.make_context(name, rest, parent=ctx, resilient_parsing=False)


def remaining(ctx) -> list[str]:
    """The words a group left for its subcommand (click keeps the subcommand's name apart from its arguments)."""
    protected = getattr(ctx, "_protected_args", None) or getattr(ctx, "protected_args", None) or []
    return [*protected, *ctx.args]


def test_cli_reference_is_current():
    """docs/cli.md is the CLI reference generated from the commands themselves: a command or option changed
    without regenerating it fails here."""
    from extrapolate.cli.reference import REGENERATE, cli_reference

    written = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert written == cli_reference(), f"docs/cli.md differs from the CLI: regenerate it with `{REGENERATE}`"


def test_cli_reference_ignores_the_terminal_and_hidden_names(monkeypatch):
    """The reference reads no terminal (width, colour) and lists no hidden option: the former names that still
    work (--keep, --hf, --lengths) stay out of it."""
    from extrapolate.cli.reference import cli_reference

    plain = cli_reference()
    monkeypatch.setenv("COLUMNS", "20")
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert cli_reference() == plain
    for hidden in ("--keep", "--hf", "--lengths"):
        assert f"`{hidden}" not in plain and f"/ {hidden}" not in plain, hidden


def test_the_results_table_columns_are_documented_in_order():
    from extrapolate.report.table import COLUMNS

    text = " ".join((ROOT / "docs" / "measured.md").read_text().split())
    listed = text.split("has the columns `", 1)[1].split("`", 1)[0]
    assert listed.split(", ") == COLUMNS


CELL = re.compile(r"(\d+(?:\.\d+)?)% \[(\d+(?:\.\d+)?)–(\d+(?:\.\d+)?)\]")  # "80% [58–92]": a greedy cell


def shown_as(value: float, text: str) -> bool:
    decimals = len(text.partition(".")[2])
    return f"{value:.{decimals}f}" == text


def is_interval_of_prompts(score: str, low: str, high: str, most_prompts: int = 400) -> bool:
    """Whether "score% [low–high]" is a score summed over n prompts (n ≤ `most_prompts`; in twentieths of a prompt,
    so partial credit in quarters and fifths too) with the exact interval at its mean, as shown."""
    from extrapolate.core.intervals import proportion_interval

    common = (100, 50, 25, 20, 40, 200, 300, 400, 60, 80, 120, 150)  # the prompts a cell is usually over: tried first
    for n in sorted(range(1, most_prompts + 1), key=lambda n: (n not in common, n)):
        centre = round(float(score) * n / 100 * 20)
        for twentieths in range(max(centre - 20, 0), min(centre + 20, 20 * n) + 1):
            x = twentieths / 20
            if shown_as(100 * x / n, score):
                a, b = proportion_interval(x, n)
                if shown_as(100 * a, low) and shown_as(100 * b, high):
                    return True
    return False


def test_every_hand_written_retrieval_cell_is_an_interval_of_prompts():
    """A cell typed into a README or doc as "p% [low–high]" is a proportion of some number of prompts with its
    exact interval, as the tables give it (the generated summary.md and report.md pages, whose cells over
    seeds are Student's t, are checked against their tables by tests/test_committed_pages.py; a NOTES.md is a
    history, its cells as the pages gave them on its date)."""
    typed = [
        (doc, match.groups())
        for doc in DOCS
        if doc.name not in ("summary.md", "report.md", "NOTES.md")
        for match in CELL.finditer(doc.read_text(encoding="utf-8"))
    ]
    assert len(typed) > 100
    checked = {cell: is_interval_of_prompts(*cell) for cell in {cell for _, cell in typed}}  # each distinct once
    wrong = [f"{doc.relative_to(ROOT)}: {p}% [{lo}–{hi}]" for doc, (p, lo, hi) in typed if not checked[(p, lo, hi)]]
    assert not wrong, wrong[:10]
