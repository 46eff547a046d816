"""harness/ and bench/ are the packages the tests, benchmarks and scripts
import (pyproject.toml): each of their modules imports, they import each
other in no cycle, and no file but scripts/_bootstrap.py changes sys.path
(docs/development.md, "Python packages")."""
import ast
import importlib
import re
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[2]
PACKAGES = ("harness", "bench")
# Draw with matplotlib, which only Debian's python3 has (scripts/deps.sh).
PLOTS = re.compile(r"bench\.(plot_\w+|plotting)$")


def modules():
    return sorted(f"{package}.{path.stem}" for package in PACKAGES
                  for path in (TOP / package).glob("*.py") if path.stem != "__init__")


def imports(module):
    """The modules of PACKAGES that MODULE's source imports."""
    path = TOP / (module.replace(".", "/") + ".py")
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found & set(modules())


@pytest.mark.parametrize("module", [m for m in modules() if not PLOTS.match(m)])
def test_every_module_imports(module):
    importlib.import_module(module)


def test_no_import_cycle():
    graph = {module: imports(module) for module in modules()}
    done, path = set(), []

    def visit(module):
        if module in path:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(module):]
                                                                 + [module]))
        if module not in done:
            path.append(module)
            for other in sorted(graph[module]):
                visit(other)
            path.pop()
            done.add(module)

    for module in graph:
        visit(module)


def test_only_the_bootstrap_changes_sys_path():
    changes = re.compile(r"\bsys\.path\s*(\.\s*(insert|append|extend)|\[|\+?=)")
    found = [str(path.relative_to(TOP)) for path in TOP.rglob("*.py")
             if path.relative_to(TOP).parts[0] not in ("userspace", ".git", "runs")
             and changes.search(path.read_text(errors="replace"))]
    assert found == ["scripts/_bootstrap.py"]
