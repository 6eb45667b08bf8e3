"""castable's Iceberg REST catalog driven by Spark 3.5 with Apache Iceberg 1.10.2's Spark runtime
(what EMR 7 runs), in one JVM (helpers/spark_catalog.py in .venv-spark35): CREATE NAMESPACE,
CREATE TABLE, INSERT, DELETE, UPDATE and MERGE INTO in copy-on-write and in merge-on-read mode,
time travel by castable's versions, the snapshots metadata table, CREATE TABLE AS SELECT (a
staged create), and names with blanks, dots and a leading ``_``. After each write castable
reads the table as Spark does, and its history says what Spark did. Spark's files go through its
default HadoopFileIO (``file:/`` locations) and the new tables' field ids are the catalog's."""

from __future__ import annotations

import json
import os
import select
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import HELPERS, ROOT

import castable
from castable.catalog import Catalog, Warehouse
from castable.catalog.server import make_server

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.xdist_group("spark")]

SPARK35 = ROOT / ".venv-spark35" / "bin" / "python"
JARS = ROOT / ".tools" / "iceberg"
MODES = ("write.delete.mode", "write.update.mode", "write.merge.mode")


class SparkSQL:
    """Spark 3.5 with the catalog ``rest`` at ``uri``, answering one statement at a time."""

    def __init__(self, uri: str, log: Path, credential: str | None = None) -> None:
        self.log = log
        script = HELPERS / "spark_catalog.py"
        env = {**os.environ, "CASTABLE_CATALOG_CREDENTIAL": credential or ""}
        with log.open("w") as err:
            self.process = subprocess.Popen(
                [str(SPARK35), str(script), str(JARS), uri],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=env,
            )

    def __call__(self, statement: str, timeout: float = 300) -> dict[str, Any]:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps(statement) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        assert line, f"no answer to {statement!r}; Spark's log ends:\n{self.log.read_text()[-3000:]}"
        return json.loads(line)

    def rows(self, statement: str) -> list[tuple[Any, ...]]:
        answer = self(statement)
        assert "error" not in answer, f"{statement}: {answer['error']}"
        return sorted(tuple(row) for row in answer["rows"])

    def close(self) -> None:
        assert self.process.stdin
        self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def spark(tmp_path: Path) -> Iterator[tuple[SparkSQL, str]]:
    """Spark against castable's catalog, served in this process over ``tmp_path/wh`` on a free
    port (as in test_catalog.py), and the warehouse."""
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    server = make_server(Catalog(Warehouse.at(str(warehouse))), port=0)
    thread = server.start()
    sql = SparkSQL(f"http://127.0.0.1:{server.port}", tmp_path / "spark.log")
    try:
        yield sql, str(warehouse)
    finally:
        sql.close()
        server.shutdown()
        thread.join(timeout=10)
        server.close()


def castable_rows(table: castable.Table, version: int | None = None) -> list[tuple[Any, ...]]:
    data = (table.refresh().to_arrow() if version is None else table.scan(version=version).to_arrow()).select(
        ["id", "s"]
    )
    return sorted(zip(data["id"].to_pylist(), data["s"].to_pylist(), strict=True))


def test_spark_writes_through_the_catalog_and_castable_reads_what_it_wrote(spark: tuple[SparkSQL, str]) -> None:
    sql, warehouse = spark
    assert sql("CREATE NAMESPACE rest.db") == {"rows": []}
    tables = {}
    for name, mode in [("cow", "copy-on-write"), ("mor", "merge-on-read")]:
        t = f"rest.db.{name}"
        props = ", ".join(f"'{p}' = '{mode}'" for p in MODES)
        assert sql(f"CREATE TABLE {t} (id bigint, s string) USING iceberg TBLPROPERTIES ({props})") == {"rows": []}
        table = tables[name] = castable.open_table(f"{warehouse}/db/{name}")
        writes = [
            f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')",
            f"DELETE FROM {t} WHERE id = 1",
            f"UPDATE {t} SET s = 'B' WHERE id = 2",
            f"MERGE INTO {t} AS x USING (SELECT 3L AS id, 'C' AS s UNION ALL SELECT 5L, 'e') AS y ON x.id = y.id "
            "WHEN MATCHED THEN UPDATE SET x.s = y.s WHEN NOT MATCHED THEN INSERT *",
        ]
        for write in writes:
            assert sql(write) == {"rows": []}, write
            assert castable_rows(table) == sql.rows(f"SELECT id, s FROM {t}"), write
        assert castable_rows(table) == [(2, "B"), (3, "C"), (4, "d"), (5, "e")]

    # copy-on-write: each change swaps whole files (their rows carried); merge-on-read: Spark's
    # position delete files became tombstones, the DELETE one with no data file added
    cow, mor = tables["cow"], tables["mor"]
    history = cow.history()
    assert [h.operation for h in history] == ["overwrite", "overwrite", "overwrite", "append", "create"]
    assert all(h.summary["carries_rows"] and h.summary["files_removed"] == 1 for h in history[:3])
    assert not any("tombstone" in h.summary for h in history)
    history = mor.history()
    assert [h.operation for h in history] == ["overwrite", "overwrite", "delete", "append", "create"]
    assert all(h.summary["tombstone"] and h.summary["files_removed"] == 0 for h in history[:3])
    assert history[2].summary["files_added"] == 0 and history[1].summary["rows_added"] == 1

    # time travel by castable's versions (its snapshot ids), and the snapshots metadata table (a
    # loadTable of db.mor.snapshots answers 404 NoSuchTableException, so Spark reads db.mor's)
    for name, table in tables.items():
        for version in range(1, table.version + 1):
            at = f"SELECT id, s FROM rest.db.{name} VERSION AS OF {version}"
            assert sql.rows(at) == castable_rows(table, version), at
    assert sql.rows("SELECT snapshot_id, operation FROM rest.db.mor.snapshots") == [
        (h.version, h.operation) for h in reversed(history[:-1])
    ]

    # CREATE TABLE AS SELECT: a staged create, made by the commit of its first snapshot
    assert sql("CREATE TABLE rest.db.ctas USING iceberg AS SELECT * FROM rest.db.mor WHERE id > 2") == {"rows": []}
    ctas = castable.open_table(f"{warehouse}/db/ctas")
    assert castable_rows(ctas) == sql.rows("SELECT id, s FROM rest.db.ctas") == [(3, "C"), (4, "d"), (5, "e")]
    assert [h.operation for h in ctas.history()] == ["append", "create"]

    # names as data has them (Java's client sends a blank in a path as '+'): a namespace, a
    # table and columns with blanks, dots and a leading _, each in its documented folder
    named = "rest.`_raw data`.`events.v2`"
    assert sql("CREATE NAMESPACE rest.`_raw data`") == {"rows": []}
    assert sql(f"CREATE TABLE {named} (id bigint, `a.b` string, `my col` double) USING iceberg") == {"rows": []}
    assert sql(f"INSERT INTO {named} VALUES (1, 'x', 0.5), (2, 'y', 2.5)") == {"rows": []}
    assert sql.rows(f"SELECT id, `a.b` FROM {named} WHERE `my col` > 1") == [(2, "y")]
    events = castable.open_table(f"{warehouse}/=5Fraw=20data/events=2Ev2")
    assert events.scan(filter="`my col` < 1").to_arrow().to_pylist() == [{"id": 1, "a.b": "x", "my col": 0.5}]

    # partitioned as most large Iceberg tables are made: Spark writes a file per partition, each
    # keeps its tuple, castable prunes by it; a whole-partition DELETE, castable's own append of
    # the same rows (the same partitions: its bucket is Java's), and a spec Spark evolves
    parted = "rest.db.clicks"
    assert sql(
        f"CREATE TABLE {parted} (id bigint, ts timestamp, s string) USING iceberg "
        "PARTITIONED BY (days(ts), bucket(16, id))"
    ) == {"rows": []}
    values = ", ".join(f"({i}, TIMESTAMP '2026-11-{1 + i % 5:02d} 10:00:00 UTC', 'p{i % 3}')" for i in range(40))
    assert sql(f"INSERT INTO {parted} VALUES {values}") == {"rows": []}
    clicks = castable.open_table(f"{warehouse}/db/clicks")
    spark_files = list(clicks.manifest.data_files)
    assert len(spark_files) > 5 and all(
        f.spec_id == clicks.partitioning.default_spec_id and f.partition for f in spark_files
    )
    day = "ts >= TIMESTAMP '2026-11-02 00:00:00 UTC' AND ts < TIMESTAMP '2026-11-03 00:00:00 UTC'"
    assert sql(f"DELETE FROM {parted} WHERE {day}") == {"rows": []}
    kept = clicks.refresh().to_arrow()
    assert kept.num_rows == 32 and sql.rows(f"SELECT count(*) FROM {parted}") == [(32,)]
    clicks.append(kept)
    assert {f.partition for f in clicks.manifest.data_files if f.added_version == clicks.version} == {
        f.partition for f in clicks.manifest.data_files if f.added_version < clicks.version
    }
    assert sql(f"ALTER TABLE {parted} ADD PARTITION FIELD s") == {"rows": []}
    assert sql(f"INSERT INTO {parted} VALUES (100, TIMESTAMP '2026-11-09 10:00:00 UTC', 'p9')") == {"rows": []}
    newest = [f for f in clicks.refresh().manifest.data_files if f.added_version == clicks.version]
    assert [len(f.partition) for f in newest] == [3]
    assert (
        sql.rows(f"SELECT id FROM {parted} WHERE id = 7")
        == [(7,), (7,)]
        == [(i,) for i in clicks.to_arrow(filter="id = 7").column("id").to_pylist()]
    )


def test_spark_authenticates_with_client_credentials(tmp_path: Path) -> None:
    """A catalog served with principals, Spark 3.5 (Iceberg 1.10.2) configured as Iceberg's docs
    say (``credential``, ``oauth2-server-uri``): a write principal creates, inserts and deletes,
    and a read principal reads, while its INSERT is refused (403, ForbiddenException) and
    leaves the table as it was; refused commits are refusals to the Java client."""
    from unit.catalog.test_access import ACCESS, READER, WRITER

    from castable.catalog import Access

    (tmp_path / "access.toml").write_text(ACCESS)
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    server = make_server(
        Catalog(Warehouse.at(str(warehouse))), port=0, access=Access.from_file(tmp_path / "access.toml")
    )
    thread = server.start()
    uri = f"http://127.0.0.1:{server.port}"
    writer = SparkSQL(uri, tmp_path / "writer.log", credential=f"etl:{WRITER}")
    reader = SparkSQL(uri, tmp_path / "reader.log", credential=f"analyst:{READER}")
    try:
        assert writer("CREATE NAMESPACE rest.db") == {"rows": []}
        assert writer("CREATE TABLE rest.db.t (id bigint) USING iceberg") == {"rows": []}
        assert writer("INSERT INTO rest.db.t VALUES (1), (2), (3)") == {"rows": []}
        assert writer("DELETE FROM rest.db.t WHERE id = 1") == {"rows": []}
        # Iceberg's Java client reports the catalog's definite refusals as refusals, never as
        # "commit state unknown" (a 5xx): a 406 (Java's RESTException "Unable to process") and a
        # 400 (BadRequestException), each naming what was refused.
        for statement, kind in [
            ("ALTER TABLE rest.db.t CREATE BRANCH dev", "Unable to process: castable tables have one branch"),
            ("ALTER TABLE rest.db.t SET TBLPROPERTIES ('write.data.path' = '/tmp/elsewhere')", "BadRequestException"),
        ]:
            refused = writer(statement)
            assert kind in refused["error"] and "CommitStateUnknown" not in refused["error"], refused
        assert writer("ALTER TABLE rest.db.t WRITE ORDERED BY id DESC") == {"rows": []}  # a sort order is taken
        assert reader.rows("SELECT id FROM rest.db.t") == [(2,), (3,)]
        refused = reader("INSERT INTO rest.db.t VALUES (4)")
        assert "ForbiddenException" in refused["error"], refused
        assert sorted(castable.open_table(f"{warehouse}/db/t").to_arrow()["id"].to_pylist()) == [2, 3]
    finally:
        writer.close()
        reader.close()
        server.shutdown()
        thread.join(timeout=10)
        server.close()
