"""The EVENTS table the tests write, and helpers to build, reread and compare its tables."""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from castable.store import ObjectStore
from castable.tables import load_table

EVENTS = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("category", pa.string()),
        pa.field("value", pa.float64()),
    ]
)


FILES_ONLY = {"write.inline.max-bytes": "0"}
"""Properties of a table every write of which is a Parquet file (none kept inline): for tests
of what becomes of data files (corrupt, missing, orphaned, read by range)."""


def events(start: int, stop: int) -> pa.Table:
    """Deterministic rows with ids in [start, stop)."""
    ids = list(range(start, stop))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "category": [("a", "b", "c", None)[i % 4] for i in ids],
            "value": [i * 0.5 for i in ids],
        },
        schema=EVENTS,
    )


def parquet_bytes(table: pa.Table) -> bytes:
    """``table`` as a Parquet file, as another engine would land or write it."""
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def keyed_events(
    table_uri: tuple[str, dict[str, str] | None], rows: int, properties: dict[str, str] | None = None
) -> Any:
    """A new EVENTS table keyed by ``id`` at ``table_uri``, holding ``events(0, rows)``."""
    import castable

    uri, options = table_uri
    t = castable.create_table(uri, EVENTS, primary_key="id", storage_options=options, properties=properties)
    t.append(events(0, rows))
    return t


def other(t: Any) -> Any:
    """A second handle on ``t``'s table (another writer), opened now."""
    return load_table(t.store)


def live(t: Any, where: str | None = None) -> dict[int, tuple[str | None, float | None]]:
    """The newest version's rows of an EVENTS table by key (asserting one live row per key)."""
    got = t.refresh().scan(filter=where).to_arrow().to_pylist()
    keys = [r["id"] for r in got]
    assert len(keys) == len(set(keys)), "one live row per key"
    return {r["id"]: (r["category"], r["value"]) for r in got}


def snapshot_of(store: ObjectStore) -> dict[str, bytes]:
    """Every object under a store and its bytes: to show an operation changed nothing."""
    return {info.key: store.get(info.key).data for info in store.list("")}
