"""The architecture page names every module, and the code keeps the shape it describes: no import cycle (every
import counted, function-local ones too) and no library module over 700 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("distill", "procedures")
MODULES = sorted(path.relative_to(ROOT).as_posix() for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def test_the_architecture_page_names_every_module():
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert [module for module in MODULES if f"`{module}`" not in page] == []


def _imports() -> dict[str, set[str]]:
    """Each module's imports of the project's own modules, wherever in the module they stand."""
    names = {path[:-3].replace("/", ".").removesuffix(".__init__"): path for path in MODULES}
    graph: dict[str, set[str]] = {}
    for module, path in names.items():
        found = set()
        for node in ast.walk(ast.parse((ROOT / path).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                while target and target not in names:
                    target = target.rpartition(".")[0]
                if target and target != module and not module.startswith(target + "."):
                    found.add(target)
        graph[module] = found
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles():
    assert _cycles(_imports()) == []


@pytest.mark.parametrize("module", [m for m in MODULES if m.startswith("distill/")])
def test_no_library_module_is_over_700_lines(module):
    """A module over 700 lines mixes concerns (issue 39 split data, search, the Distiller and provenance out)."""
    assert len((ROOT / module).read_text(encoding="utf-8").splitlines()) <= 700


def test_one_vocabulary_unlabeled():
    """The API says "unlabeled" as --unlabeled does; the British spelling survives only where an old name is kept
    for compatibility (renamed arguments and result keys)."""
    british = [f"{module}:{number}" for module in MODULES
               for number, line in enumerate((ROOT / module).read_text(encoding="utf-8").splitlines(), 1)
               if "unlabelled" in line.lower() and "renamed" not in line.lower() and "RenamedKeys" not in line]
    assert british == []


def test_the_old_spellings_of_the_data_readers_still_resolve_with_a_warning():
    import distill.data
    with pytest.warns(DeprecationWarning, match="iter_unlabelled is deprecated, use iter_unlabeled"):
        assert distill.data.iter_unlabelled is distill.data.iter_unlabeled
    with pytest.raises(AttributeError):
        distill.data.no_such_reader
