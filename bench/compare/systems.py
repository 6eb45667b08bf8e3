"""The table formats under test (castable, deltalake, pyiceberg, plain pyarrow) and the readers of each."""

from __future__ import annotations

import shutil
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from deltalake import DeltaTable, WriterProperties, write_deltalake
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import And, GreaterThanOrEqual, LessThanOrEqual

import castable
from bench.common.benchlib import SCHEMA
from bench.compare.results import FLOOR, PEER, REFERENCE, SUBJECT
from bench.compare.workloads import DeleteCase, Layout, ReplaceCase, write_parquet
from castable.format.properties import COMPRESSION, TARGET_FILE_SIZE


@dataclass(frozen=True)
class Reader:
    """One way of reading a table after the deletes: a full scan and a filtered, projected scan."""

    name: str
    family: str
    role: str
    full: Callable[[], pa.Table]
    filtered: Callable[[], pa.Table]


class System(ABC):
    """A table format under test: each step prepares untimed and returns the timed operation."""

    name: str
    role: str

    def __init__(self, work: Path, layout: Layout) -> None:
        self.work = work
        self.layout = layout

    @abstractmethod
    def appender(self, root: Path, data: pa.Table) -> Callable[[], object]:
        """Create an empty table at ``root``; return the append of ``data`` to it."""

    @abstractmethod
    def deleter(self, root: Path, case: DeleteCase) -> Callable[[], object]:
        """Open the table at ``root``; return the delete of ``case``."""

    @abstractmethod
    def upserter(self, root: Path, rows: pa.Table) -> Callable[[], object]:
        """Open the table at ``root``; return the upsert of ``rows`` by id (replace or insert)."""

    @abstractmethod
    def replacer(self, root: Path, case: ReplaceCase) -> Callable[[], object]:
        """Open the table at ``root``; return the replace-where of ``case``."""

    @abstractmethod
    def readers(self, root: Path, lo: int, hi: int) -> list[Reader]:
        """The readers of the table at ``root``, already opened; filtered scans read ``lo..hi``."""

    @abstractmethod
    def live_files(self, root: Path) -> set[str]:
        """The data files of the current version of the table at ``root``."""

    def small_appender(self, root: Path, small: pa.Table) -> Callable[[], object]:
        """Create an empty table at ``root``; return one small-append commit, called many times."""
        return self.appender(root, small)

    def drop(self, root: Path) -> None:
        shutil.rmtree(root, ignore_errors=True)


class Castable(System):
    name, role = "castable", SUBJECT

    def _create(self, root: Path) -> castable.Table:
        props = {COMPRESSION: self.layout.codec, TARGET_FILE_SIZE: self.layout.file_bytes}
        return castable.create_table(str(root), SCHEMA, primary_key="id", properties=props)

    def appender(self, root: Path, data: pa.Table) -> Callable[[], object]:
        table = self._create(root)
        return lambda: table.append(data)

    def small_appender(self, root: Path, small: pa.Table) -> Callable[[], object]:
        table = self._create(root)
        return lambda: table.append(small)

    def deleter(self, root: Path, case: DeleteCase) -> Callable[[], object]:
        table = castable.open_table(str(root))
        predicate = case.sql()
        return lambda: table.delete(predicate)

    def upserter(self, root: Path, rows: pa.Table) -> Callable[[], object]:
        table = castable.open_table(str(root))
        return lambda: table.upsert(rows)

    def replacer(self, root: Path, case: ReplaceCase) -> Callable[[], object]:
        table = castable.open_table(str(root))
        predicate = case.sql()
        return lambda: table.overwrite(case.rows, where=predicate)

    def compactor(self, root: Path) -> Callable[[], object]:
        """Open the table at ``root``; return its compaction with the default options."""
        return castable.open_table(str(root)).compact

    def live_files(self, root: Path) -> set[str]:
        return {f.path for f in castable.open_table(str(root)).manifest.data_files}

    def readers(self, root: Path, lo: int, hi: int) -> list[Reader]:
        table = castable.open_table(str(root))
        paths = [str(root / f.path) for f in table.manifest.data_files if f.inline is None]
        return [
            *castable_readers(table, lo, hi),
            pyarrow_reader("pyarrow, castable's files (deletes not applied)", FLOOR, paths, lo, hi),
        ]


def castable_readers(table: castable.Table, lo: int, hi: int) -> list[Reader]:
    """castable's scans on one handle, and the same with every cache cleared first (a cold start:
    footers, tombstones and resolved key deletes fetched and worked out again)."""

    def full() -> pa.Table:
        return table.scan().to_arrow()

    def filtered() -> pa.Table:
        return table.scan(["id", "category"], f"id BETWEEN {lo} AND {hi}").to_arrow()

    def cold(scan: Callable[[], pa.Table]) -> Callable[[], pa.Table]:
        def run() -> pa.Table:
            castable.clear_caches()
            return scan()

        return run

    return [
        Reader("castable", "castable", SUBJECT, full, filtered),
        Reader("castable, caches cleared before each scan", "castable", REFERENCE, cold(full), cold(filtered)),
    ]


class Delta(System):
    name, role = "deltalake", PEER

    def _properties(self) -> WriterProperties:
        return WriterProperties(compression=self.layout.codec.upper(), max_row_group_size=self.layout.row_group_rows)

    def appender(self, root: Path, data: pa.Table) -> Callable[[], object]:
        config: dict[str, str | None] = {"delta.targetFileSize": str(self.layout.file_bytes)}
        table = DeltaTable.create(str(root), SCHEMA, configuration=config)
        props = self._properties()
        return lambda: write_deltalake(
            table, data, mode="append", writer_properties=props, target_file_size=self.layout.file_bytes
        )

    def deleter(self, root: Path, case: DeleteCase) -> Callable[[], object]:
        table = DeltaTable(str(root))
        predicate, props = case.sql(), self._properties()
        return lambda: table.delete(predicate, writer_properties=props)

    def upserter(self, root: Path, rows: pa.Table) -> Callable[[], object]:
        table, props = DeltaTable(str(root)), self._properties()
        return lambda: (
            table.merge(
                source=rows, predicate="t.id = s.id", source_alias="s", target_alias="t", writer_properties=props
            )
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )

    def replacer(self, root: Path, case: ReplaceCase) -> Callable[[], object]:
        table, props = DeltaTable(str(root)), self._properties()
        predicate = case.sql()
        return lambda: write_deltalake(
            table,
            case.rows,
            mode="overwrite",
            predicate=predicate,
            writer_properties=props,
            target_file_size=self.layout.file_bytes,
        )

    def live_files(self, root: Path) -> set[str]:
        return set(DeltaTable(str(root)).file_uris())

    def readers(self, root: Path, lo: int, hi: int) -> list[Reader]:
        table = DeltaTable(str(root))
        files = table.file_uris()
        key_range = (pc.field("id") >= lo) & (pc.field("id") <= hi)
        return [
            Reader(
                "deltalake (pyarrow dataset)",
                "deltalake",
                PEER,
                lambda: table.to_pyarrow_table(),
                lambda: table.to_pyarrow_table(columns=["id", "category"], filters=key_range),
            ),
            Reader(
                "deltalake (native DataFusion scan)",
                "deltalake",
                PEER,
                lambda: pa.table(table.scan()),
                lambda: pa.table(table.scan(["id", "category"], f"id >= {lo} AND id <= {hi}")),
            ),
            *duckdb_readers("duckdb, delta's current files", "deltalake", PEER, files, lo, hi),
        ]


class Iceberg(System):
    name, role = "pyiceberg", PEER

    def __init__(self, work: Path, layout: Layout) -> None:
        super().__init__(work, layout)
        work.mkdir(parents=True, exist_ok=True)
        self.catalog = SqlCatalog("bench", uri=f"sqlite:///{work}/catalog.db", warehouse=work.as_uri())
        self.catalog.create_namespace("bench")

    @staticmethod
    def _ident(root: Path) -> str:
        return f"bench.{root.name}"

    def appender(self, root: Path, data: pa.Table) -> Callable[[], object]:
        props = {
            "write.parquet.compression-codec": self.layout.codec,
            "write.target-file-size-bytes": str(self.layout.file_bytes),
            "write.parquet.row-group-limit": str(self.layout.row_group_rows),
        }
        table = self.catalog.create_table(self._ident(root), SCHEMA, location=root.as_uri(), properties=props)
        return lambda: table.append(data)

    def deleter(self, root: Path, case: DeleteCase) -> Callable[[], object]:
        table = self.catalog.load_table(self._ident(root))
        expression = case.iceberg()
        return lambda: table.delete(delete_filter=expression)

    def upserter(self, root: Path, rows: pa.Table) -> Callable[[], object]:
        table = self.catalog.load_table(self._ident(root))
        return lambda: table.upsert(rows, join_cols=["id"])

    def replacer(self, root: Path, case: ReplaceCase) -> Callable[[], object]:
        table = self.catalog.load_table(self._ident(root))
        expression = case.iceberg()
        return lambda: table.overwrite(case.rows, overwrite_filter=expression)

    def live_files(self, root: Path) -> set[str]:
        return {task.file.file_path for task in self.catalog.load_table(self._ident(root)).scan().plan_files()}

    def readers(self, root: Path, lo: int, hi: int) -> list[Reader]:
        table = self.catalog.load_table(self._ident(root))
        key_range = And(GreaterThanOrEqual("id", lo), LessThanOrEqual("id", hi))
        return [
            Reader(
                "pyiceberg",
                "pyiceberg",
                PEER,
                lambda: table.scan().to_arrow(),
                lambda: table.scan(row_filter=key_range, selected_fields=("id", "category")).to_arrow(),
            )
        ]

    def drop(self, root: Path) -> None:
        self.catalog.drop_table(self._ident(root))
        super().drop(root)


class PlainParquet(System):
    """The floor: one Parquet file written, rewritten and read by pyarrow, with no table format."""

    name, role = "pyarrow", FLOOR

    def appender(self, root: Path, data: pa.Table) -> Callable[[], object]:
        root.mkdir(parents=True)
        return lambda: write_parquet(root / "part-0.parquet", data, self.layout)

    def small_appender(self, root: Path, small: pa.Table) -> Callable[[], object]:
        root.mkdir(parents=True)
        counter = iter(range(sys.maxsize))
        return lambda: write_parquet(root / f"part-{next(counter)}.parquet", small, self.layout)

    def _rewriter(self, root: Path, doomed: pc.Expression, added: pa.Table | None = None) -> Callable[[], object]:
        """Copy-on-write without a table format: read the one file, drop the ``doomed`` rows, add
        ``added`` and write it again."""

        def rewrite() -> None:
            (old,) = root.glob("*.parquet")
            kept = pq.read_table(old).filter(~doomed)
            if added is not None:
                kept = pa.concat_tables([kept, added.cast(kept.schema)])
            write_parquet(root / f"part-{int(old.stem.split('-')[1]) + 1}.parquet", kept, self.layout)
            old.unlink()

        return rewrite

    def deleter(self, root: Path, case: DeleteCase) -> Callable[[], object]:
        return self._rewriter(root, case.expression())

    def upserter(self, root: Path, rows: pa.Table) -> Callable[[], object]:
        return self._rewriter(root, pc.field("id").isin(rows.column("id")), rows)

    def replacer(self, root: Path, case: ReplaceCase) -> Callable[[], object]:
        return self._rewriter(root, case.expression(), case.rows)

    def live_files(self, root: Path) -> set[str]:
        return {p.name for p in root.glob("*.parquet")}

    def readers(self, root: Path, lo: int, hi: int) -> list[Reader]:
        paths = [str(p) for p in root.glob("*.parquet")]
        return [
            pyarrow_reader("pyarrow, plain copy of the live rows", REFERENCE, paths, lo, hi),
            *duckdb_readers("duckdb, plain copy", "pyarrow", REFERENCE, paths, lo, hi),
        ]


def pyarrow_reader(name: str, role: str, paths: list[str], lo: int, hi: int, filesystem: Any = None) -> Reader:
    """pyarrow's dataset over a fixed file list (on ``filesystem``, local by default)."""
    key_range = (pc.field("id") >= lo) & (pc.field("id") <= hi)

    def dataset() -> ds.Dataset:
        return ds.dataset(paths, format="parquet", filesystem=filesystem)

    return Reader(
        name,
        "pyarrow",
        role,
        lambda: dataset().to_table(),
        lambda: dataset().to_table(columns=["id", "category"], filter=key_range),
    )


def duckdb_readers(name: str, family: str, role: str, files: list[str], lo: int, hi: int) -> list[Reader]:
    """DuckDB's read_parquet over a fixed file list (its delta extension cannot be installed offline)."""
    con = duckdb.connect()
    params = {"files": [f.removeprefix("file://") for f in files]}
    full = "SELECT * FROM read_parquet($files)"
    filtered = f"SELECT id, category FROM read_parquet($files) WHERE id BETWEEN {lo} AND {hi}"
    return [
        Reader(
            name,
            family,
            role,
            lambda: con.sql(full, params=params).to_arrow_table(),
            lambda: con.sql(filtered, params=params).to_arrow_table(),
        )
    ]
