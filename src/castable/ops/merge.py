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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from castable.commit.conflicts import Access, Rows
from castable.commit.handle import Handle
from castable.commit.written import WriteResult
from castable.errors import InvalidInputError, SchemaMismatchError
from castable.format.schema import conform
from castable.inputs.batches import DataLike, arrow_pieces, from_pandas, is_dataframe
from castable.ops import writes
from castable.ops.delete import FilePlanner, plan_files
from castable.ops.replacement import Rewrite, Rewritten
from castable.read.expressions import Assignments, Value, parse_value
from castable.read.predicate import Constant, InList
from castable.read.scan import Scan
from castable.read.snapshot import Snapshot


@dataclass(frozen=True)
class _Clause:
    action: str
    """``update``, ``delete`` or ``insert``."""
    where: Value | None
    assignments: Assignments | None
    """The values set or inserted; ``None``: every column from the source row."""


_COUNTS = {"insert": "rows_inserted", "update": "rows_updated", "delete": "rows_deleted"}


@dataclass
class MergeOutcome:
    """What a merge's clauses decide for some source rows: the keys of the table rows they
    replace (updated or deleted), the rows to write (updated and inserted), the counts."""

    replaced: list[pa.Array] = field(default_factory=list)
    rows: list[pa.Table] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_COUNTS.values(), 0))

    def replaced_keys(self, key_type: pa.DataType) -> pa.Array:
        return pa.concat_arrays([k.cast(key_type) for k in self.replaced]) if self.replaced else pa.array([], key_type)

    def written(self, schema: pa.Schema) -> pa.Table:
        """The rows to write, as one table of ``schema``."""
        return pa.concat_tables([schema.empty_table(), *(conform(r, schema) for r in self.rows)])


@dataclass(frozen=True)
class MergeClauses:
    """A merge's clauses, decided on any rows given: picklable (by cloudpickle), so the rows of
    a merge can be decided where they are, in Spark tasks as here."""

    key: str
    aliases: tuple[str, str]
    """The source's alias and the table's."""
    schema: pa.Schema
    matched: tuple[_Clause, ...]
    unmatched: tuple[_Clause, ...]

    def decide(self, matched: pa.Table, unmatched: pa.Table) -> MergeOutcome:
        """The clauses on ``matched`` (each source row beside its table row, columns named
        ``<alias>.<column>``) and on ``unmatched`` (source rows without a table row)."""
        outcome = MergeOutcome()
        self._apply(self.matched, matched, _unprefixed(matched, self.aliases[1], self.schema), outcome)
        self._apply(self.unmatched, unmatched, None, outcome)
        return outcome

    @property
    def _source_key(self) -> str:
        return f"{self.aliases[0]}.{self.key}"

    def _apply(
        self, clauses: tuple[_Clause, ...], rows: pa.Table, targets: pa.Table | None, outcome: MergeOutcome
    ) -> None:
        """Each clause on the rows no earlier clause took, in order."""
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
                new = _unprefixed(chosen, self.aliases[0], self.schema)
            else:
                base = targets.filter(taken) if targets is not None else self._blank(chosen)
                new = clause.assignments.apply(chosen, base)
            outcome.rows.append(new)

    def _blank(self, rows: pa.Table) -> pa.Table:
        """Rows of the table's schema holding only the source rows' keys (the rest NULL)."""
        key = rows.column(self._source_key).cast(self.schema.field(self.key).type)
        columns = [key if f.name == self.key else pa.nulls(rows.num_rows, f.type) for f in self.schema]
        return pa.Table.from_arrays(columns, schema=self.schema.remove_metadata())


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
        keys = self.source_keys(self.source.column(key))
        self.source = self.source.set_column(self.source.schema.get_field_index(key), key, keys)
        self.aliases = (source_alias, target_alias)
        target = table.schema
        self._matched_rows = pa.schema(_prefixed(self.source.schema, source_alias) + _prefixed(target, target_alias))
        self._unmatched_rows = pa.schema(_prefixed(self.source.schema, source_alias))
        self._matched: list[_Clause] = []
        self._unmatched: list[_Clause] = []

    def source_keys(self, keys: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        """The source's keys as the table's key type, each once and none NULL, or an error
        saying which: what a merge can match rows by."""
        key, key_type = self.key, self.table.schema.field(self.key).type
        try:
            keys = keys.cast(key_type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise SchemaMismatchError(
                f"the source's key column {key!r} is {keys.type}, the table's {key_type}"
            ) from None
        if keys.null_count:
            raise SchemaMismatchError(f"the source's key column {key!r} holds NULLs")
        if len(pc.unique(keys)) != len(keys):
            raise InvalidInputError("the source holds a key more than once; a merge matches each key to one row")
        return keys

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

    @property
    def clauses(self) -> MergeClauses:
        return MergeClauses(self.key, self.aliases, self.table.schema, tuple(self._matched), tuple(self._unmatched))

    def execute(self, *, commit_id: str | None = None) -> WriteResult:
        """Decide every clause on the latest version and commit the outcome once; what it
        committed (its ``rows_inserted``, ``rows_updated`` and ``rows_deleted``)."""
        self._check_clauses()
        return writes.rewrite(self.table, commit_id, "merge", self._decide, self._access(self.source.column(self.key)))

    def commit(
        self,
        keys: pa.Array,
        produce: Callable[[Snapshot], Rewritten],
        *,
        commit_id: str | None = None,
        read_files: FilePlanner = plan_files,
    ) -> WriteResult:
        """Commit a merge whose source (of the schema given, with ``keys``) is decided and its
        rows written by ``produce`` on a version, elsewhere (``castable.spark.merge``: Spark
        tasks decide with :attr:`clauses`); ``read_files`` plans the replaced rows' delete."""
        self._check_clauses()
        access = self._access(keys)
        return writes.rewrite_files(self.table, commit_id, "merge", produce, access, read_files=read_files)

    def _check_clauses(self) -> None:
        if not self._matched and not self._unmatched:
            raise InvalidInputError("a merge needs at least one when_matched_* or when_not_matched_* clause")

    def _access(self, keys: pa.Array | pa.ChunkedArray) -> Access:
        return Access(keys=(Rows(InList(self.key, _array(keys)), by="merge"),))

    def _decide(self, snapshot: Snapshot) -> Rewrite:
        """The merge's outcome on ``snapshot``: rows replaced (by key) and rows written."""
        source_alias, target_alias = self.aliases
        keys = self.source.column(self.key).combine_chunks()
        everything = InList(self.key, keys)
        target = Scan(snapshot, None, everything).to_arrow()
        position = pc.index_in(target.column(self.key), value_set=keys)
        matched = _join(self.source.take(position), source_alias, target, target_alias)
        unmatched = _join(self.source.filter(pc.invert(pc.is_in(keys, target.column(self.key)))), source_alias)
        outcome = self.clauses.decide(matched, unmatched)
        replaced = outcome.replaced_keys(self.table.schema.field(self.key).type)
        rows = outcome.written(self.table.schema)
        return Rewrite(
            InList(self.key, replaced) if len(replaced) else Constant(False),
            rows,
            supersedes=everything,
            summary=dict(outcome.counts),
        )


def _array(keys: pa.Array | pa.ChunkedArray) -> pa.Array:
    return keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys


def _arrow(source: DataLike) -> pa.Table:
    """The merge source as one Arrow table (a reader keeps its schema even with no rows)."""
    if is_dataframe(source):
        return from_pandas(source)
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
