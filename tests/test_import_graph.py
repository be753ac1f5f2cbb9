"""No import circle in agent_lab, and the runtime never imports the linter.

The graph is read from the source with `ast`: every `import` and `from ... import`, at module level or
inside a function (an import on use is still a dependency), resolved to agent_lab's own modules. A
`from package import name` that names a submodule depends on that submodule; importing a module of
another package also runs that package's `__init__`, so it depends on it too (a module's own enclosing
packages are already being imported, and are not counted). Imports under `if TYPE_CHECKING:` never run
and are left out: they are how a type annotation names a module without depending on it.
"""

from __future__ import annotations

import ast
import unittest
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "agent_lab"

RUNTIME = ("agent_lab.spec", "agent_lab.registry", "agent_lab.steps", "agent_lab.calls", "agent_lab.errors",
           "agent_lab.stores", "agent_lab.execution", "agent_lab.leases", "agent_lab.search", "agent_lab.fingerprint")
"""Modules (and packages) that run a tool call, search a catalog or build a spec: none may reach `lint`."""


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_package(name: str, known: dict[str, Path]) -> bool:
    return known[name].name == "__init__.py"


def _runtime_imports(tree: ast.AST) -> list[ast.stmt]:
    """Every import statement of `tree` except those under `if TYPE_CHECKING:` (never executed)."""
    found: list[ast.stmt] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the agent_lab modules importing it runs."""
    known = modules()
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        base = name.split(".") if _is_package(name, known) else name.split(".")[:-1]
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                origin = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else [])) \
                    if node.level else (node.module or "")
                for alias in node.names:
                    submodule = f"{origin}.{alias.name}"
                    targets.append(submodule if submodule in known else origin)
            for target in targets:
                parts = target.split(".")
                for size in range(1, len(parts) + 1):
                    enclosing = ".".join(parts[:size])
                    if enclosing in known and enclosing != name and not name.startswith(enclosing + "."):
                        graph[name].add(enclosing)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
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
                    work.append((child, iter(sorted(graph[child]))))
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


def a_path(graph: dict[str, set[str]], start: str, members: set[str]) -> list[str]:
    """One circle through `start` inside `members`, as the modules it passes (for the failure message)."""
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for child in sorted(graph[node] & members):
            if child == start:
                return paths[node] + [start]
            if child not in paths:
                paths[child] = paths[node] + [child]
                queue.append(child)
    return [start]


def reaches(graph: dict[str, set[str]], start: str) -> dict[str, str]:
    """Every module `start` imports, directly or not, with the module that imports it first."""
    seen = {start: ""}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for child in sorted(graph[node]):
            if child not in seen:
                seen[child] = node
                queue.append(child)
    return seen


class ImportGraphTest(unittest.TestCase):
    def setUp(self) -> None:
        self.graph = import_graph()

    def test_no_module_imports_itself_through_others(self) -> None:
        found = circles(self.graph)
        shown = [" -> ".join(a_path(self.graph, circle[0], set(circle))) + f"  ({len(circle)} modules)"
                 for circle in found]
        self.assertEqual(shown, [], "import circles:\n" + "\n".join(shown))

    def test_the_runtime_never_imports_the_linter(self) -> None:
        for name in sorted(self.graph):
            if not name.startswith(RUNTIME):
                continue
            seen = reaches(self.graph, name)
            linted = sorted(module for module in seen
                            if module == "agent_lab.lint" or module.startswith("agent_lab.lint."))
            with self.subTest(module=name):
                chain = []
                if linted:
                    step = linted[0]
                    while step:
                        chain.append(step)
                        step = seen[step]
                self.assertEqual(linted, [], " <- ".join(chain))

    def test_the_walk_sees_imports_inside_functions_and_packages_run_their_init(self) -> None:
        # So the tests above can fail: the registry imports `search` on use, and a module of `steps`
        # importing `agent_lab.steps.state` runs nothing outside it, while `registry` runs steps/__init__.
        self.assertIn("agent_lab.search", self.graph["agent_lab.registry"])
        self.assertIn("agent_lab.steps", self.graph["agent_lab.registry"])
        self.assertNotIn("agent_lab.steps", self.graph["agent_lab.steps.admit"])
        self.assertEqual(circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}), [["a", "b", "c"]])


if __name__ == "__main__":
    unittest.main()
