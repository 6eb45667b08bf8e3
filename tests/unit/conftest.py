"""The unit tier: no server, no JVM, no side venv, no browser (``make check`` runs it with the dev
venv alone). The S3 servers' fixtures live in the integration tier, so a unit test cannot ask for
one; a unit test that starts a JVM, Node, Chromium or a side venv's Python fails here, which keeps
a test that needs them from creeping into the tier."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import ROOT

FORBIDDEN = ("java", "node", "npm", "npx", "chromium", "spark-submit")
SIDE_VENVS = tuple(str(ROOT / name) for name in (".venv-spark35", ".venv-localstack", ".venv-duckdb15", ".tools"))


def _refused(program: str) -> str | None:
    """Why the unit tier may not start ``program``, or None."""
    if os.path.basename(program) in FORBIDDEN:
        return f"{os.path.basename(program)} belongs to the integration tier"
    if os.path.abspath(program).startswith(SIDE_VENVS):
        return f"{program} (a side venv or tool) belongs to the integration tier"
    return None


@pytest.fixture(autouse=True)
def _unit_tier_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real = subprocess.Popen.__init__

    def checked(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        program = args if isinstance(args, (str, os.PathLike)) else args[0]
        reason = _refused(os.fspath(program).split()[0] if kwargs.get("shell") else os.fspath(program))
        if reason is not None:
            pytest.fail(f"a unit test started {program}: {reason} (move the test to tests/integration/)")
        real(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", checked)
    yield
