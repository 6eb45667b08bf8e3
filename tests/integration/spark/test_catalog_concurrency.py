"""Spark, pyiceberg and castable's own writers committing to one table at once, each in its own
process, while castable's Iceberg REST catalog is served by another (issue 52): no commit is
lost, none lands twice, and every conflict is a 409 that the client retried.

Two pyiceberg writers append one-row batches through the catalog, two castable writers append
to the table's folder directly, and Spark 3.5 with Apache Iceberg 1.10.2 runs ``INSERT INTO``
through the catalog, all released together. Every client keeps its default retries. The
served catalog records each answer. For every client, its commits answered 200 are exactly its
commits, and the rest of its commit requests were answered 409 and were retried. pyiceberg
counts its own retries; Spark's show as further requests. The table then holds every writer's
ids exactly once, with one castable version per commit, and pyiceberg and Spark read the rows
castable reads."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from helpers import HELPERS
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

import castable
from integration.spark.test_catalog_spark import SparkSQL

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.xdist_group("spark")]

RACE = HELPERS / "catalog_race.py"
N = 15
"""One-row appends per pyiceberg and castable writer."""
K = 4
"""Spark's ``INSERT INTO`` statements, one row each."""
PYICEBERG = {"p0": 1000, "p1": 2000}
CASTABLE = {"c0": 3000, "c1": 4000}
SPARK = 9000
"""The first id of each writer."""
PAUSE = 0.4
"""Seconds a castable writer waits before each append, so that it writes for as long as Spark
and pyiceberg do (a commit through the catalog takes a few tenths of a second, a Spark statement
a second or more)."""
COMMITS = "/v1/namespaces/db/tables/t"


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(RACE), *args], stdout=subprocess.PIPE, text=True)


def stopped(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(timeout=30)


def ids(table: castable.Table) -> list[int]:
    return sorted(table.refresh().to_arrow()["id"].to_pylist())


def spark_inserts(sql: SparkSQL, table: castable.Table) -> tuple[list[int], int, list[int]]:
    """Run the K inserts; one Spark gave up on after its retries is run again if it did not land.
    Returns the ids, how many statements were run again and the table's version before each."""
    again, versions = 0, []
    for i in range(SPARK, SPARK + K):
        versions.append(table.refresh().version)
        while "error" in (answer := sql(f"INSERT INTO rest.db.t VALUES ({i}, 'spark')")):
            assert "exceptions.CommitFailedException: " in answer["error"], answer["error"]
            assert i not in ids(table), f"{i} landed, yet Spark was told its commit failed"
            again += 1
    return list(range(SPARK, SPARK + K)), again, versions


def test_spark_pyiceberg_and_castable_writers_race_on_one_table(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    with ExitStack() as stack:
        server = start("serve", str(warehouse), str(tmp_path / "answers.jsonl"))
        stack.callback(stopped, server)
        assert server.stdout is not None
        uri = server.stdout.readline().strip()
        catalog = RestCatalog("castable", uri=uri)
        catalog.create_namespace("db")
        schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "writer", StringType()))
        catalog.create_table("db.t", schema=schema)
        table = castable.open_table(str(warehouse / "db" / "t"))

        sql = SparkSQL(uri, tmp_path / "spark.log")
        stack.callback(sql.close)
        writers = {
            name: start("pyiceberg", uri, name, str(first), str(N), str(tmp_path)) for name, first in PYICEBERG.items()
        }
        writers |= {
            name: start("castable", table.uri, name, str(first), str(N), str(PAUSE), str(tmp_path))
            for name, first in CASTABLE.items()
        }
        for writer in writers.values():
            stack.callback(stopped, writer)
        # Spark's first statements are slow (a JVM warming up): made on a table of their own
        sql.rows("CREATE TABLE rest.db.warm (id bigint, writer string) USING iceberg")
        sql.rows("INSERT INTO rest.db.warm VALUES (0, 'spark')")
        while len(list(tmp_path.glob("ready-*"))) < len(writers):
            assert all(w.poll() is None for w in writers.values()), "a writer failed before the race"
            time.sleep(0.01)
        (tmp_path / "go").touch()
        spark_ids, spark_again, spark_versions = spark_inserts(sql, table)
        done: dict[str, dict[str, Any]] = {}
        for name, writer in writers.items():
            out, _ = writer.communicate(timeout=300)
            assert writer.returncode == 0, f"{name} failed"
            done[name] = json.loads(out)

        # every id each writer committed is there once, and nothing else
        committed = sorted([*spark_ids, *(i for d in done.values() for i in d["ids"])])
        assert len(committed) == 4 * N + K
        assert ids(table) == committed
        # one castable version per commit: the castable writers' own, and one per Iceberg snapshot
        history = table.history()
        assert [h.version for h in history] == list(range(4 * N + K, -1, -1))
        assert [h.operation for h in history] == ["append"] * (4 * N + K) + ["create"]
        assert Counter(h.commit_id.split("-")[0] for h in history[:-1]) == {"c0": N, "c1": N, "iceberg": 2 * N + K}
        assert {h.commit_id: h.version for h in history if h.commit_id.split("-")[0] in CASTABLE} == {
            f"{name}-{i}": v
            for name in CASTABLE
            for i, v in zip(done[name]["ids"], done[name]["versions"], strict=True)
        }
        # pyiceberg and Spark read what castable reads
        rows = sorted(zip(*table.to_arrow().select(["id", "writer"]).to_pydict().values(), strict=True))
        scanned = catalog.load_table("db.t").scan().to_arrow().select(["id", "writer"]).to_pydict()
        assert sorted(zip(*scanned.values(), strict=True)) == rows
        sql.rows("REFRESH TABLE rest.db.t")  # Spark's catalog caches the table as of its last commit
        assert sql.rows("SELECT count(*), count(DISTINCT id) FROM rest.db.t") == [(len(rows), len(rows))]

    # every commit request was answered 200 (one per commit) or 409, each 409 retried
    answers = [json.loads(line) for line in (tmp_path / "answers.jsonl").read_text().splitlines()]
    assert all(a["status"] < 500 for a in answers), [a for a in answers if a["status"] >= 500]
    spark = "Java-http-client/"  # the User-Agent of Spark's requests
    commits = Counter(
        (spark if a["writer"].startswith(spark) else a["writer"], a["status"])
        for a in answers
        if a["method"] == "POST" and a["path"] == COMMITS
    )
    assert set(commits) <= {(w, s) for w in [*PYICEBERG, spark] for s in (200, 409)}, commits
    for name in PYICEBERG:
        assert commits[name, 200] == N
        assert commits[name, 409] == done[name]["pyiceberg_retries"] + done[name]["gave_up"]
    assert commits[spark, 200] == K
    assert commits[spark, 409] >= 5 * spark_again  # Spark's 4 retries, then the statement again
    refused = {name: commits[name, 409] for name in [*PYICEBERG, spark]}
    gave_up = {name: done[name]["gave_up"] for name in PYICEBERG} | {spark: spark_again}
    seconds = {name: d["seconds"] for name, d in done.items()}
    print(f"409s {refused}, given up on and run again {gave_up}, Spark began on {spark_versions}, {seconds=}")
    assert sum(refused.values()) > 0
