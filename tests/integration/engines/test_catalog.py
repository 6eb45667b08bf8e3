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


def test_twenty_clients_append_at_once_and_each_acknowledged_row_lands_once(served: Served) -> None:
    """20 pyiceberg clients, with their defaults, append one row each to one table at the same
    moment through the served catalog: every append answered 200 is in the table exactly once,
    every one refused (409, the table moved under it) is not there at all, and at least one lands."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from pyiceberg.exceptions import CommitFailedException

    cat = served.client()
    cat.create_namespace("db")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    cat.create_table("db.t", schema=schema)
    tables = [served.client().load_table("db.t") for _ in range(20)]
    go = threading.Barrier(20)

    def append(i: int) -> bool:
        go.wait()
        try:
            tables[i].append(pa.table({"id": pa.array([i], pa.int64())}, schema=schema))
        except CommitFailedException:
            return False
        return True

    with ThreadPoolExecutor(20) as pool:
        landed = dict(zip(range(20), pool.map(append, range(20)), strict=True))
    ids = served.castable("db", "t").to_arrow()["id"].to_pylist()
    assert sorted(ids) == sorted(i for i, ok in landed.items() if ok) and any(landed.values()), landed


def test_one_commit_sent_eight_times_at_once_lands_once(served: Served) -> None:
    """A client whose answers are lost sends its commit again and again, here 8 copies at the
    same moment: one lands, the others are answered as its repeats or as conflicts, and the rows
    are in the table once."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from helpers.rest_catalog import held_commit

    cat = served.client()
    cat.create_namespace("db")
    table = cat.create_table("db.t", schema=pa.schema([pa.field("id", pa.int64(), nullable=False)]))
    commit = held_commit(
        table, lambda t: t.append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}, schema=t.schema().as_arrow()))
    )
    go = threading.Barrier(8)

    def send(_: int) -> int:
        go.wait()
        return served.raw("POST", "/v1/namespaces/db/tables/t", commit)[0]

    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(send, range(8)))
    assert set(statuses) <= {200, 409} and 200 in statuses, statuses
    ct = served.castable("db", "t")
    assert sorted(ct.to_arrow()["id"].to_pylist()) == [1, 2, 3] and ct.version == 1
