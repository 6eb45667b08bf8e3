"""The Iceberg REST catalog (``castable.catalog``) driven by a real client, pyiceberg's
``RestCatalog``, over HTTP: every write it makes is a castable commit that castable reads back,
every refused request leaves the table as it was, and conflicts answer 409.

The tests here need a server, a JVM, a side venv or minutes; the rest are the unit tier's
(tests/unit/catalog/test_catalog.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from helpers import HELPERS, ROOT
from helpers.docs import Section
from helpers.rest_catalog import Served
from unit.catalog.test_catalog import ROWS, iceberg_rows, rows

import castable

DUCKDB = ROOT / ".venv-duckdb15" / "bin" / "python"


def duckdb_sql(uri: str, *statements: str, credential: str | None = None) -> list[Any]:
    """Each statement's rows (or ``{"error": ...}``), run by DuckDB 1.5.5 attached to the catalog
    (with ``credential``, ``id:secret``, by OAuth2 client credentials)."""
    script = HELPERS / "duckdb_catalog.py"
    env = {**os.environ, "CASTABLE_CATALOG_CREDENTIAL": credential or ""}
    command = [str(DUCKDB), str(script), uri, *statements]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_duckdb_reads_and_writes_through_the_catalog(served: Served) -> None:
    """DuckDB's iceberg extension, attached with its defaults: a staged CREATE TABLE, INSERT,
    merge-on-read DELETE and UPDATE (position delete files), time travel by castable's
    versions; castable reads what DuckDB wrote, and a DROP without purge is refused. A
    transaction over two tables of a database namespace is one database version; over two
    tables of a plain namespace it is refused whole."""
    cat = served.client()
    cat.create_namespace("db")
    cat.create_namespace("shop", {"castable.database": "true"})
    for name in ("shop.a", "shop.b", "db.v"):
        cat.create_table(name, schema=pa.schema([("k", pa.int64())]))
    cat.create_table("db.t", schema=pa.schema([pa.field("id", pa.int64(), nullable=False), ("s", pa.string())]))
    cat.load_table("db.t").append(
        ROWS.cast(pa.schema([pa.field("id", pa.int64(), nullable=False), ("s", pa.string())]))
    )
    results = duckdb_sql(
        served.uri,
        "SELECT id, s FROM c.db.t ORDER BY id",
        "INSERT INTO c.db.t VALUES (4, 'd'), (5, 'e')",
        "DELETE FROM c.db.t WHERE id = 1",
        "UPDATE c.db.t SET s = 'B' WHERE id = 2",
        "SELECT id, s FROM c.db.t ORDER BY id",
        "SELECT id FROM c.db.t AT (VERSION => 1) ORDER BY id",
        "CREATE TABLE c.db.u (k BIGINT, v VARCHAR)",
        "INSERT INTO c.db.u VALUES (1, 'x')",
        "DROP TABLE c.db.u",
        "BEGIN",
        "INSERT INTO c.shop.a VALUES (1), (2)",
        "INSERT INTO c.shop.b VALUES (3)",
        "COMMIT",
        "BEGIN",
        "INSERT INTO c.db.t VALUES (9, 'z')",
        "INSERT INTO c.db.v VALUES (4)",
        "COMMIT",
    )
    assert results[0] == {"rows": [[1, "a"], [2, "b"], [3, "c"]]}
    assert all("error" not in r for r in results[1:8]), results
    assert results[4] == {"rows": [[2, "B"], [3, "c"], [4, "d"], [5, "e"]]}
    assert results[5] == {"rows": [[1], [2], [3]]}
    assert "error" not in results[8], results[8]  # a DROP without purge keeps the files

    ct = served.castable("db", "t")
    assert rows(ct) == [(2, "B"), (3, "c"), (4, "d"), (5, "e")] == iceberg_rows(cat.load_table("db.t"))
    assert [h.operation for h in ct.history()][:3] == ["overwrite", "delete", "append"]
    assert ct.history()[0].summary["tombstone"]  # merge-on-read: the old row got a tombstone
    changes = ct.changes(4).to_arrow()
    assert sorted(zip(changes["id"].to_pylist(), changes["_change_type"].to_pylist(), strict=True)) == [
        (2, "delete"),
        (2, "insert"),
    ]
    with pytest.raises(castable.TableDroppedError):
        served.castable("db", "u")
    cat.register_table("db.u", f"file://{served.warehouse}/db/u/metadata/v1.metadata.json")
    assert rows(served.castable("db", "u")) == [(1, "x")]

    assert all("error" not in r for r in results[9:16]), results
    assert "castable.database" in results[16]["error"]
    shop = castable.open_database(f"{served.warehouse}/shop")
    assert shop.version == 3 and shop.history()[0].operation == "transaction"
    assert rows(shop.table("a")) == [(1,), (2,)] and rows(shop.table("b")) == [(3,)]
    assert served.castable("db", "v").version == 0


def test_duckdb_names_namespaces_tables_and_columns_as_data_has_them(served: Served) -> None:
    """DuckDB creates a namespace and a table named with a dot, a blank and a leading `_`, with
    such columns, writes and reads them through the catalog; castable reads what it wrote (its
    files' columns found by field id) and finds the table in the documented folder."""
    results = duckdb_sql(
        served.uri,
        'CREATE SCHEMA c."_raw data"',
        'CREATE TABLE c."_raw data"."events.v2" (id BIGINT, "a.b" VARCHAR, "my col" DOUBLE)',
        """INSERT INTO c."_raw data"."events.v2" VALUES (1, 'x', 0.5), (2, 'y', 2.5)""",
        'SELECT id, "a.b" FROM c."_raw data"."events.v2" WHERE "my col" > 1',
    )
    assert all("error" not in r for r in results), results
    assert results[-1] == {"rows": [[2, "y"]]}
    table = served.castable("=5Fraw=20data", "events=2Ev2")
    assert table.scan(filter="`my col` < 1").to_arrow().to_pylist() == [{"id": 1, "a.b": "x", "my col": 0.5}]


DUCKDB_SECTION = Section("docs/catalog.md", "### DuckDB", "python")
"""The docs' DuckDB example: run here by DuckDB 1.5.5's side venv against a served catalog."""
DUCKDB_INSTALL = Section("docs/catalog.md", "### DuckDB", "text")


def test_the_docs_duckdb_example_runs_with_the_wheels_it_names(served: Served, tmp_path: Path) -> None:
    """The page's install line names the wheels the side venv is built from (the Makefile's
    pins), and its script, run there, writes through the catalog a table castable reads."""
    pins = re.findall(r'"(duckdb(?:-extension-\w+)?==[\d.]+)"', DUCKDB_INSTALL.block().code)
    made = re.findall(r'"(duckdb(?:-extension-\w+)?==[\d.]+)"', (ROOT / "Makefile").read_text())
    assert pins and set(pins) <= set(made), (pins, made)
    script = tmp_path / "duckdb_example.py"
    script.write_text(DUCKDB_SECTION.block().code)
    env = {**os.environ, "CASTABLE_CATALOG_URI": served.uri}
    done = subprocess.run([str(DUCKDB), str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[(12.5,)]"]
    orders = served.castable("shop", "orders")
    assert sorted(orders.scan().to_arrow().column("amount").to_pylist()) == [3.0, 9.5]


def test_duckdb_authenticates_with_client_credentials(tmp_path: Path) -> None:
    """A catalog served with principals: DuckDB configured as its docs say (an iceberg secret
    with CLIENT_ID, CLIENT_SECRET and OAUTH2_SERVER_URI) writes with a write principal's
    credentials; a read principal's INSERT is refused (403) and changes nothing; wrong
    credentials do not attach."""
    from unit.catalog.test_access import ACCESS, READER, WRITER

    from castable.catalog import Access

    (tmp_path / "access.toml").write_text(ACCESS)
    (tmp_path / "wh").mkdir()
    served = Served(str(tmp_path / "wh"), access=Access.from_file(tmp_path / "access.toml"))
    try:
        served.client(token=WRITER).create_namespace("db")
        wrote = duckdb_sql(
            served.uri,
            "CREATE TABLE c.db.t (id BIGINT)",
            "INSERT INTO c.db.t VALUES (1), (2)",
            "SELECT count(*) FROM c.db.t",
            credential=f"etl:{WRITER}",
        )
        assert wrote[2] == {"rows": [[2]]}, wrote
        read = duckdb_sql(
            served.uri, "SELECT count(*) FROM c.db.t", "INSERT INTO c.db.t VALUES (3)", credential=f"analyst:{READER}"
        )
        assert read[0] == {"rows": [[2]]} and "403" in read[1]["error"], read
        assert served.castable("db", "t").count() == 2
        script = HELPERS / "duckdb_catalog.py"
        env = {**os.environ, "CASTABLE_CATALOG_CREDENTIAL": f"etl:{READER}"}
        refused = subprocess.run([str(DUCKDB), str(script), served.uri], capture_output=True, text=True, env=env)
        assert refused.returncode != 0 and "invalid_client" in refused.stderr + refused.stdout, refused.stderr
    finally:
        served.close()
