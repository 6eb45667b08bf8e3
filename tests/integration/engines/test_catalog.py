"""The Iceberg REST catalog (``castable.catalog``) driven by a real client, pyiceberg's
``RestCatalog``, over HTTP: every write it makes is a castable commit that castable reads back,
every refused request leaves the table as it was, and conflicts answer 409.

The tests here need a server, a JVM, a side venv or minutes; the rest are the unit tier's
(tests/unit/catalog/test_catalog.py)."""

from __future__ import annotations

import pyarrow as pa
from helpers.rest_catalog import Served
from helpers.s3servers import new_bucket
from pyiceberg.expressions import EqualTo
from unit.catalog.test_catalog import ROWS, iceberg_rows, rows


def test_a_warehouse_on_s3(s3_endpoint: str) -> None:
    options = {"endpoint_url": s3_endpoint, "region": "us-east-1"}
    s = Served(f"s3://{new_bucket(s3_endpoint)}/warehouse", options)
    try:
        cat = s.client()
        cat.create_namespace("db")
        t = cat.create_table("db.t", schema=pa.schema([pa.field("id", pa.int64(), nullable=False), ("s", pa.string())]))
        t.append(ROWS.cast(t.schema().as_arrow()))
        t.delete(EqualTo("id", 1))
        ct = s.castable("db", "t")
        assert rows(ct) == [(2, "b"), (3, "c")] == iceberg_rows(t)
        assert cat.list_namespaces() == [("db",)] and cat.list_tables("db") == [("db", "t")]
    finally:
        s.close()
