"""Files castable did not write, through every step (issue: files the world writes): nested
types as pyarrow writes them (three-level lists, lists of ``item``, structs, maps, lists of
structs) and files Spark 3.5 and Spark 4 write by default and in their legacy format (INT96
timestamps, two-level lists, decimals as INT64 or fixed-length bytes, Hadoop-framed LZ4). Each is registered
(decoding every page), scanned and filtered as pyarrow reads it, soft-deleted from, erased
from by splice and by rewrite, purged (verified), and the table's files are then read by
pyarrow, DuckDB, DataFusion, Spark 3.5 and Spark 4 exactly as each read the original, less the
erased rows."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers import ROOT, SHORT_JVM
from helpers.engines import engines
from helpers.literals import literal
from helpers.typed_rows import rows as typed_rows
from helpers.typed_rows import same

import castable
from castable.format.evolution import stored_type

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.xdist_group("spark")]

SPARKS = {"3.5": ROOT / ".venv-spark35" / "bin" / "python", "4": Path(sys.executable)}
SPARK_FILES = [f"spark-{v}-{layout}" for v in SPARKS for layout in ("default", "legacy", "lz4")]
PYARROW_FILES = ["pyarrow-nested", "pyarrow-nested-item", "pyarrow-scalars"]
ERASED_BY_SPLICE = [50_001, 50_002]
ERASED_BY_REWRITE = [90_000]
ERASED = ERASED_BY_SPLICE + ERASED_BY_REWRITE
DELETED = 3
PARQUET_TESTING = ROOT / "tests" / "data" / "parquet-testing"
"""Files of apache/parquet-testing (their README there): footers other writers get wrong or unusual."""


class Spark:
    """A Spark process (helpers/spark_corpus.py) that wrote its files and reads files on request."""

    def __init__(self, python: Path, out: Path) -> None:
        out.mkdir()
        self.log = (out / "spark.log").open("w")
        self.process = subprocess.Popen(
            [str(python), "-m", "helpers.spark_corpus", str(out)],
            cwd=ROOT / "tests",
            env={"PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python), "PATH": "/usr/bin:/bin"}
            | SHORT_JVM,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )

    def answer(self) -> dict[str, Any]:
        """The next JSON line the process prints."""
        out: IO[str] | None = self.process.stdout
        assert out is not None
        for line in out:
            if line.startswith("{"):
                return dict(json.loads(line))
        raise AssertionError(f"Spark ended: {Path(self.log.name).read_text()[-3000:]}")

    def read(self, paths: list[str], exclude: list[int]) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"paths": paths, "exclude": exclude}) + "\n")
        self.process.stdin.flush()
        return self.answer()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=120)
        self.log.close()


@pytest.fixture(scope="module")
def sparks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Spark]]:
    """Spark 3.5 (as on EMR 7) and Spark 4, each having written its files, started side by side."""
    for python in SPARKS.values():
        if not python.exists():
            pytest.fail(f"{python} is missing: `make test` builds it")
    out = tmp_path_factory.mktemp("spark")
    started = {v: Spark(python, out / v) for v, python in SPARKS.items()}
    for v, spark in started.items():
        assert spark.answer()["spark"].startswith(f"{v}.")
    yield started
    for spark in started.values():
        spark.close()


def nested_rows(rows: int = 240_000) -> pa.Table:
    """Lists (null, empty and full), structs, maps and lists of structs, over 10 MiB as Parquet, so a splice copies."""
    rng = np.random.default_rng(11)
    ids = np.arange(rows)
    words = pa.array(rng.integers(0, 2**62, rows).astype(str))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "tags": pa.array([None if i % 7 == 0 else [str(w), "x"][: i % 3] for i, w in enumerate(words.to_pylist())]),
            "addr": pa.array(
                [{"city": f"c{i % 97}", "zip": None if i % 11 == 0 else int(i % 1000)} for i in ids],
                pa.struct([("city", pa.string()), ("zip", pa.int32())]),
            ),
            "attrs": pa.array([[("k", int(i)), ("j", -int(i))] for i in ids], pa.map_(pa.string(), pa.int64())),
            "points": pa.array(
                [[{"x": i * 0.5, "y": None if i % 2 else -0.0}] * (i % 3) for i in ids],
                pa.list_(pa.struct([("x", pa.float64()), ("y", pa.float64())])),
            ),
            "digest": words,
        }
    )


def scalar_rows(rows: int = 400_000) -> pa.Table:
    """Every scalar type castable filters on (helpers/typed_rows.py: float16, uint64, decimals
    to 38 digits and a decimal256, timestamps of every unit with and without a zone, NaN and
    -0.0, empty strings, large binary) but date64, drawn at random, over 10 MiB as Parquet."""
    rng = np.random.default_rng(5)
    table = typed_rows()[0]
    assert isinstance(table, pa.Table)
    drawn = table.take(pa.array(rng.integers(0, table.num_rows, rows)))
    drawn = drawn.set_column(0, "id", pa.array(np.arange(rows), pa.int64()))
    # pyarrow writes date64 as Parquet DATE and reads it back as date32, the type the table then
    # has; DataFusion alone honours the writer's ARROW:schema and reads the original as date64.
    drawn = drawn.drop_columns(["day64"])
    return drawn.append_column("digest", pa.array(rng.integers(0, 2**62, rows).astype(str)))


def corpus_file(name: str, sparks: dict[str, Spark], into: Path) -> Path:
    if name in PYARROW_FILES:
        path = into / f"{name}.parquet"
        if name == "pyarrow-scalars":
            pq.write_table(scalar_rows(), path, row_group_size=80_000)
        else:
            legacy = name.endswith("-item")
            pq.write_table(nested_rows(), path, row_group_size=40_000, use_compliant_nested_type=not legacy)
        return path
    version, layout = name.removeprefix("spark-").split("-")
    return Path(sparks[version].log.name).parent / f"{layout}.parquet"


CANNOT_READ = {
    "spark-3.5-lz4": {"datafusion"},
    "spark-4-lz4": {"datafusion"},
    "pyarrow-scalars": {"spark-3.5", "spark-4"},
}
"""Engines that cannot read a corpus file as its writer wrote it: DataFusion 55 (arrow-rs) fails
on parquet-mr's Hadoop-framed LZ4 ("the offset to copy is not contained in the decompressed
buffer"), which the unedited row groups of a splice keep; Spark has no float16, unsigned or
nanosecond timestamp type (CANNOT_READ_FILE_FOOTER)."""


def filtered_on_every_column(t: castable.Table, expected: pa.Table) -> list[str]:
    """Filter on each column that has SQL literals (INT96 timestamps, decimals as INT64 or
    fixed-length bytes, float16, times ...) at a value from the middle of the file, as pyarrow
    filters the file; return the columns filtered on."""
    columns = []
    for name, column in zip(expected.column_names, expected.columns, strict=True):
        value = column[column.length() // 3]
        sql = literal(value)
        if sql is None:
            continue
        compared = column.cast(pa.float64()) if pa.types.is_float16(column.type) else column
        bound = value.cast(pa.float64()) if pa.types.is_float16(column.type) else value
        for op, compare in ((">=", pc.greater_equal), ("=", pc.equal)):
            want = expected.column("id").filter(pc.fill_null(compare(compared, bound), False))
            got = t.scan(["id"], filter=f"{name} {op} {sql}").to_arrow().column("id")
            assert sorted(got.to_pylist()) == sorted(want.to_pylist()), f"{name} {op} {sql}"
        columns.append(name)
    return columns


def in_stored_units(rows: pa.Table) -> pa.Table:
    """``rows`` as castable's writer stores them: seconds and milliseconds timestamps in microseconds."""
    return rows.cast(pa.schema([f.with_type(stored_type(f.type)) for f in rows.schema]))


@pytest.mark.parametrize("name", PYARROW_FILES + SPARK_FILES)
def test_a_file_from_another_writer_goes_through_every_step(
    tmp_path: Path, sparks: dict[str, Spark], name: str
) -> None:
    source = corpus_file(name, sparks, tmp_path)
    expected = pq.read_table(source).sort_by("id").replace_schema_metadata(None)
    t = castable.create_table(str(tmp_path / "t"), expected.schema, primary_key="id")
    (tmp_path / "t" / "data").mkdir()
    shutil.copy(source, tmp_path / "t" / "data" / "source.parquet")
    t.add_files(["data/source.parquet"])

    assert same(t.to_arrow().sort_by("id"), expected)
    found = t.scan(filter="id BETWEEN 100 AND 199 AND digest >= '3'").to_arrow().sort_by("id")
    assert same(found, expected.filter((pc.field("id") >= 100) & (pc.field("id") <= 199) & (pc.field("digest") >= "3")))
    filtered = filtered_on_every_column(t, expected)
    assert {"id", "digest", *(("ts", "amount") if name in SPARK_FILES else ())} <= set(filtered), filtered
    t.delete(f"id = {DELETED}")

    spliced = t.erase(f"id IN {tuple(ERASED_BY_SPLICE)}", mode="splice")
    assert [e.method for e in spliced.files] == ["splice"] and spliced.rows_erased == len(ERASED_BY_SPLICE)
    assert spliced.transfer.copied > 0, "unedited row groups were copied server-side"
    rewritten = t.erase(f"id = {ERASED_BY_REWRITE[0]}", mode="rewrite")
    assert [e.method for e in rewritten.files] == ["rewrite"]
    assert t.purge_erased(spliced).verified and t.purge_erased(rewritten).verified

    survivors = expected.filter(pc.invert(pc.is_in(pc.field("id"), pa.array([DELETED, *ERASED], pa.int64()))))
    assert same(castable.open_table(t.uri).to_arrow().sort_by("id"), survivors)
    files = [tmp_path / "t" / f.path for f in castable.open_table(t.uri).manifest.data_files]
    # A soft-deleted row goes physically too where an erase re-encodes its row group: left out of both.
    skip = CANNOT_READ.get(name, set())
    before, after = engines([source], [DELETED, *ERASED], skip), engines(files, [DELETED], skip)
    for engine, rows in after.items():  # a rewritten file holds s/ms timestamps in microseconds (docs/format.md 5)
        assert same(rows, before[engine]) or same(rows, in_stored_units(before[engine])), engine
    for version, spark in sparks.items():
        if f"spark-{version}" in CANNOT_READ.get(name, set()):
            assert "error" in spark.read([str(source)], []), f"Spark {version} reads {name}: test it"
            continue
        original = spark.read([str(source)], [DELETED, *ERASED])
        assert spark.read([str(f) for f in files], [DELETED]) == original, f"Spark {version}"
        assert original["rows"] == expected.num_rows - 1 - len(ERASED)


@pytest.mark.parametrize("verify", ["decode", "footer"])
@pytest.mark.parametrize("name", sorted(p.stem for p in PARQUET_TESTING.glob("*.parquet")))
def test_a_parquet_testing_file_is_counted_and_read_as_pyarrow_reads_it(tmp_path: Path, name: str, verify: str) -> None:
    """Counted by its row groups, as pyarrow and DuckDB read it: ``repeated_no_annotation``'s
    footer says ``num_rows = 0`` beside a row group of 6 rows, and castable counted 0."""
    source = PARQUET_TESTING / f"{name}.parquet"
    expected = pq.read_table(source).replace_schema_metadata(None)
    metadata = pq.read_metadata(source)
    assert sum(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)) == expected.num_rows
    t = castable.create_table(str(tmp_path / "t"), expected.schema)
    (tmp_path / "t" / "data").mkdir()
    shutil.copy(source, tmp_path / "t" / "data" / "source.parquet")
    t.add_files(["data/source.parquet"], verify=verify)  # type: ignore[arg-type]

    reopened = castable.open_table(t.uri)
    assert reopened.count() == expected.num_rows and [f.rows for f in reopened.manifest.data_files] == [
        expected.num_rows
    ]
    assert same(reopened.to_arrow(), expected)
    first = expected.column(0)
    middle = first.length() // 2  # the first value from the middle on that SQL can name (not a NaN)
    value, sql = next((v, q) for v in first[middle:] if (q := literal(v)) is not None)
    want = pc.sum(pc.fill_null(pc.greater_equal(first, value), False).cast(pa.int64())).as_py()
    assert reopened.scan(filter=f"{expected.column_names[0]} >= {sql}").count() == want
