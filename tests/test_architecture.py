"""The package's layers (docs/architecture.md): imports only go down them, as `lint-imports` checks from the
contract in pyproject.toml; no module imports itself back through others; the top of the package is the
layers and little else, each folder saying in its docstring what it owns and what it may import."""

import ast
import sys
from pathlib import Path

import grimp
from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "extrapolate"


def test_imports_only_go_down_the_layers():
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml")) == 0


def test_no_import_circle():
    graph = grimp.build_graph("extrapolate")
    index, low, stack, on_stack, circles = {}, {}, [], set(), []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(module):  # Tarjan: a strongly connected set of two or more modules is a circle
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    assert circles == []


def test_the_top_of_the_package_is_its_layers():
    entries = sorted(p.name for p in PACKAGE.iterdir() if p.name != "__pycache__")
    assert len(entries) <= 15, entries
    for folder in (p for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"):
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))
        assert doc and "import" in doc, f"{folder.name}/__init__.py says what it owns and what it may import"
