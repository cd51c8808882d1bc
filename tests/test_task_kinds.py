"""A task kind is a plug-in (extrapolate/tasks/kinds.py): no code outside a kind's own module decides anything by
its name, and a kind defined here, registered for the test only, goes through planning, evaluation, the
results table and the report with no file of the package touched."""

import ast
import math
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import torch

from extrapolate.report.pages import write_report
from extrapolate.run import RunRequest, run
from extrapolate.tasks.kinds import TASK_KINDS, MeasureContext, Shapes, TaskKind, TaskSetup

from .helpers import make_corpus

PACKAGE = Path(__file__).resolve().parents[1] / "extrapolate"

# String literals equal to a kind's name that are data, not a decision on the kind, each at most this often:
ALLOWED = Counter(
    {
        # the `tasks` listing's row of the built-in kind: text a user reads
        ("cli/app.py", "perplexity"): 1,
        # the defaults the command line declares its options with before torch is imported (so before the kinds
        # are registered): checked against the registry below
        ("core/defaults.py", "perplexity"): 1,
        ("run/request.py", "perplexity"): 1,
    }
)


def test_the_light_defaults_name_the_registered_kinds():
    """DEFAULT_TASKS and RunRequest's default are spelled out (the command line reads them without importing the
    kinds); they must stay what the registry says."""
    from extrapolate.core.defaults import DEFAULT_TASKS
    from extrapolate.run.request import RunRequest
    from extrapolate.tasks.kinds import default_tasks
    from extrapolate.tasks.perplexity import PERPLEXITY

    assert default_tasks() == DEFAULT_TASKS
    assert RunRequest().tasks == (PERPLEXITY.name,)


def own_modules() -> set[Path]:
    """The registry's module and each registered kind's own module (every module of its package, for a kind
    that is a package of its own under tasks/, as RULER's is)."""
    modules = {PACKAGE / "tasks" / "kinds.py"}
    for _, kind in TASK_KINDS:
        module = Path(sys.modules[type(kind).__module__].__file__).resolve()
        modules |= set(module.parent.glob("*.py")) if module.parent != PACKAGE / "tasks" else {module}
    return modules


def test_no_kind_name_is_spelled_outside_its_own_module():
    names = set(TASK_KINDS.names())
    assert {"perplexity", "needle", "ruler"} <= names
    allowed_here = own_modules()
    found = Counter()
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.resolve() in allowed_here:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                found[(path.relative_to(PACKAGE).as_posix(), node.value)] += 1
    assert not found - ALLOWED, f"a kind's name outside its module (ask its TaskKind instead): {found - ALLOWED}"


class FirstTokenKind(TaskKind):
    """The mean NLL of each held-out document's first predicted token, in one window of the length: a causal
    model sees the same one token there at every length, so the value must not change with it."""

    name = "first-token"
    metrics = ("first_nll",)

    def attention_shapes(self, setup: TaskSetup, length: int) -> Shapes:
        return ((length, length),)  # one window per document

    def measure(self, setup: TaskSetup, context: MeasureContext, length: int) -> float:
        windows = torch.stack([doc[: length + 1] for doc in setup.heldout]).to(context.device)  # (D, length + 1)
        with torch.no_grad():
            nll = context.model.token_nll(windows[:, :-1], windows[:, 1:])  # (D, length)
        return float(nll[:, 0].mean())

    def protocol(self, setup: TaskSetup) -> str:
        return "first-token"

    def rows(self, setup: TaskSetup, length: int, result: float | None) -> list[dict]:
        value = float("nan") if result is None else result
        return [{"metric": "first_nll", "value": value, "depth": None, "n_tokens": len(setup.heldout)}]


@pytest.fixture()
def registered(monkeypatch, tmp_path):
    kind = FirstTokenKind()
    monkeypatch.setitem(TASK_KINDS._items, kind.name, kind)  # removed again after the test
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    return kind


def test_a_new_kind_runs_end_to_end_without_a_branch(registered, tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    request = RunRequest(
        model="tiny",
        steps=4,
        batch_size=4,
        train_len=32,
        eval_len=128,
        eval_tokens=256,
        corpus=str(corpus),
        tasks=(registered.name,),
        out=tmp_path / "out",
    )
    folder = run(request)
    table = pd.read_csv(folder / "results.csv")
    assert set(table.task) == {"first-token"} and set(table.metric) == {"first_nll"}
    assert sorted(table.eval_len) == [32, 64, 128] and (table.status == "ok").all()
    assert set(table.protocol) == {"first-token"} and table.kernel.notna().all()
    values = table.value.tolist()
    assert all(math.isfinite(v) and v > 0 for v in values)
    assert values == pytest.approx([values[0]] * len(values), rel=1e-4)  # the first token sees only itself
    assert (folder / "summary.md").exists()  # the run's summary reads a table of a kind it does not know
    assert write_report(folder).exists()  # and so does the report
