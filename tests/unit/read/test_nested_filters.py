"""Filters on fields inside nested columns (``payload.user.id = 7``): every operation that takes
a filter selects the rows pyarrow's own nested field reference selects; statistics never rule
such a unit out (castable keeps none for nested fields yet), and a bad path is a clear error."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers.nested import SCHEMA, rows

import castable
from castable.errors import InvalidPredicateError

ROWS = rows(list(range(60)))
FILTERS = {
    "payload.user.id = 70": pc.field("payload", "user", "id") == 70,
    "payload.user.id IN (10, 20, 999)": pc.field("payload", "user", "id").isin([10, 20, 999]),
    "payload.user.name LIKE 'u1%'": pc.match_like(pc.field("payload", "user", "name"), "u1%"),
    "payload.user IS NULL": pc.field("payload", "user").is_null(),
    "PAYLOAD.User.ID BETWEEN 100 AND 300": (pc.field("payload", "user", "id") >= 100)
    & (pc.field("payload", "user", "id") <= 300),
    'id < 30 AND "payload".user.id > 150': (pc.field("id") < 30) & (pc.field("payload", "user", "id") > 150),
}


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


@pytest.fixture
def table(tmp_path: Path) -> castable.Table:
    t = castable.create_table(str(tmp_path / "t"), SCHEMA, primary_key="id", properties={"write.inline.max-bytes": 0})
    t.append(ROWS.slice(0, 30))
    t.append(ROWS.slice(30))
    return t


@pytest.mark.parametrize("sql", list(FILTERS))
def test_a_scan_selects_the_rows_pyarrow_selects(table: castable.Table, sql: str) -> None:
    want = _ids(ROWS.filter(FILTERS[sql]))
    assert _ids(table.scan(["id"], filter=sql).to_arrow()) == want
    assert table.scan(filter=sql).count() == len(want)


def test_delete_update_and_erase_take_nested_filters(table: castable.Table) -> None:
    table.delete("payload.user.id > 500")
    doomed = set(_ids(ROWS.filter(pc.field("payload", "user", "id") > 500)))
    left = ROWS.filter(pa.array([i not in doomed for i in ROWS.column("id").to_pylist()]))
    assert _ids(table.scan(["id"]).to_arrow()) == _ids(left)
    table.update({"attrs": "NULL"}, where="payload.user.name = 'u7'")
    changed = table.scan(["id", "attrs"], filter="payload.user.name = 'u7'").to_arrow().to_pylist()
    assert changed == [{"id": 7, "attrs": None}]
    report = table.erase("payload.user.id = 10", purge=True)
    assert report.purge is not None and report.purge.verified
    assert table.scan(["id"], filter="payload.user.id = 10").count() == 0


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("payload.nope = 1", "payload has no field 'nope'"),
        ("payload.user = 1", "payload.user is struct<id: int64, name: string>: compare one of its fields"),
        ("id.x = 1", "id is int64, not a struct: it has no field 'x'"),
        ("payload.user.id = 'seven'", "is not a valid int64 value for column 'payload.user.id'"),
    ],
)
def test_a_path_that_is_not_a_field_is_a_clear_error(table: castable.Table, sql: str, message: str) -> None:
    with pytest.raises(InvalidPredicateError, match=message):
        table.scan(filter=sql)
