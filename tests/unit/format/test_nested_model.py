"""Fields inside a struct column evolving at random against a model (docs/format.md section
4.1): fields added, renamed, dropped, added again under an old name, widened, with appends,
deletes, inline rows and compaction between; at every step castable reads every version as the
model has it, the fields' values following their ids, and pyiceberg reads the newest through
the published Iceberg metadata likewise."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import castable
from castable.format.layout import ICEBERG_PREFIX
from castable.iceberg import publish

NAMES = ["a", "b", "c", "d"]


@dataclass
class Field:
    """A field of the model's struct: its id (the model's own count), name and type."""

    fid: int
    name: str
    type: pa.DataType


@dataclass
class Version:
    fields: list[Field]
    rows: dict[int, dict[int, Any] | None] = field(default_factory=dict)
    """Each row's struct, its values by field id (``None``: a NULL struct)."""

    def expected(self) -> list[dict[str, Any]]:
        out = []
        for rid in sorted(self.rows):
            values = self.rows[rid]
            p = None if values is None else {f.name: values.get(f.fid) for f in self.fields}
            out.append({"id": rid, "p": p})
        return out


class NestedModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp())
        first = [Field(1, "a", pa.int32()), Field(2, "b", pa.string())]
        self.next_fid = 3
        schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("p", self._struct(first))])
        self.table = castable.create_table(
            str(self.dir / "t"), schema, primary_key="id", properties={"write.inline.max-bytes": 600}
        )
        self.versions = [Version(first)]
        self.next_row = 0

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    @staticmethod
    def _struct(fields: list[Field]) -> pa.DataType:
        return pa.struct([(f.name, f.type) for f in fields])

    def _commit(self, fields: list[Field], rows: dict[int, dict[int, Any] | None]) -> None:
        self.versions.append(Version(fields, rows))
        assert self.table.version == len(self.versions) - 1

    @property
    def now(self) -> Version:
        return self.versions[-1]

    @rule(n=st.integers(1, 40), nulls=st.booleans())
    def append(self, n: int, nulls: bool) -> None:
        fields = self.now.fields
        new: dict[int, dict[int, Any] | None] = {}
        for i in range(self.next_row, self.next_row + n):
            if nulls and i % 4 == 0:
                new[i] = None
                continue
            new[i] = {f.fid: (i if pa.types.is_integer(f.type) else f"s{i}") if i % 3 else None for f in fields}
        self.next_row += n
        data = [{"id": i, "p": None if v is None else {f.name: v[f.fid] for f in fields}} for i, v in new.items()]
        self.table.append(pa.Table.from_pylist(data, schema=self._arrow_schema()))
        self._commit(fields, {**self.now.rows, **new})

    def _arrow_schema(self) -> pa.Schema:
        return pa.schema([pa.field("id", pa.int64(), nullable=False), ("p", self._struct(self.now.fields))])

    @rule(name=st.sampled_from(NAMES), kind=st.sampled_from([pa.int32(), pa.string()]))
    def add(self, name: str, kind: pa.DataType) -> None:
        if name in [f.name for f in self.now.fields]:
            return
        self.table.alter().add_column(("p", name), kind).commit()
        self._commit([*self.now.fields, Field(self.next_fid, name, kind)], dict(self.now.rows))
        self.next_fid += 1

    @rule(data=st.data())
    def rename(self, data: st.DataObject) -> None:
        fields = self.now.fields
        free = [n for n in NAMES if n not in [f.name for f in fields]]
        if not free:
            return
        old = data.draw(st.sampled_from(fields))
        new = data.draw(st.sampled_from(free))
        self.table.alter().rename_column(("p", old.name), new).commit()
        self._commit([Field(f.fid, new, f.type) if f is old else f for f in fields], dict(self.now.rows))

    @precondition(lambda self: len(self.now.fields) > 1)
    @rule(data=st.data())
    def drop(self, data: st.DataObject) -> None:
        doomed = data.draw(st.sampled_from(self.now.fields))
        self.table.alter().drop_column(("p", doomed.name)).commit()
        self._commit([f for f in self.now.fields if f is not doomed], dict(self.now.rows))

    @precondition(lambda self: len(self.now.fields) > 1)
    @rule(data=st.data())
    def drop_and_add_again(self, data: st.DataObject) -> None:
        """A field dropped, then one added under its name and type: the struct's type is the
        same by names and types, and only the ids tell the new field from the old."""
        old = data.draw(st.sampled_from(self.now.fields))
        self.drop(_Given(old))
        self.table.alter().add_column(("p", old.name), old.type).commit()
        self._commit([*self.now.fields, Field(self.next_fid, old.name, old.type)], dict(self.now.rows))
        self.next_fid += 1

    @precondition(lambda self: any(f.type == pa.int32() for f in self.now.fields))
    @rule(data=st.data())
    def widen(self, data: st.DataObject) -> None:
        narrow = data.draw(st.sampled_from([f for f in self.now.fields if f.type == pa.int32()]))
        self.table.alter().widen_column(("p", narrow.name), pa.int64()).commit()
        fields = [Field(f.fid, f.name, pa.int64()) if f is narrow else f for f in self.now.fields]
        self._commit(fields, dict(self.now.rows))

    @precondition(lambda self: len(self.now.fields) > 1)
    @rule(data=st.data())
    def reorder(self, data: st.DataObject) -> None:
        """The struct's fields put in another order: files are read by id, whatever their order."""
        order = data.draw(st.permutations(self.now.fields))
        self.table.alter().reorder([f.name for f in order], inside="p").commit()
        self._commit(list(order), dict(self.now.rows))

    @precondition(lambda self: bool(self.now.rows))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(sorted(self.now.rows)))
        self.table.delete(f"id = {rid}")
        self._commit(self.now.fields, {k: v for k, v in self.now.rows.items() if k != rid})

    @precondition(lambda self: bool(self.now.rows))
    @rule()
    def compact(self) -> None:
        before = self.table.version
        self.table.compact(min_file_size=1 << 30)
        if self.table.version != before:
            self._commit(self.now.fields, dict(self.now.rows))

    @invariant()
    def every_version_reads_as_the_model(self) -> None:
        for v, want in enumerate(self.versions):
            got = self.table.scan(version=v).to_arrow().sort_by("id").to_pylist()
            assert got == want.expected(), f"version {v}"

    @invariant()
    def a_filter_on_a_field_inside_counts_as_the_model(self) -> None:
        """Pruned by the fields' statistics (kept by id through every change), never wrongly."""
        numeric = [f for f in self.now.fields if pa.types.is_integer(f.type)]
        if not numeric:
            return
        f = numeric[0]
        cut = self.next_row // 2
        held = [values.get(f.fid) for values in self.now.rows.values() if values is not None]
        want = sum(1 for v in held if v is not None and v >= cut)
        assert self.table.count(filter=f'p."{f.name}" >= {cut}') == want

    def check_iceberg(self) -> None:
        from pyiceberg.table import StaticTable

        publish(self.table)
        location = f"{self.table.uri}/{ICEBERG_PREFIX}v{self.table.version}.metadata.json"
        got = StaticTable.from_metadata(location).scan().to_arrow().sort_by("id").to_pylist()
        assert got == self.now.expected()

    @invariant()
    def pyiceberg_reads_the_newest_as_the_model(self) -> None:
        if self.table.version % 3 == 0:
            self.check_iceberg()


class _Given:
    """A draw already made: ``drop`` called with its field."""

    def __init__(self, value: Field) -> None:
        self.value = value

    def draw(self, _: object) -> Field:
        return self.value


NestedModel.TestCase.settings = settings(max_examples=25, stateful_step_count=14, deadline=None)
TestNestedModel = NestedModel.TestCase
