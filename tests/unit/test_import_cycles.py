"""No import cycles among the modules of certd, sandboxes and forkgate.

An import cycle, even one hidden behind a lazy or a ``TYPE_CHECKING`` import, means two modules
are one unit split in two: neither can be read, tested or moved alone. The graph is grimp's (the
one import-linter checks the contracts on), which counts lazy and type-only imports too.
"""

from __future__ import annotations

from collections.abc import Iterator

import grimp

PACKAGES = ("certd", "sandboxes", "forkgate")


def _imported(graph: grimp.ImportGraph, module: str) -> Iterator[str]:
    return iter(sorted(graph.find_modules_directly_imported_by(module)))


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, _imported(graph, root))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return found


def test_the_finder_sees_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for name in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(name)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.x")
    graph.add_import(importer="a.y", imported="a.z")
    assert _cycles(graph) == [["a.x", "a.y"]]


def test_no_module_imports_itself_through_others() -> None:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    assert _cycles(graph) == []
