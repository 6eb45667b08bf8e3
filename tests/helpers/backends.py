"""The ``table_uri`` and ``store`` fixtures over a choice of backends, for each tier's conftest.

The unit tier runs them on the local store only; the integration tier on the local store and on
moto S3 over HTTP (``tests/integration/on_s3`` reruns the unit tier's backend tests on S3 alone).
The S3 variants need the integration tier's ``s3_bucket`` and ``s3_options`` fixtures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from castable.store import LocalStore, ObjectStore, S3Store, make_s3_client


def backend_fixtures(*backends: str) -> tuple[Any, Any]:
    """``(table_uri, store)`` fixtures parametrised over ``backends`` ("local", "s3")."""

    @pytest.fixture(params=backends)
    def table_uri(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, str] | None]:
        """A fresh table location on each backend, with the storage options it needs."""
        if request.param == "local":
            return str(tmp_path / "table"), None
        bucket = request.getfixturevalue("s3_bucket")
        return f"s3://{bucket}/tables/t1", request.getfixturevalue("s3_options")

    @pytest.fixture(params=backends)
    def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
        """A fresh object store on each backend."""
        if request.param == "local":
            return LocalStore(tmp_path / "store")
        bucket = request.getfixturevalue("s3_bucket")
        return S3Store(bucket, "root/prefix", make_s3_client(request.getfixturevalue("s3_options")))

    return table_uri, store
