"""The unit tier's backend tests, rerun on moto S3 over HTTP, for the unit modules whose subject
the store is: objects of every kind written and read (tables, databases, segments, file lists,
Iceberg metadata), conditional writes and turns, multipart uploads, ranged reads, erasure's
server-side copies, registered files' checks, maintenance's deletes. Modules that only compose
those (schema evolution, merge, replace, update, inline rows, restore) run on the local store
alone.

Each module here star-imports one unit module; its tests that take ``table_uri`` or ``store`` run
again with those fixtures on S3 (the unit tier ran them on the local store), and the others,
which the unit tier already ran, are deselected here."""

from __future__ import annotations

import pytest
from helpers.backends import backend_fixtures

table_uri, store = backend_fixtures("s3")

BACKEND_FIXTURES = {"table_uri", "store"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = [i for i in items if i.path.parent.name == "on_s3"]
    rest = [i for i in here if not BACKEND_FIXTURES & set(getattr(i, "fixturenames", ()))]
    if rest:
        config.hook.pytest_deselected(items=rest)
        gone = {id(i) for i in rest}
        items[:] = [i for i in items if id(i) not in gone]
