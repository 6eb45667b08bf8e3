"""Property-based tests: random sequences of append, delete, erase (with and without purge),
upsert, overwrite (whole and where), update, change feeds (by upsert and by merge), restore,
compact, expire, gc, schema changes (rename, reorder, widen, add and drop), scans and time travel
against an in-memory model. Every retained version must read back exactly as the model says,
through castable and through the Iceberg metadata it publishes (read by pyiceberg), and gc must
never delete what a retained version references. Every readable change range (a, b] applied to
version a gives version b exactly, each change row carries its commit's version and time, an
update of a key is a pre-image and post-image pair, compactions change nothing, and no change
row holds a value an erasure purged."""

from __future__ import annotations

import shutil
import tempfile
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from helpers.tables import EVENTS
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from pyiceberg.table import DataScan, StaticTable

import castable
from castable.format.evolution import field_id
from castable.iceberg import publish

Row = tuple[int, str | None, float | None]
CATEGORIES = ["a", "b", "c", None]


def rows_table(rows: list[Row]) -> pa.Table:
    return pa.table(
        {"id": [r[0] for r in rows], "category": [r[1] for r in rows], "value": [r[2] for r in rows]},
        schema=EVENTS,
    )


# Each predicate comes with the Python function the model applies (SQL NULL semantics).
def _predicates() -> st.SearchStrategy[tuple[str, object]]:
    ids = st.integers(0, 400)
    cat = st.sampled_from(["a", "b", "c"])
    return st.one_of(
        ids.map(lambda k: (f"id = {k}", lambda r: r[0] == k)),
        st.tuples(ids, ids).map(lambda t: (f"id BETWEEN {min(t)} AND {max(t)}", lambda r: min(t) <= r[0] <= max(t))),
        ids.map(lambda k: (f"id > {k}", lambda r: r[0] > k)),
        cat.map(lambda c: (f"category = '{c}'", lambda r: r[1] == c)),
        st.just(("category IS NULL", lambda r: r[1] is None)),
        st.floats(0, 200).map(lambda v: (f"value < {v!r}", lambda r: r[2] is not None and r[2] < v)),
        st.tuples(cat, ids).map(
            lambda t: (f"category = '{t[0]}' OR id < {t[1]}", lambda r: r[1] == t[0] or r[0] < t[1])
        ),
        st.lists(ids, min_size=1, max_size=5).map(
            lambda ks: (f"id IN ({', '.join(map(str, ks))})", lambda r: r[0] in ks)
        ),
        st.tuples(cat, ids).map(
            lambda t: (
                f"NOT (category = '{t[0]}') AND id <= {t[1]}",
                lambda r: r[1] is not None and r[1] != t[0] and r[0] <= t[1],
            )
        ),
    )


def _columns(got: pa.Table, schema: pa.Schema) -> list[pa.ChunkedArray]:
    """The model's columns (id, category, value) of rows read under ``schema``, the table's
    schema at the version read: found by their field ids (1, 2, 3), whatever their names and
    order then (results carry no ids), or by their first names in a table without ids."""
    names = {field_id(f): f.name for f in schema}
    if None in names:
        return got.select(EVENTS.names).columns
    return [got.column(names[i]) for i in (1, 2, 3)]


def _rows(got: pa.Table, schema: pa.Schema) -> list[Row]:
    """The model's columns as sorted rows."""
    return sorted(zip(*(c.to_pylist() for c in _columns(got, schema)), strict=True))


def _changed_rows(got: pa.Table, schema: pa.Schema) -> list[Row]:
    """The model's columns of change rows, in order."""
    return list(zip(*(c.to_pylist() for c in _columns(got, schema)), strict=True))


def _iceberg_rows(scan: DataScan) -> list[Row]:
    """The model's columns as an Iceberg reader reads them: found by their field ids (1, 2, 3)
    in the schema the scan projects, whatever their names and order at that snapshot."""
    got, named = scan.to_arrow(), {f.field_id: f.name for f in scan.projection().fields}
    return sorted(zip(*(got.column(named[i]).to_pylist() for i in (1, 2, 3)), strict=True))


class TableModel(RuleBasedStateMachine):
    """The table and a list of the expected rows at every version."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp())
        self.next_id = 0
        self.versions: list[dict[int, Row]] = []
        self.oldest = 0  # versions below this were expired
        self.erased: set[Row] = set()  # rows an erasure purged

    @initialize(
        target_file=st.sampled_from([2_000, 50_000]),
        row_group=st.sampled_from([600, 4_000]),
        format_version=st.sampled_from([1, 2]),
        inline=st.sampled_from([(0, 1), (65_536, 4_194_304), (2_000, 6_000)]),
    )
    def create(self, target_file: int, row_group: int, format_version: int, inline: tuple[int, int]) -> None:
        """``inline``: (write.inline.max-bytes, write.inline.max-total-bytes): off, the defaults,
        and small enough that some writes are inline and some not, and the cap is reached."""
        props = {
            "write.target-file-size-bytes": target_file,
            "write.row-group-size-bytes": row_group,
            "write.inline.max-bytes": inline[0],
            "write.inline.max-total-bytes": inline[1],
        }
        self.table = castable.create_table(
            str(self.dir / "t"), EVENTS, primary_key="id", properties=props, format_version=format_version
        )
        self.versions.append({})

    @precondition(lambda self: self.table.manifest.format_version == 1)
    @rule()
    def upgrade(self) -> None:
        self._commit(self.table.upgrade().version, dict(self.versions[-1]))
        assert self.table.manifest.format_version == 2

    @precondition(lambda self: self.table.manifest.format_version == 2)
    @rule(kind=st.sampled_from(["rename", "reorder", "widen", "extra"]))
    def evolve(self, kind: str) -> None:
        """A schema change and, but for widening, its undoing: the rows stay as the model has them,
        found through field ids in every version between."""
        state = dict(self.versions[-1])
        if kind == "rename":
            self._commit(self.table.alter().rename_column("value", "amount").commit().version, state)
            assert self.table.scan(filter="amount >= 0").count() == sum(r[2] is not None for r in state.values())
            self._commit(self.table.alter().rename_column("amount", "value").commit().version, state)
        elif kind == "reorder":
            self._commit(self.table.alter().reorder(["value", "id"]).commit().version, state)
            self._commit(self.table.alter().reorder(EVENTS.names).commit().version, state)
        elif kind == "widen":
            if self.table.schema.field("category").type == pa.string():
                self._commit(self.table.alter().widen_column("category", pa.large_string()).commit().version, state)
        else:
            default = len(self.versions)
            self._commit(self.table.alter().add_column("extra", pa.int64(), default=default).commit().version, state)
            assert set(self.table.scan(["extra"]).to_arrow().column("extra").to_pylist()) <= {default}
            self._commit(self.table.alter().drop_column("extra").commit().version, state)

    @rule(n=st.integers(1, 120), data=st.data())
    def append(self, n: int, data: st.DataObject) -> None:
        rows = [
            (
                i,
                data.draw(st.sampled_from(CATEGORIES)),
                data.draw(st.one_of(st.none(), st.floats(0, 200, allow_nan=False))),
            )
            for i in range(self.next_id, self.next_id + n)
        ]
        self.next_id += n
        version = self.table.append(rows_table(rows)).version
        state = dict(self.versions[-1])
        state.update({r[0]: r for r in rows})
        assert version == len(self.versions)
        self.versions.append(state)

    @rule(pred=_predicates())
    def delete(self, pred: tuple[str, object]) -> None:
        sql, fn = pred
        state = {k: r for k, r in self.versions[-1].items() if not fn(r)}  # type: ignore[operator]
        before = self.table.version
        version = self.table.delete(sql).version
        if state != self.versions[-1]:
            assert version == before + 1
        else:
            # A primary-key range delete reads no data, so it may commit even if it hits no row.
            assert version == before or self.table.manifest.commit.summary["rows_deleted"] is None
        if version == before + 1:
            self.versions.append(state)

    @rule(pred=_predicates(), mode=st.sampled_from(["auto", "rewrite"]), purge=st.booleans())
    def erase(self, pred: tuple[str, object], mode: str, purge: bool) -> None:
        sql, fn = pred
        state = {k: r for k, r in self.versions[-1].items() if not fn(r)}  # type: ignore[operator]
        before = self.table.version
        report = self.table.erase(sql, mode=mode, purge=purge)  # type: ignore[arg-type]
        if report.version != before:
            self.versions.append(state)
        else:
            assert state == self.versions[-1]
        assert castable.open_table(str(self.dir / "t")).scan(filter=sql).count() == 0
        if purge and report.version != before:
            self.oldest = report.version
            self.erased |= {r for v in self.versions for r in v.values() if fn(r)}  # type: ignore[operator]

    def _new_rows(self, ids: list[int], data: st.DataObject, category: st.SearchStrategy[str | None]) -> list[Row]:
        value = st.one_of(st.none(), st.floats(0, 200, allow_nan=False))
        return [(i, data.draw(category), data.draw(value)) for i in ids]

    def _commit(self, version: int, state: dict[int, Row]) -> None:
        assert version == len(self.versions)
        self.versions.append(state)

    @rule(data=st.data(), fresh=st.integers(0, 5))
    def upsert(self, data: st.DataObject, fresh: int) -> None:
        existing = sorted(self.versions[-1])
        replaced = data.draw(st.lists(st.sampled_from(existing), max_size=8, unique=True)) if existing else []
        ids = replaced + list(range(self.next_id, self.next_id + fresh))
        if not ids:
            return
        self.next_id += fresh
        rows = self._new_rows(ids, data, st.sampled_from(CATEGORIES))
        state = dict(self.versions[-1])
        state.update({r[0]: r for r in rows})
        self._commit(self.table.upsert(rows_table(rows)).version, state)

    @rule(data=st.data(), category=st.sampled_from(["a", "b", "c", None]), n=st.integers(0, 30))
    def overwrite(self, data: st.DataObject, category: str | None, n: int) -> None:
        """Replace-where on one category (``None``: the whole table) with ``n`` new rows."""
        ids = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        if category is None:
            rows = self._new_rows(ids, data, st.sampled_from(CATEGORIES))
            version = self.table.overwrite(rows_table(rows)).version
            self._commit(version, {r[0]: r for r in rows})
            return
        rows = self._new_rows(ids, data, st.just(category))
        state = {k: r for k, r in self.versions[-1].items() if r[1] != category}
        state.update({r[0]: r for r in rows})
        self._commit(self.table.overwrite(rows_table(rows), where=f"category = '{category}'").version, state)

    @rule(pred=_predicates(), category=st.sampled_from(CATEGORIES))
    def update(self, pred: tuple[str, object], category: str | None) -> None:
        sql, fn = pred
        new_category = "NULL" if category is None else f"'{category}'"
        changed = {
            k: (k, category, (r[2] or 0.0) + 1.0)
            for k, r in self.versions[-1].items()
            if fn(r)  # type: ignore[operator]
        }
        before = self.table.version
        version = self.table.update({"category": new_category, "value": "COALESCE(value, 0) + 1"}, where=sql).version
        if not changed:
            assert version == before
            return
        self._commit(version, {**self.versions[-1], **changed})

    @rule(data=st.data(), fresh=st.integers(0, 5), use_merge=st.booleans())
    def change_feed(self, data: st.DataObject, fresh: int, use_merge: bool) -> None:
        """A feed of changes (a key may repeat; ``d`` deletes), by upsert or by merge."""
        existing = sorted(self.versions[-1])
        known = data.draw(st.lists(st.sampled_from(existing), max_size=6)) if existing else []
        ids = known + list(range(self.next_id, self.next_id + fresh))
        if not ids:
            return
        self.next_id += fresh
        if use_merge:  # a merge takes each key once
            ids = list(dict.fromkeys(ids))
        ops = [data.draw(st.sampled_from(["c", "u", "d"])) for _ in ids]
        rows = self._new_rows(ids, data, st.sampled_from(CATEGORIES))
        state = dict(self.versions[-1])
        for row, op in zip(rows, ops, strict=True):
            if op == "d":
                state.pop(row[0], None)
            else:
                state[row[0]] = row
        feed = rows_table(rows).append_column("op", pa.array(ops))
        before = self.table.version
        if use_merge:
            merge = self.table.merge(feed).when_matched_delete(where="s.op = 'd'").when_matched_update_all()
            version = merge.when_not_matched_insert_all(where="s.op <> 'd'").execute().version
        else:
            version = self.table.upsert(feed, op_column="op", last_wins=True).version
        if version == before:
            assert state == self.versions[-1]
            return
        self._commit(version, state)

    @precondition(lambda self: len(self.versions) > 1)
    @rule(data=st.data())
    def restore(self, data: st.DataObject) -> None:
        v = data.draw(st.integers(self.oldest, len(self.versions) - 1))
        self._commit(self.table.restore(v).version, dict(self.versions[v]))
        self._canonical()

    def _canonical(self) -> None:
        """Undo what a restore brought back of an ``evolve`` half-way (the rules name the columns)."""
        names = self.table.schema.names
        if names == EVENTS.names:
            return
        kept = ["value" if n == "amount" else n for n in names if n != "extra"]
        change = self.table.alter()
        if "amount" in names:
            change.rename_column("amount", "value")
        if "extra" in names:
            change.drop_column("extra")
        if kept != EVENTS.names:
            change.reorder(EVENTS.names)
        self._commit(change.commit().version, dict(self.versions[-1]))

    @rule(min_file_size=st.sampled_from([1, 10_000, 10**9]), sort=st.booleans())
    def compact(self, min_file_size: int, sort: bool) -> None:
        before = self.table.version
        report = self.table.compact(min_file_size=min_file_size, sort_by="id" if sort else None)
        if report.version != before:
            assert report.version == before + 1
            self.versions.append(dict(self.versions[-1]))
            assert self.table.changes(report.version).count() == 0

    @rule(keep=st.integers(1, 4))
    def expire(self, keep: int) -> None:
        report = self.table.expire(retain_versions=keep)
        if report.versions_expired:
            self.oldest = report.versions_expired[-1] + 1
        assert self.oldest == max(0, len(self.versions) - keep) or not report.versions_expired

    @rule()
    def gc(self) -> None:
        self.table.gc(orphan_grace=timedelta(0))
        for v in range(self.oldest, len(self.versions)):
            self.check_version(v)

    def check_version(self, v: int) -> None:
        assert _rows(self.table.scan(version=v).to_arrow(), self.table.snapshot(v).schema) == sorted(
            self.versions[v].values()
        )

    @precondition(lambda self: len(self.versions) > 1)
    @rule(data=st.data())
    def read_changes(self, data: st.DataObject) -> None:
        """Changes of (a, b] applied to version a give version b; a range reaching an expired
        version is refused, naming the oldest readable start."""
        newest = len(self.versions) - 1
        first = 0 if self.oldest == 0 else self.oldest + 1
        if first > newest:
            return
        a = data.draw(st.integers(max(first - 1, 0), newest))
        b = data.draw(st.integers(a, newest))
        start = a + 1 if a or first else data.draw(st.sampled_from([0, 1]))
        if start > b:
            return
        got = self.table.changes(start, b).to_arrow()
        state = dict(self.versions[start - 1]) if start else {}
        times = {v: self.table.snapshot(v).manifest.created_at for v in range(start, b + 1)}
        kinds = got.column("_change_type").to_pylist()
        versions = got.column("_commit_version").to_pylist()
        assert versions == sorted(versions) and set(versions) <= set(times)
        assert [times[v] for v in versions] == got.column("_commit_timestamp").to_pylist()
        rows = _changed_rows(got, self.table.snapshot(b).schema)
        for i, (kind, row) in enumerate(zip(kinds, rows, strict=True)):
            if row in self.erased:  # only as a row some retained version holds again
                assert any(row in v.values() for v in self.versions[self.oldest :]), "a change row holds a purged row"
            if kind in ("delete", "update_preimage"):
                assert state.pop(row[0]) == row
            else:
                assert row[0] not in state
                state[row[0]] = row
            if kind == "update_preimage":
                assert kinds[i + 1] == "update_postimage" and rows[i + 1][0] == row[0]
        assert state == self.versions[b]
        if self.oldest > 0:
            with pytest.raises(castable.VersionNotFoundError, match=f"can be read is {self.oldest + 1}"):
                self.table.changes(self.oldest)

    @rule(pred=_predicates())
    def filtered_scan(self, pred: tuple[str, object]) -> None:
        sql, fn = pred
        expected = sorted(k for k, r in self.versions[-1].items() if fn(r))  # type: ignore[operator]
        got = self.table.scan(["id"], sql).to_arrow().column("id").to_pylist()
        assert sorted(got) == expected
        assert self.table.scan(filter=sql).count() == len(expected)

    @precondition(lambda self: len(self.versions) > 1)
    @rule(data=st.data())
    def time_travel(self, data: st.DataObject) -> None:
        self.check_version(data.draw(st.integers(self.oldest, len(self.versions) - 1)))
        if self.oldest:
            with pytest.raises(castable.VersionNotFoundError):
                self.table.scan(version=self.oldest - 1)

    @precondition(lambda self: self.table.manifest.format_version == 2)
    @rule(data=st.data())
    def read_through_iceberg(self, data: st.DataObject) -> None:
        """Published as Iceberg metadata (castable.iceberg), the newest version and a retained
        older one read in pyiceberg as the model says. A version that cannot be published (one
        holding a column default older files would need, or of format 1, which has no segments
        to name manifests after) has no snapshot; the newest always has one here."""
        static = StaticTable.from_metadata(publish(self.table))
        newest = len(self.versions) - 1
        assert _iceberg_rows(static.scan()) == sorted(self.versions[newest].values())
        older = data.draw(st.integers(self.oldest, newest))
        if older in {s.snapshot_id for s in static.metadata.snapshots}:
            assert _iceberg_rows(static.scan(snapshot_id=older)) == sorted(self.versions[older].values())

    @invariant()
    def latest_matches(self) -> None:
        if not self.versions:
            return
        reopened = castable.open_table(str(self.dir / "t"))
        assert _rows(reopened.scan().to_arrow(), reopened.schema) == sorted(self.versions[-1].values())

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


TableModel.TestCase.settings = settings(
    max_examples=150, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


TestTableModel = pytest.mark.slow(TableModel.TestCase)
