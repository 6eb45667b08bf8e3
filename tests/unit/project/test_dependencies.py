"""Every module the library imports is declared: by its dependencies where any user may reach it,
by the extra that brings it where only that extra's code does. A user of ``castable[spark]`` who
met ``No module named 'pandas'`` in the data source's write path is the bug this prevents; the
fresh venvs of tests/integration/project/test_packaging.py show the same at run time."""

from __future__ import annotations

import ast
import sys
import tomllib
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

from helpers import ROOT
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PACKAGE = ROOT / "src" / "castable"
EXTRA_OF_PACKAGE = {"spark": "spark", "catalog": "catalog", "iceberg": "iceberg"}
"""The library's packages that only an extra's users import, and that extra."""
LIBRARY_EXTRAS = ("pandas", "polars", "duckdb", "iceberg", "catalog", "spark")
"""The extras that add to what the library itself can do (the others serve the checkout's
``lambdas/``, ``infra/``, ``jobs/`` and ``bench/``)."""


def declared() -> tuple[set[str], dict[str, set[str]]]:
    """The distributions castable depends on, and those each extra adds."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(requirements: list[str]) -> set[str]:
        return {canonicalize_name(Requirement(r).name) for r in requirements}

    extras = {extra: names(reqs) for extra, reqs in project["optional-dependencies"].items()}
    return names(project["dependencies"]), extras


def imports(path: Path, module_level: bool = False) -> set[str]:
    """The top-level names of the modules ``path`` imports (only at module level, if asked),
    outside ``if TYPE_CHECKING:`` (annotations only) and its own package."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        nested = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        if not (module_level and nested):
            for inner in ast.iter_child_nodes(node):
                visit(inner)

    visit(ast.parse(path.read_text()))
    return {name for name in found if name != "castable" and name not in sys.stdlib_module_names}


@cache
def distributions(module: str) -> set[str]:
    """The distributions that provide the top-level module ``module`` in this venv."""
    provided = _provided().get(module)
    assert provided, f"no installed distribution provides {module!r}"
    return {canonicalize_name(name) for name in provided}


@cache
def _provided() -> dict[str, list[str]]:
    return dict(packages_distributions())


def test_every_import_of_the_library_is_declared_where_its_users_get_it() -> None:
    base, extras = declared()
    optional = set().union(*(extras[extra] for extra in LIBRARY_EXTRAS))
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        package = path.relative_to(PACKAGE).parts[0]
        gate = EXTRA_OF_PACKAGE.get(package)
        allowed = base | extras[gate] if gate else base | optional
        for module in sorted(imports(path)):
            if not distributions(module) & allowed:
                where = f"the {gate!r} extra" if gate else "the dependencies or a library extra"
                missing.append(f"{path.relative_to(ROOT)} imports {module}, which {where} does not declare")
    assert not missing, "\n".join(missing)


def test_import_castable_needs_no_extra() -> None:
    """Outside the packages an extra gates, a module-level import is of a dependency: ``import
    castable`` works on a bare install (an extra's module is imported by the function that needs it)."""
    base, _ = declared()
    eager = [
        f"{path.relative_to(ROOT)} imports {module} at module level"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] not in EXTRA_OF_PACKAGE
        for module in sorted(imports(path, module_level=True))
        if not distributions(module) & base
    ]
    assert not eager, "\n".join(eager)


def test_the_extras_the_library_names_exist() -> None:
    _, extras = declared()
    assert set(LIBRARY_EXTRAS) | set(EXTRA_OF_PACKAGE.values()) <= set(extras)
