"""Fail on an import cycle through a package's ``__init__``: a module that imports from one of its
own ancestor packages (``from castable.table import iceberg`` inside ``castable/table/``) while
that package's ``__init__`` imports the module, directly or not.

import-linter's graph records ``from castable.table import iceberg`` as an import of the
submodule, so its acyclic contracts do not see that the import runs the package's ``__init__``
first, which is what breaks when the ``__init__`` re-exports a name. Import the submodule
itself instead (``from castable.table.iceberg import ...``, ``import castable.table.iceberg as
iceberg``). Run by `make lint`: ``python tools/package_imports.py src``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import grimp

Reaches = Callable[[str, str], bool]


def module_name(path: Path, root: Path) -> str:
    """The dotted name of the module at ``path`` under the source root ``root``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def violations(path: Path, root: Path, reaches: Reaches) -> Iterator[str]:
    """``path:line: what`` for each import, by the module at ``path``, of an ancestor package
    whose ``__init__`` imports the module back (``reaches(package, module)``)."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    ancestors = {".".join(package.split(".")[:i]) for i in range(1, package.count(".") + 2)} - {"", name}
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in ancestors:
            imported = [node.module]
        elif isinstance(node, ast.Import):
            imported = [a.name for a in node.names if a.name in ancestors and a.asname is None]
        else:
            continue
        for ancestor in imported:
            if reaches(ancestor, name):
                yield (
                    f"{path}:{node.lineno}: imports from {ancestor}, whose __init__ imports {name}: "
                    "a cycle through the package; import the submodule itself"
                )


def _reaches(graph: grimp.ImportGraph, package: str, module: str) -> bool:
    return bool(graph.chain_exists(importer=package, imported=module))


def main(roots: list[str]) -> int:
    found: list[str] = []
    for root in map(Path, roots):
        for top in sorted(p.parent.name for p in root.glob("*/__init__.py")):
            reaches = partial(_reaches, grimp.build_graph(top, cache_dir=None))
            for path in sorted((root / top).rglob("*.py")):
                found += violations(path, root, reaches)
    done = "no import cycle runs through a package's __init__"
    print("\n".join(found) or done, file=sys.stderr if found else sys.stdout)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
