"""castable versions published as Iceberg metadata (castable.iceberg): pyiceberg and DuckDB's own
iceberg extension read exactly castable's rows, at the newest version and at every retained
older one, over random histories; a publication that crashes at any write leaves metadata that
readers read correctly or do not see, and the next repairs it; what Iceberg v2 cannot say is
refused with nothing published; a publication writes O(change).

The tests here need a server, a JVM, a side venv or minutes; the rest are the unit tier's
(tests/unit/iceberg/test_iceberg.py)."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest
from helpers import HELPERS, ROOT
from helpers.nested import nested_history
from pyiceberg.table import StaticTable
from unit.iceberg.test_iceberg import SCHEMA, assert_same_rows, fileio_properties, random_rows, read_by_pyiceberg

import castable
from castable.format.layout import ICEBERG_PREFIX
from castable.iceberg import publish
from castable.store.s3 import S3Store

DUCKDB = ROOT / ".venv-duckdb15" / "bin" / "python"
KIND = "_kind of.event"
"""What ``category`` is renamed to: a name as data has them (a leading ``_``, a space, a dot)."""


def _iceberg_rows_or_none(table: castable.Table) -> int:
    """How many rows pyiceberg reads of the latest publication (a table with no snapshot: 0)."""
    location = f"{table.uri}/{ICEBERG_PREFIX}v{table.version}.metadata.json"
    return StaticTable.from_metadata(location, properties=fileio_properties(table)).scan().to_arrow().num_rows


class History:
    """A seeded random history of every kind of write, published after each commit."""

    def __init__(self, table: castable.Table, seed: int) -> None:
        self.table = table
        self.rng = random.Random(seed)
        self.next_id = 0
        self.published: list[int] = []

    def ids(self, n: int) -> list[int]:
        live = self.table.scan(["id"]).to_arrow().column("id").to_pylist()
        return self.rng.sample(live, min(n, len(live)))

    def step(self) -> None:
        rng, t = self.rng, self.table
        names = t.schema.names
        kinds = ["append", "append", "big append", "delete keys", "delete range", "upsert", "update", "merge"]
        choice = rng.choice([*kinds, "erase", "compact", "alter"])
        if choice in ("append", "big append"):
            n = rng.randint(1, 40) if choice == "append" else 3000
            t.append(self.fit(random_rows(list(range(self.next_id, self.next_id + n)), rng, 1 if n < 100 else 40)))
            self.next_id += n
        elif choice == "delete keys" and (doomed := self.ids(rng.randint(1, 6))):
            t.delete(f"id IN ({', '.join(map(str, doomed))})")
        elif choice == "delete range":
            lo = rng.randint(0, max(self.next_id, 1))
            t.delete(f"id BETWEEN {lo} AND {lo + rng.randint(0, 30)}")
        elif choice == "upsert":
            ids = self.ids(rng.randint(1, 5)) + list(range(self.next_id, self.next_id + 3))
            self.next_id += 3
            t.upsert(self.fit(random_rows(ids, rng)))
        elif choice == "update" and "value" in names:
            t.update({"value": "value + 1"}, where=f"id < {rng.randint(0, max(self.next_id, 1))}")
        elif choice == "merge" and "value" in names:
            source = self.fit(random_rows([*self.ids(3), self.next_id], rng))
            self.next_id += 1
            (t.merge(source).when_matched_update(set={"value": "s.value"}).when_not_matched_insert_all().execute())
        elif choice == "erase" and (doomed := self.ids(1)):
            t.erase(f"id = {doomed[0]}")  # spliced files; the old ones stay for the retained versions
        elif choice == "compact":
            t.compact()
        elif choice == "alter":
            self.alter()
        if t.version not in self.published:
            assert publish(t).endswith(f"/{ICEBERG_PREFIX}v{t.version}.metadata.json")
            self.published.append(t.version)

    def fit(self, rows: pa.Table) -> pa.Table:
        """``rows`` as the table's schema now: renamed, dropped and added columns followed."""
        out = {}
        for f in self.table.schema:
            source = {KIND: "category", "amount": "value"}.get(f.name, f.name)
            out[f.name] = (
                rows.column(source).cast(f.type) if source in rows.column_names else pa.nulls(len(rows), f.type)
            )
        return pa.table(out, schema=pa.schema([f.remove_metadata() for f in self.table.schema]))

    def alter(self) -> None:
        t, names = self.table, self.table.schema.names
        if "category" in names:
            t.alter().rename_column("category", KIND).commit()
        elif "note" not in names:
            t.alter().add_column("note", pa.string()).commit()
        elif "value" in names:
            t.alter().rename_column("value", "amount").commit()
        elif "amount" in names:
            t.alter().drop_column("amount").commit()

    def check_newest(self) -> None:
        if not self.table.version:
            assert not _iceberg_rows_or_none(self.table)
            return
        assert_same_rows(
            read_by_pyiceberg(self.table, self.table.version), self.table.scan().to_arrow(), f"v{self.table.version}"
        )

    def check_retained(self, tmp: Path) -> None:
        """Every retained published version, by pyiceberg and by DuckDB, against castable's."""
        retained = [h.version for h in self.table.history()]
        versions = [v for v in self.published if v in retained and v > 0]
        assert versions, "the history retains published versions"
        for v in versions:
            assert_same_rows(read_by_pyiceberg(self.table, v), self.table.scan(version=v).to_arrow(), f"pyiceberg v{v}")
        env = {**os.environ}
        if isinstance(self.table.store, S3Store):
            env["AWS_ENDPOINT_URL"] = str(self.table.store.client.meta.endpoint_url)
        subprocess.run(
            [str(DUCKDB), str(HELPERS / "duckdb_iceberg.py"), self.table.uri, str(tmp)] + [str(v) for v in versions],
            check=True,
            env=env,
            timeout=300,
        )
        for v in versions:
            with pa.OSFile(str(tmp / f"{v}.arrow")) as source:
                got = pa.ipc.open_file(source).read_all()
            assert_same_rows(got, self.table.scan(version=v).to_arrow(), f"DuckDB v{v}")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pyiceberg_and_duckdb_read_exactly_castables_rows_at_every_retained_version(
    table_uri: tuple[str, dict[str, str] | None], seed: int, tmp_path: Path
) -> None:
    uri, options = table_uri
    table = castable.create_table(
        uri,
        SCHEMA,
        primary_key="id",
        partition_by=["bucket(4, id)", "truncate(1000, id)"] if seed == 3 else None,  # DuckDB reads partitioned
        storage_options=options,
        properties={"write.inline.max-bytes": 4096},
    )
    history = History(table, seed)
    for step in range(24):
        history.step()
        history.check_newest()
        if step == 15:
            table.expire(retain_versions=6)
    assert KIND in table.schema.names, "the history renamed a column to a name as data has it"
    history.check_retained(tmp_path)


def test_duckdb_reads_nested_columns_as_castable_at_every_version(tmp_path: Path) -> None:
    """DuckDB's iceberg extension reads each version of a table of nested columns (structs in
    structs, lists, maps, a list of structs added later; helpers/nested.py) by its fields' ids."""
    table = nested_history(str(tmp_path / "t"))
    versions = list(range(1, table.version + 1))
    subprocess.run(
        [str(DUCKDB), str(HELPERS / "duckdb_iceberg.py"), table.uri, str(tmp_path)] + [str(v) for v in versions],
        check=True,
        timeout=300,
    )
    for v in versions:
        with pa.OSFile(str(tmp_path / f"{v}.arrow")) as source:
            got = pa.ipc.open_file(source).read_all()
        assert_same_rows(got, table.scan(version=v).to_arrow(), f"DuckDB v{v}")
