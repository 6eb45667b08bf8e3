"""A castable table of nested columns (struct in struct, list, map, list of structs) with a short
history that every write touches (append, delete, upsert, a nested column added, fields inside
a struct renamed, added, dropped and widened, compaction), published as Iceberg after each
commit, and the rows each version holds."""

from __future__ import annotations

import pyarrow as pa

import castable
from castable.format.evolution import bare_field
from castable.iceberg import publish

USER = pa.struct([("id", pa.int64()), ("name", pa.string())])
PAYLOAD = pa.struct([("user", USER), ("tags", pa.list_(pa.string())), ("at", pa.timestamp("ms", tz="Europe/Paris"))])
SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), ("payload", PAYLOAD), ("attrs", pa.map_(pa.string(), pa.int64()))]
)
EXTRA = pa.list_(pa.struct([("q", pa.int32()), ("r", pa.list_(pa.float64()))]))
"""The column the history adds. Its rows are never a NULL list, but the rows written before it
are NULL in it once compaction rewrites them: pyiceberg (0.11) reads a NULL list of structs as
an empty list (apache/iceberg-python#3833, open), see :func:`null_lists_empty`."""


def rows(ids: list[int], extra: bool = False) -> pa.Table:
    """Rows with ``ids``: every nested level set, some NULL structs and empty lists and maps."""
    columns: dict[str, pa.Array] = {
        "id": pa.array(ids, pa.int64()),
        "payload": pa.array(
            [
                None
                if i % 5 == 4
                else {
                    "user": None if i % 3 == 2 else {"id": i * 10, "name": f"u{i}"},
                    "tags": [f"t{j}" for j in range(i % 3)],
                    "at": None if i % 2 else 1_767_225_600_000 + i,
                }
                for i in ids
            ],
            PAYLOAD,
        ),
        "attrs": pa.array(
            [[(f"k{j}", i + j) for j in range(i % 4)] if i % 6 != 5 else None for i in ids], SCHEMA[2].type
        ),
    }
    if extra:
        columns["extra"] = pa.array([[{"q": i, "r": [i / 2] * (i % 2)}] * (i % 3) for i in ids], EXTRA)
    return pa.table(columns)


def null_lists_empty(rows: pa.Table) -> pa.Table:
    """``rows`` with each NULL list of ``extra`` empty: what pyiceberg's reads are compared as
    (a NULL it reads from a file is empty, one it fills in for a file without the column NULL)."""
    if "extra" not in rows.column_names:
        return rows
    lists = [[] if v is None else v for v in rows.column("extra").to_pylist()]
    return rows.set_column(rows.column_names.index("extra"), "extra", pa.array(lists, rows.schema.field("extra").type))


def evolved(table: castable.Table, ids: list[int]) -> pa.Table:
    """Rows with ``ids`` in the table's schema after :func:`nested_history`'s changes inside
    ``payload`` (``user`` renamed ``person``, with an ``age``; ``tags`` dropped)."""
    out = []
    for row in rows(ids, extra=True).to_pylist():
        payload = row["payload"]
        if payload is not None:
            person = payload.pop("user")
            payload.pop("tags")
            payload["person"] = None if person is None else {**person, "age": row["id"] % 90}
        out.append(row)
    return pa.Table.from_pylist(out, schema=pa.schema([bare_field(f) for f in table.schema]))


def _evolve(table: castable.Table) -> None:
    with table.alter() as change:
        change.rename_column(("payload", "user"), "person").add_column(("payload", "person", "age"), pa.int32())
        change.drop_column(("payload", "tags"))


def nested_history(uri: str) -> castable.Table:
    """The table at ``uri`` after its history, each version published."""
    table = castable.create_table(uri, SCHEMA, primary_key="id", properties={"write.inline.max-bytes": 1024})
    steps = [
        lambda t: t.append(rows(list(range(0, 30)))),
        lambda t: t.append(rows(list(range(30, 33)))),  # inline rows
        lambda t: t.delete("id IN (3, 31)"),
        lambda t: t.upsert(rows([4, 40])),
        lambda t: t.alter().add_column("extra", EXTRA).commit(),
        lambda t: t.append(rows(list(range(50, 60)), extra=True)),
        _evolve,
        lambda t: t.append(evolved(t, list(range(60, 70)))),
        lambda t: t.alter().widen_column(("payload", "person", "age"), pa.int64()).commit(),
        lambda t: t.upsert(evolved(t, [5, 61, 80])),
        lambda t: t.compact(min_file_size=1 << 30),
    ]
    for step in steps:
        step(table)
        publish(table)
    return table
