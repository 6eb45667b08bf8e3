"""The Lambda bundle as the runtime meets it: built by infra/bundle.py, and handlers invoked
under python3.12 with nothing but the bundle and the standard library on ``sys.path``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import ROOT

PYTHON312 = Path(os.environ.get("CASTABLE_PYTHON312", Path.home() / ".pyenv/versions/3.12.1/bin/python3.12"))


def build_bundle(target: Path, architecture: str = "x86_64") -> Path:
    """The bundle for ``architecture``, installed into ``target`` as the CDK app builds it."""
    subprocess.run(  # as the zip asset's local bundling and the container image's build run it
        [sys.executable, str(ROOT / "infra" / "bundle.py"), str(target), architecture],
        cwd=ROOT,
        check=True,
        capture_output=True,
        env={**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"},
    )
    return target


def invoke(bundle: Path, calls: list[dict[str, Any]], env: dict[str, str]) -> dict[str, Any]:
    """Run ``calls`` ({"handler", "event"}) in one python3.12 process of the bundle alone, with
    ``env`` as its whole environment (beside PATH and HOME); the runner's JSON answer."""
    if not PYTHON312.exists():
        pytest.fail(f"python3.12 (the Lambda runtime's) is not at {PYTHON312}; set CASTABLE_PYTHON312")
    run = subprocess.run(
        [str(PYTHON312), "-I", "-S", str(ROOT / "tests" / "helpers" / "bundle_runner.py"), str(bundle)],
        input=json.dumps(calls),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=bundle,
        env={"PATH": "/usr/bin:/bin", "HOME": str(bundle), "POWERTOOLS_TRACE_DISABLED": "true", **env},
    )
    assert run.returncode == 0, run.stderr[-4000:]
    return dict(json.loads(run.stdout.splitlines()[-1]))
