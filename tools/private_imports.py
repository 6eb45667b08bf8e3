"""Fail when a module imports another module's private (underscore) names or private modules.

ruff's PLC2701 checks this only across top-level packages; this checks it inside castable too,
so that layers keep to each other's public names. Run by `make lint`:
``python tools/private_imports.py src lambdas infra jobs tests bench``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path


def private(name: str) -> bool:
    """A private name: one leading underscore, not a dunder such as ``__version__``."""
    return name.startswith("_") and not name.startswith("__")


def violations(path: Path) -> Iterator[str]:
    """``path:line: what`` for each import of another module's private name or private module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            modules = node.module.split(".")
            if any(private(part) for part in modules):
                yield f"{path}:{node.lineno}: imports from private module {node.module}"
            for alias in node.names:
                if private(alias.name):
                    yield f"{path}:{node.lineno}: imports private name {alias.name} from {node.module}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if any(private(part) for part in alias.name.split(".")):
                    yield f"{path}:{node.lineno}: imports private module {alias.name}"


def main(roots: list[str]) -> int:
    found = [v for root in roots for path in sorted(Path(root).rglob("*.py")) for v in violations(path)]
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
