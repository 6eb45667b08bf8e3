"""Merge: a source of rows matched to the table by primary key, each match updated, deleted or
left, each unmatched row inserted or not, by clauses tried in order (as deltalake's merge).

    table.merge(changes, source_alias="s", target_alias="t")
        .when_matched_delete(where="s.op = 'd'")
        .when_matched_update(set={"qty": "t.qty + s.qty"})
        .when_not_matched_insert_all(where="s.op != 'd'")
        .execute()

Expressions name the source's columns ``s.<name>`` and the table's ``t.<name>`` (an unqualified
name that only one side has needs no prefix). Only the table rows with the source's keys are
read; the changed ones get a key-list tombstone and their new rows are appended with the
inserts, in one commit. A concurrent commit that touched a matched row, or added a row with one
of the source's keys, makes the merge read and decide again on the newer version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from castable import writes
from castable.conflicts import Access, Rows
from castable.errors import InvalidInputError, SchemaMismatchError
from castable.expressions import Assignments, Value, parse_value
from castable.handle import Handle
from castable.inputs import DataLike, arrow_pieces, is_dataframe
from castable.predicate import Constant, InList
from castable.replacement import Rewrite
from castable.scan import Scan
from castable.schema import conform
from castable.snapshot import Snapshot


@dataclass(frozen=True)
class MergeResult:
    """What a merge committed (``version`` is the table's version when nothing changed)."""

    version: int
    rows_inserted: int
    rows_updated: int
    rows_deleted: int


@dataclass(frozen=True)
class _Clause:
    action: str
    """``update``, ``delete`` or ``insert``."""
    where: Value | None
    assignments: Assignments | None
    """The values set or inserted; ``None``: every column from the source row."""


_COUNTS = {"insert": "rows_inserted", "update": "rows_updated", "delete": "rows_deleted"}


@dataclass
class _Outcome:
    """A merge decided on one version."""

    replaced: list[pa.Array] = field(default_factory=list)
    rows: list[pa.Table] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_COUNTS.values(), 0))


class MergeBuilder:
    """Clauses of a merge of ``source`` into ``table``; nothing happens until :meth:`execute`."""

    def __init__(self, table: Handle, source: DataLike, *, source_alias: str = "s", target_alias: str = "t") -> None:
        key = table.primary_key
        if key is None:
            raise InvalidInputError(f"merge matches rows by primary key, and {table.uri} has none")
        if not source_alias or not target_alias or source_alias == target_alias:
            raise InvalidInputError("source_alias and target_alias must be two different names")
        self.table = table
        self.key = key
        self.source = _arrow(source)
        if key not in self.source.schema.names:
            raise SchemaMismatchError(f"the source has no primary key column {key!r} to match rows by")
        keys = self.source.column(key)
        key_type = table.schema.field(key).type
        try:
            keys = keys.cast(key_type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise SchemaMismatchError(
                f"the source's key column {key!r} is {keys.type}, the table's {key_type}"
            ) from None
        self.source = self.source.set_column(self.source.schema.get_field_index(key), key, keys)
        if keys.null_count:
            raise SchemaMismatchError(f"the source's key column {key!r} holds NULLs")
        if len(pc.unique(keys)) != len(keys):
            raise InvalidInputError("the source holds a key more than once; a merge matches each key to one row")
        self.aliases = (source_alias, target_alias)
        target = table.schema
        self._matched_rows = pa.schema(_prefixed(self.source.schema, source_alias) + _prefixed(target, target_alias))
        self._unmatched_rows = pa.schema(_prefixed(self.source.schema, source_alias))
        self._matched: list[_Clause] = []
        self._unmatched: list[_Clause] = []

    # ------------------------------------------------------------------ clauses

    def when_matched_update(self, set: Mapping[str, object], where: object = None) -> MergeBuilder:
        """Set columns of a matched table row (``t.qty + s.qty``...)."""
        values = Assignments.parse(set, self.table.schema, rows=self._matched_rows, key=self.key)
        return self._add(self._matched, "update", where, values)

    def when_matched_update_all(self, where: object = None) -> MergeBuilder:
        """Replace a matched table row by the source row (which must hold every column)."""
        self._check_source_columns()
        return self._add(self._matched, "update", where, None)

    def when_matched_delete(self, where: object = None) -> MergeBuilder:
        """Delete a matched table row."""
        return self._add(self._matched, "delete", where, None)

    def when_not_matched_insert(self, values: Mapping[str, object], where: object = None) -> MergeBuilder:
        """Insert a row computed from an unmatched source row: its key is the source row's, the
        columns ``values`` does not name are NULL."""
        values = dict(values)
        given = values.pop(self.key, None)
        if given is not None and str(given).strip().lower() not in (self.key.lower(), self._source_key.lower()):
            raise InvalidInputError(
                f"an inserted row's key is the source row's: set {self.key!r} to {self._source_key}"
            )
        assignments = Assignments.parse(values, self.table.schema, rows=self._unmatched_rows, key=self.key)
        return self._add(self._unmatched, "insert", where, assignments)

    def when_not_matched_insert_all(self, where: object = None) -> MergeBuilder:
        """Insert an unmatched source row as it is (it must hold every column)."""
        self._check_source_columns()
        return self._add(self._unmatched, "insert", where, None)

    def _add(self, clauses: list[_Clause], action: str, where: object, values: Assignments | None) -> MergeBuilder:
        rows = self._matched_rows if clauses is self._matched else self._unmatched_rows
        condition = None if where is None else parse_value(where, rows, what=f"the condition of a {action} clause")
        if condition is not None and not pa.types.is_boolean(condition.type):
            raise InvalidInputError(f"the condition {condition.text!r} gives {condition.type}, not true or false")
        clauses.append(_Clause(action, condition, values))
        return self

    @property
    def _source_key(self) -> str:
        return f"{self.aliases[0]}.{self.key}"

    def _check_source_columns(self) -> None:
        missing = [n for n in self.table.schema.names if n not in self.source.schema.names]
        if missing:
            raise SchemaMismatchError(f"the source lacks columns {missing}, so its rows cannot replace or be rows")

    # ---------------------------------------------------------------- execution

    def execute(self, *, commit_id: str | None = None) -> MergeResult:
        """Decide every clause on the latest version and commit the outcome once."""
        if not self._matched and not self._unmatched:
            raise InvalidInputError("a merge needs at least one when_matched_* or when_not_matched_* clause")
        keys = InList(self.key, self.source.column(self.key).combine_chunks())
        access = Access(keys=(Rows(keys, by="merge"),))
        version = writes.rewrite(self.table, "merge", self._decide, access, commit_id=commit_id)
        if version is None:
            return MergeResult(self.table.version, 0, 0, 0)
        summary = self.table.manifest_at(version).commit.summary
        return MergeResult(version, *(int(summary.get(name, 0)) for name in _COUNTS.values()))

    def _decide(self, snapshot: Snapshot) -> Rewrite:
        """The merge's outcome on ``snapshot``: rows replaced (by key) and rows written."""
        source_alias, target_alias = self.aliases
        keys = self.source.column(self.key).combine_chunks()
        everything = InList(self.key, keys)
        target = Scan(snapshot, None, everything).to_arrow()
        position = pc.index_in(target.column(self.key), value_set=keys)
        matched = _join(self.source.take(position), source_alias, target, target_alias)
        unmatched = _join(self.source.filter(pc.invert(pc.is_in(keys, target.column(self.key)))), source_alias)
        outcome = _Outcome()
        self._apply(self._matched, matched, _unprefixed(matched, target_alias, self.table.schema), outcome)
        self._apply(self._unmatched, unmatched, None, outcome)
        schema = self.table.schema
        rows = pa.concat_tables([schema.empty_table(), *(conform(r, schema) for r in outcome.rows)])
        replaced = InList(self.key, pa.concat_arrays(outcome.replaced)) if outcome.replaced else Constant(False)
        return Rewrite(replaced, rows, supersedes=everything, summary=dict(outcome.counts))

    def _apply(self, clauses: list[_Clause], rows: pa.Table, targets: pa.Table | None, outcome: _Outcome) -> None:
        """Each clause on the rows no earlier clause took, in order."""
        source_alias = self.aliases[0]
        left = pa.chunked_array([pa.repeat(True, rows.num_rows)])
        for clause in clauses:
            taken = left if clause.where is None else pc.and_(left, clause.where.mask(rows))
            left = pc.and_(left, pc.invert(taken))
            chosen = rows.filter(taken)
            if not chosen.num_rows:
                continue
            outcome.counts[_COUNTS[clause.action]] += chosen.num_rows
            if targets is not None:
                outcome.replaced.append(chosen.column(self._source_key).combine_chunks())
            if clause.action == "delete":
                continue
            if clause.assignments is None:
                new = _unprefixed(chosen, source_alias, self.table.schema)
            else:
                base = targets.filter(taken) if targets is not None else self._blank(chosen)
                new = clause.assignments.apply(chosen, base)
            outcome.rows.append(new)

    def _blank(self, rows: pa.Table) -> pa.Table:
        """Rows of the table's schema holding only the source rows' keys (the rest NULL)."""
        schema = self.table.schema
        key = rows.column(self._source_key).cast(schema.field(self.key).type)
        columns = [key if f.name == self.key else pa.nulls(rows.num_rows, f.type) for f in schema]
        return pa.Table.from_arrays(columns, schema=schema.remove_metadata())


def _arrow(source: DataLike) -> pa.Table:
    """The merge source as one Arrow table (a reader keeps its schema even with no rows)."""
    if is_dataframe(source):
        return pa.Table.from_pandas(source, preserve_index=False)
    if isinstance(source, pa.RecordBatchReader):
        return source.read_all()
    pieces = [pa.table(piece) for piece in arrow_pieces(source)]
    if not pieces:
        raise InvalidInputError("the merge source holds no rows")
    return pa.concat_tables(pieces)


def _prefixed(schema: pa.Schema, alias: str) -> list[pa.Field]:
    return [f.with_name(f"{alias}.{f.name}").with_nullable(True) for f in schema]


def _join(left: pa.Table, left_alias: str, right: pa.Table | None = None, right_alias: str = "") -> pa.Table:
    """Row-aligned tables side by side, their columns named ``<alias>.<column>``."""
    columns = {f"{left_alias}.{n}": left.column(n) for n in left.schema.names}
    if right is not None:
        columns |= {f"{right_alias}.{n}": right.column(n) for n in right.schema.names}
    return pa.table(columns)


def _unprefixed(rows: pa.Table, alias: str, schema: pa.Schema) -> pa.Table:
    """The ``<alias>.<column>`` columns of ``rows`` as a table of ``schema``."""
    return pa.table({f.name: rows.column(f"{alias}.{f.name}") for f in schema})
