"""The change feed (``Table.changes``, ``Database.changes``, ``castable changes``): what each
operation gives, pairs of updates with and without a key, schema changes, time ranges, refusals
that leave the table as it was, no erased value after a purge, and a cost that follows the change,
not the table. The command line's ``castable changes`` is tested in test_cli.py."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.tables import FILES_ONLY, snapshot_of
from helpers.typed_rows import rows as typed_rows

import castable
from castable.maintenance.traces import find_traces, needles
from castable.store import LocalStore

KEYED = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string()), pa.field("n", pa.int64())]
)


def rows(ids: list[int], name: str = "x", n: int = 0) -> pa.Table:
    return pa.table({"id": ids, "name": [f"{name}{i}" for i in ids], "n": [n] * len(ids)}, schema=KEYED)


def changes(t: castable.Table, start: int, end: int | None = None) -> list[tuple[Any, ...]]:
    """(change type, id, name, n, version) of each change row, in order."""
    got = t.changes(start, end).to_arrow()
    return [
        (r["_change_type"], r["id"], r["name"], r["n"], r["_commit_version"])
        for r in got.to_pylist()  # the columns the test tables have
    ]


@pytest.fixture
def keyed(tmp_path: Path) -> castable.Table:
    t = castable.create_table(str(tmp_path / "t"), KEYED, primary_key="id", properties=FILES_ONLY)
    t.append(rows([1, 2, 3, 4]))
    return t


def test_each_operation_gives_its_changes(keyed: castable.Table) -> None:
    t = keyed
    assert changes(t, 1) == [("insert", i, f"x{i}", 0, 1) for i in (1, 2, 3, 4)]
    v = t.delete("id = 2").version
    assert changes(t, v) == [("delete", 2, "x2", 0, v)]
    v = t.delete("name = 'x3'").version  # by position, read from the data
    assert changes(t, v) == [("delete", 3, "x3", 0, v)]
    v = t.upsert(rows([1, 9], "u", 1)).version
    assert changes(t, v) == [
        ("update_preimage", 1, "x1", 0, v),
        ("update_postimage", 1, "u1", 1, v),
        ("insert", 9, "u9", 1, v),
    ]
    v = t.update({"n": "n + 10"}, where="id = 4").version
    assert changes(t, v) == [("update_preimage", 4, "x4", 0, v), ("update_postimage", 4, "x4", 10, v)]
    merge = t.merge(rows([4, 9, 20], "m", 2)).when_matched_update_all(where="s.id = 4").when_matched_delete()
    v = merge.when_not_matched_insert_all().execute().version
    assert sorted(changes(t, v)) == [
        ("delete", 9, "u9", 1, v),
        ("insert", 20, "m20", 2, v),
        ("update_postimage", 4, "m4", 2, v),
        ("update_preimage", 4, "x4", 10, v),
    ]
    before = t.version
    for v in (t.compact(min_file_size=1 << 30).version, t.coalesce_tombstones().version):
        assert v == before or changes(t, v) == []
    v = t.set_properties({"castable.note": "x"}).version
    assert changes(t, v) == []
    v = t.overwrite(rows([20, 30], "o", 3), where="id >= 20").version
    assert sorted(changes(t, v)) == [
        ("delete", 20, "m20", 2, v),
        ("insert", 20, "o20", 3, v),
        ("insert", 30, "o30", 3, v),
    ]
    live = sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"])
    v = t.restore(1).version
    got = changes(t, v)
    assert Counter(c[:4] for c in got if c[0] == "delete") == Counter(
        ("delete", r["id"], r["name"], r["n"]) for r in live
    )
    assert sorted(c[:4] for c in got if c[0] == "insert") == [("insert", i, f"x{i}", 0) for i in (1, 2, 3, 4)]
    report = t.erase("id = 3")
    assert changes(t, report.version) == [("delete", 3, "x3", 0, report.version)]


def test_changes_replay_every_range(keyed: castable.Table) -> None:
    """Applying the changes of a..b to version a-1 gives version b, for every range."""
    t = keyed
    t.upsert(rows([2, 5], "u"))
    t.delete("id IN (1, 5)")
    t.compact(min_file_size=1 << 30)
    t.update({"name": "'z'"}, where="id > 2")
    t.restore(2)
    t.erase("id = 2")
    for a in range(t.version + 1):
        for b in range(a, t.version + 1):
            state = {r["id"]: r for r in t.to_arrow(version=a - 1).to_pylist()} if a else {}
            for r in t.changes(a, b).to_arrow().to_pylist():
                kind = r.pop("_change_type")
                del r["_commit_version"], r["_commit_timestamp"]
                if kind in ("delete", "update_preimage"):
                    assert state.pop(r["id"]) == r
                else:
                    assert r["id"] not in state
                    state[r["id"]] = r
            assert state == {r["id"]: r for r in t.to_arrow(version=b).to_pylist()}, (a, b)


def test_a_keyless_update_pairs_each_row_with_its_new_value(tmp_path: Path) -> None:
    """Without a key the update knows which row it rewrote: pre- and post-images come in pairs,
    across files and inline entries, in the order the update read them."""
    schema = pa.schema([("rid", pa.int64()), ("k", pa.int64()), ("s", pa.string())])
    t = castable.create_table(str(tmp_path / "t"), schema, properties={"write.row-group-size-bytes": 2_000})
    for start in range(0, 3_000, 1_000):
        ids = list(range(start, start + 1_000))
        t.append(pa.table({"rid": ids, "k": [i % 7 for i in ids], "s": [f"s{i}" for i in ids]}, schema=schema))
    t.append(pa.table({"rid": [5_000, 5_001], "k": [3, 4], "s": ["i", "j"]}, schema=schema))  # inline
    t.delete("rid < 10")
    v = t.update({"s": "s || '!'", "k": "k + 100"}, where="k = 3").version
    got = t.changes(v).to_arrow().to_pylist()
    assert len(got) == 2 * (sum(1 for i in range(10, 3_000) if i % 7 == 3) + 1)
    for pre, post in zip(got[0::2], got[1::2], strict=True):
        assert (pre["_change_type"], post["_change_type"]) == ("update_preimage", "update_postimage")
        assert (post["rid"], post["k"], post["s"]) == (pre["rid"], pre["k"] + 100, pre["s"] + "!")


def test_columns_read_under_the_newest_schema(keyed: castable.Table) -> None:
    t = keyed
    added = t.alter().add_column("flag", pa.bool_(), default=True).commit().version
    renamed = t.alter().rename_column("name", "label").commit().version
    assert t.changes(added, renamed).count() == 0  # schema changes change no row
    t.append(pa.table({"id": [7], "label": ["new"], "n": [1], "flag": [False]}))
    got = t.changes(0, columns=["id", "label", "flag"]).to_arrow()
    assert got.schema.names == ["id", "label", "flag", "_change_type", "_commit_version", "_commit_timestamp"]
    assert got.select(["id", "label", "flag"]).to_pylist()[-2:] == [
        {"id": 4, "label": "x4", "flag": True},  # a row older than the column reads its default
        {"id": 7, "label": "new", "flag": False},
    ]
    old = t.changes(1, 1).to_arrow()  # a range before the rename reads the names of its last version
    assert "name" in old.schema.names and "flag" not in old.schema.names


def test_filter_projection_and_outputs(keyed: castable.Table) -> None:
    t = keyed
    v = t.upsert(rows([1, 2, 50], "u", 5)).version
    s = t.changes(1, filter="_change_type <> 'insert' AND id < 2", columns=["id", "n"])
    assert s.to_arrow().select(["id", "n", "_change_type"]).to_pylist() == [
        {"id": 1, "n": 0, "_change_type": "update_preimage"},
        {"id": 1, "n": 5, "_change_type": "update_postimage"},
    ]
    assert t.changes(v, filter=f"_commit_version = {v}").count() == 5
    assert t.changes(v).to_pandas()["_change_type"].tolist().count("insert") == 1
    assert t.changes(v).to_polars().height == 5
    con = t.changes(v).to_duckdb("c")
    assert con.execute("select count(*) from c where _change_type = 'update_postimage'").fetchone() == (2,)
    assert pa.table(t.changes(v)).num_rows == 5
    assert t.changes(v + 1).count() == 0  # a consumer that has read everything gets nothing, not an error
    stamp = t.snapshot(v).manifest.created_at
    assert t.changes(v).to_arrow().column("_commit_timestamp").to_pylist() == [stamp] * 5


def test_changes_by_time(keyed: castable.Table) -> None:
    t = keyed
    first = t.snapshot(1).manifest.created_at
    v2 = t.delete("id = 1").version
    v3 = t.delete("id = 2").version
    at2 = t.snapshot(v2).manifest.created_at
    assert t.changes(start_time=at2).to_arrow().column("_commit_version").to_pylist() == [v2, v3]
    assert t.changes(start_time=at2 + timedelta(microseconds=1)).count() == 1
    assert t.changes(start_time=first, end_time=at2.isoformat()).to_arrow().column("_commit_version").to_pylist() == [
        1,
        1,
        1,
        1,
        v2,
    ]
    after = t.snapshot(v3).manifest.created_at + timedelta(seconds=1)
    assert t.changes(start_time=after).count() == 0
    assert t.changes(start_time=first - timedelta(days=1), end_time=first - timedelta(hours=1)).count() == 0


def test_bad_ranges_and_columns_are_refused_and_change_nothing(keyed: castable.Table) -> None:
    t = keyed
    for _ in range(4):
        t.delete(f"id = {t.version}")
    t.expire(retain_versions=2)
    files = snapshot_of(t.store)
    oldest = t.version - 1
    with pytest.raises(
        castable.VersionNotFoundError, match=f"the oldest version whose changes can be read is {oldest + 1}"
    ):
        t.changes(oldest)
    with pytest.raises(castable.VersionNotFoundError, match="has expired"):
        t.changes(1, 2)
    assert t.changes(oldest + 1).count() == 1
    with pytest.raises(castable.InvalidInputError, match="is after end version"):
        t.changes(t.version, t.version - 1)
    with pytest.raises(castable.VersionNotFoundError, match="does not exist"):
        t.changes(t.version + 2)
    with pytest.raises(castable.VersionNotFoundError, match="does not exist"):
        t.changes(oldest + 1, t.version + 1)
    with pytest.raises(castable.InvalidInputError, match="unknown columns"):
        t.changes(oldest + 1, columns=["nope"])
    with pytest.raises(castable.InvalidInputError, match="non-negative"):
        t.changes(-1)
    with pytest.raises(castable.InvalidInputError, match="not both"):
        t.changes(1, start_time="2026-01-01T00:00:00Z")
    with pytest.raises(castable.InvalidPredicateError):
        t.changes(oldest + 1, filter="nope = 1")
    assert snapshot_of(t.store) == files


def test_a_table_column_named_as_a_change_column_is_refused(tmp_path: Path) -> None:
    t = castable.create_table(str(tmp_path / "t"), pa.schema([("_change_type", pa.string())]))
    t.append(pa.table({"_change_type": ["a"]}))
    with pytest.raises(castable.InvalidInputError, match="rename them"):
        t.changes(0)


def test_no_erased_value_after_a_purge(tmp_path: Path) -> None:
    """Every type of the corpus: after ``erase(..., purge=True)`` no change row of any range
    still readable holds an erased row, and a consumer's copy of the changes (a Parquet file)
    holds none of the erased values in any byte the trace search looks at."""
    corpus = typed_rows()[0]
    assert isinstance(corpus, pa.Table)
    t = castable.create_table(str(tmp_path / "t"), corpus.schema, primary_key="id")
    t.append(corpus)
    t.update({"s": "'changed'"}, where="id >= 6")
    t.append(corpus.slice(0, 2).set_column(0, "id", pa.array([100, 101], pa.int64())))
    victims = [4, 7]
    erased = t.to_arrow(filter=f"id IN ({victims[0]}, {victims[1]})")
    report = t.erase(f"id IN ({victims[0]}, {victims[1]})", purge=True)
    assert report.purge is not None and report.purge.verified
    t.delete("id = 0")
    t.upsert(corpus.slice(1, 1))
    first = report.version + 1
    with pytest.raises(castable.VersionNotFoundError):
        t.changes(report.version)
    got = t.changes(first).to_arrow()
    assert got.num_rows > 0 and not set(got.column("id").to_pylist()) & set(victims)
    out = tmp_path / "changes.parquet"
    pq.write_table(got.drop_columns(["_change_type", "_commit_version", "_commit_timestamp"]), out)
    with pq.ParquetFile(out) as f:
        wanted = needles(erased, f)
    data = out.read_bytes()
    assert wanted and find_traces(pa.BufferReader(data), len(data), wanted) == []


class Reads(LocalStore):
    """A local store that records the data files opened."""

    opened: list[str]

    def open_input(self, key: str, **kwargs: Any) -> Any:
        self.opened.append(key)
        return super().open_input(key, **kwargs)


def test_a_change_reads_what_changed_not_the_table(tmp_path: Path) -> None:
    """One version's changes in a table of many files read the files it touched, whatever the
    table's size: no other data file is opened."""
    t = castable.create_table(str(tmp_path / "t"), KEYED, primary_key="id", properties=FILES_ONLY)
    for start in range(0, 4_000, 100):
        t.append(rows(list(range(start, start + 100))))
    v = t.upsert(rows([150, 151, 3_999, 10_000], "u")).version
    store = Reads(str(tmp_path / "t"))
    store.opened = []
    reader = castable.Table.standalone(store, t.manifest)
    got = reader.changes(v).to_arrow()
    assert Counter(got.column("_change_type").to_pylist()) == {"update_preimage": 3, "update_postimage": 3, "insert": 1}
    data = {k for k in store.opened if k.startswith("data/")}
    assert len(data) == 3  # the two files the keys were in, and the upsert's own
    assert t.changes(1, 40).count() == 4_000  # the appends: each file once


def test_database_changes_are_numbered_by_database_version(tmp_path: Path) -> None:
    db = castable.create_database(str(tmp_path / "db"))
    a = db.create_table("a", KEYED, primary_key="id")
    b = db.create_table("b", KEYED, primary_key="id")
    a.append(rows([1]))
    b.append(rows([1]))
    with db.transaction() as tx:
        tx.table("a").upsert(rows([1], "t"))
        tx.table("b").delete("id = 1")
    db.refresh()
    got = db.changes("a", 0).to_arrow()
    assert list(
        zip(got.column("_change_type").to_pylist(), got.column("_commit_version").to_pylist(), strict=True)
    ) == [
        ("insert", 3),
        ("update_preimage", 5),
        ("update_postimage", 5),
    ]
    assert db.changes("b", 5).to_arrow().column("_change_type").to_pylist() == ["delete"]
    assert db.changes("b", 3, 3).count() == 0  # a database version that wrote only a
    assert db.changes("a", 6).count() == 0
    with pytest.raises(castable.InvalidInputError, match="is after"):
        db.changes("a", 4, 2)
    with pytest.raises(castable.TableNotFoundError):
        db.changes("c", 0)


def test_an_upserts_rows_are_read_by_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a large row group, the rows an upsert replaced are read from the pages whose bounds
    hold their keys (the page index), and come out as the whole row group's read would give."""
    n = 300_000
    props = {"write.row-group-size-bytes": 64 << 20, "write.target-file-size-bytes": 256 << 20}
    t = castable.create_table(str(tmp_path / "t"), KEYED, primary_key="id", properties=props)
    t.append(pa.table({"id": range(n), "name": [f"name-{i:012d}" for i in range(n)], "n": range(n)}, schema=KEYED))
    keys = [*range(150_000, 150_100), 7, n + 1]
    v = t.upsert(rows(keys, "u", -1)).version
    read_by_page: list[int] = []
    real = castable.read.snapshot.Snapshot.read_matching

    def spy(self: Any, *args: Any) -> Any:
        found = real(self, *args)
        read_by_page.append(0 if found is None else found[0].num_rows)
        return found

    monkeypatch.setattr(castable.read.snapshot.Snapshot, "read_matching", spy)
    got = t.changes(v).to_arrow().to_pylist()
    assert read_by_page and 0 < read_by_page[0] <= 2 * 20_000  # the two pages holding the keys
    pre = [(r["id"], r["name"], r["n"]) for r in got if r["_change_type"] == "update_preimage"]
    post = [(r["id"], r["name"], r["n"]) for r in got if r["_change_type"] == "update_postimage"]
    assert sorted(pre) == [(k, f"name-{k:012d}", k) for k in sorted(keys[:-1])]
    assert sorted(post) == [(k, f"u{k}", -1) for k in sorted(keys[:-1])]
    assert [r["id"] for r in got if r["_change_type"] == "insert"] == [n + 1]
