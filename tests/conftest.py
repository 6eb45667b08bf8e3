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
from typing import TYPE_CHECKING

import pytest
from helpers.backends import backend_fixtures

if TYPE_CHECKING:  # pyiceberg and the catalog load only for the tests that serve one
    from helpers.rest_catalog import Served

table_uri, store = backend_fixtures("local")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """castable's Iceberg REST catalog on 127.0.0.1 over a fresh warehouse folder."""
    from helpers.rest_catalog import Served

    (tmp_path / "wh").mkdir()
    s = Served(str(tmp_path / "wh"))
    yield s
    s.close()


GROUPS_FIRST = ("spark", "bundle", "localstack", "docs_site")
"""The xdist groups, longest first. ``--dist loadgroup`` gives each group to one worker whole, in
the order the tests are collected: started first, the longest (one Spark session's tests, the
Lambda bundle's) run beside everything else instead of being the run's tail."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        mark = item.get_closest_marker("xdist_group")
        group = None if mark is None else (mark.args[0] if mark.args else mark.kwargs.get("name"))
        return GROUPS_FIRST.index(group) if group in GROUPS_FIRST else len(GROUPS_FIRST)

    items.sort(key=rank)
