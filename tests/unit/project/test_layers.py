"""The code's layers hold, and `make lint` refuses code that breaks them (issue: import cycles,
layer violations and private-name imports cannot come back)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from helpers import ROOT

from tools.private_imports import main as check_private_imports
from tools.private_imports import violations

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(src: Path) -> subprocess.CompletedProcess[str]:
    """import-linter over the package under ``src``, with the contracts in pyproject.toml."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_tree_keeps_its_layers_and_imports_no_private_names() -> None:
    result = lint_imports(ROOT / "src")
    assert result.returncode == 0, result.stdout
    assert check_private_imports([str(ROOT / d) for d in ("src", "lambdas", "infra", "jobs", "tests", "bench")]) == 0


def test_a_layer_violation_and_an_import_cycle_fail_the_lint(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "src" / "castable", tmp_path / "castable")
    table = tmp_path / "castable" / "table" / "__init__.py"
    table.write_text(table.read_text() + "\nfrom castable.database import Database  # noqa: E402\n")
    result = lint_imports(tmp_path)
    assert result.returncode == 1
    assert "castable.table is not allowed to import castable.database" in result.stdout
    assert "No cycles are allowed in castable." in result.stdout


def test_an_import_of_a_private_name_or_module_fails_the_lint(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from castable.commit.protocol import _discard\nimport lambdas._hidden\n"
        "from castable import __version__, commit\n"
    )
    assert [v.split(": ", 1)[1] for v in violations(module)] == [
        "imports private name _discard from castable.commit.protocol",
        "imports private module lambdas._hidden",
    ]
    assert check_private_imports([str(tmp_path)]) == 1


def test_a_cycle_through_a_package_init_fails_the_lint(tmp_path: Path) -> None:
    """``from castable.table import iceberg`` inside table/maintenance.py (which the package's
    ``__init__`` imports) runs through the ``__init__``: import-linter sees the submodule only."""
    shutil.copytree(ROOT / "src" / "castable", tmp_path / "castable")
    maintenance = tmp_path / "castable" / "table" / "maintenance.py"
    maintenance.write_text(maintenance.read_text() + "\nfrom castable.table import iceberg  # noqa: E402\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    script = ROOT / "tools" / "package_imports.py"
    result = subprocess.run([sys.executable, str(script), str(tmp_path)], env=env, capture_output=True, text=True)
    assert result.returncode == 1
    assert "imports from castable.table, whose __init__ imports castable.table.maintenance" in result.stderr
    clean = subprocess.run([sys.executable, str(script), str(ROOT / "src")], capture_output=True, text=True)
    assert clean.returncode == 0, clean.stderr
