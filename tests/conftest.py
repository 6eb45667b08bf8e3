"""Fixtures both tiers share: AWS credentials that reach no account; a fresh table location and
object store on the local backend (tests/integration/conftest.py adds moto S3 over HTTP); and the
Iceberg REST catalog served over a fresh warehouse folder."""

from __future__ import annotations

import os

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.pop("AWS_PROFILE", None)

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.backends import backend_fixtures
from helpers.rest_catalog import Served

table_uri, store = backend_fixtures("local")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """castable's Iceberg REST catalog on 127.0.0.1 over a fresh warehouse folder."""
    (tmp_path / "wh").mkdir()
    s = Served(str(tmp_path / "wh"))
    yield s
    s.close()
