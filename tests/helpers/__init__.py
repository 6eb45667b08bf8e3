"""Helpers the tests share that are not fixtures (those are in conftest.py); ROOT is the repository."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HELPERS = ROOT / "tests" / "helpers"
