"""Schema evolution: column identity by field id, the changes a table allows, and resolving a
data file's columns against a later schema (docs/format.md section 4.1).

Every column has a stable id, kept in the manifest schema's field metadata as
``PARQUET:field_id`` (pyarrow writes it into Parquet files as the field id) with the names
the column has had and the versions they took effect (``castable:names``). A file's column
is found by id when the file carries castable's ids; otherwise (files written before ids, or
registered from another engine) by the name the column had at the version the file was added.
So a rename touches no data, and a dropped-then-re-added name is a new column whose values
never come from the old one.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pyarrow as pa

from castable.errors import InvalidInputError, SchemaMismatchError, columns_hint
from castable.format.conversions import widens
from castable.format.nested import FIELD_ID as FIELD_ID  # re-exported: the key of every id
from castable.format.nested import children, nested_ids, rebuilt, with_nested_ids, without_nested_metadata
from castable.format.nested import field_id as field_id  # re-exported: columns' ids are read as nested fields' are
from castable.format.stats import NESTED, decode_value, encode_value, stat_fields, supports_stats

NAMES = b"castable:names"
DEFAULT = b"castable:default"
LAST_ID = b"castable:last_column_id"


def check_names(fields: Sequence[pa.Field]) -> None:
    """``InvalidInputError`` if a name of ``fields`` (or of a field inside them) holds a NUL: any
    other text is a name, and NUL joins the names of a nested field's statistics key."""
    for f in fields:
        if NESTED in f.name:
            raise InvalidInputError(f"a column or field name cannot hold a NUL character: {f.name!r}")
        check_names(children(f.type))


def check_ids(schema: pa.Schema) -> None:
    """``ValueError`` unless the schema's evolution metadata is well formed: ids on every column
    or none, unique, with readable name histories ending in the column's name, and defaults
    of the column's type."""
    ids = [field_id(f) for f in schema]
    if None in ids and any(i is not None for i in ids):
        raise ValueError("some columns have field ids and some do not")
    if len(set(ids)) != len(ids) and None not in ids:
        raise ValueError(f"field ids repeat: {ids}")
    for f in schema:
        history = names_of(f)
        if not history or history[-1][0] != f.name:
            raise ValueError(f"column {f.name!r}: its name history does not end in its name")
        default_of(f)
    if has_ids(schema):
        for f in schema:
            inner = nested_ids(f.type)
            if None in inner and any(i is not None for i in inner):
                raise ValueError(f"column {f.name!r}: some of its nested fields have ids and some do not")
        given = [i for f in schema for i in (field_id(f), *nested_ids(f.type)) if i is not None]
        if len(set(given)) != len(given):
            raise ValueError(f"field ids repeat: {sorted(given)}")
        if last_column_id(schema) < max(given):
            raise ValueError("the last column id is below a column's id")


def same_schema(a: pa.Schema, b: pa.Schema) -> bool:
    """Whether two schemas are the same version of a table's schema: ids and names history too."""
    return a is b or a.equals(b, check_metadata=True)


def has_ids(schema: pa.Schema) -> bool:
    return len(schema) > 0 and all(field_id(f) is not None for f in schema)


def names_of(f: pa.Field) -> list[tuple[str, int]]:
    """The names a column has had, each with the version it took effect, oldest first."""
    raw = (f.metadata or {}).get(NAMES)
    return [(f.name, 0)] if raw is None else [(str(n), int(v)) for n, v in json.loads(raw)]


def last_column_id(schema: pa.Schema) -> int:
    """The highest id ever given in this table, nested fields' included (dropped columns' ids are
    never reused)."""
    raw = (schema.metadata or {}).get(LAST_ID)
    ids = [i for f in schema for i in (field_id(f), *nested_ids(f.type)) if i is not None]
    return max([int(raw) if raw is not None else 0, *ids])


def default_of(f: pa.Field) -> pa.Scalar | None:
    """The value old rows (in files written before the column existed) read as; NULL if ``None``."""
    raw = (f.metadata or {}).get(DEFAULT)
    return None if raw is None else decode_value(json.loads(raw), f.type)


def _field(
    name: str, t: pa.DataType, nullable: bool, fid: int, names: list[tuple[str, int]], default: bytes | None = None
) -> pa.Field:
    metadata = {FIELD_ID: str(fid).encode(), NAMES: json.dumps(names).encode()}
    if default is not None:
        metadata[DEFAULT] = default
    return pa.field(name, t, nullable=nullable, metadata=metadata)


def _with_last(fields: Sequence[pa.Field], last: int) -> pa.Schema:
    return pa.schema(fields, metadata={LAST_ID: str(last).encode()})


def with_ids(schema: pa.Schema, version: int = 0) -> pa.Schema:
    """``schema`` with an id for each column that has none (1, 2, ... in order for a new table),
    then for every field inside its nested columns (:mod:`castable.format.nested`, Iceberg's
    order); a schema whose columns have ids already is returned as it is."""
    if has_ids(schema):
        return schema
    last = last_column_id(schema)
    ids = []
    for f in schema:
        fid = field_id(f)
        if fid is None:
            last += 1
            fid = last
        ids.append(fid)
    counter = _Counter(last)
    fields = [
        _field(f.name, with_nested_ids(without_nested_metadata(f.type), counter), f.nullable, fid, [(f.name, version)])
        for f, fid in zip(schema, ids, strict=True)
    ]
    return _with_last(fields, counter.last)


def with_all_ids(schema: pa.Schema) -> pa.Schema:
    """:func:`with_ids`, then an id for every nested field still without one, after the last
    id given: a new table's schema given with its columns' ids only, or the schema a change
    makes of one whose nested columns predate their fields' ids (they have them from that
    version on; earlier versions keep none, so no version's ids ever change)."""
    named = with_ids(schema)
    counter = _Counter(last_column_id(named))
    fields = [f.with_type(with_nested_ids(f.type, counter)) for f in named]
    return named if counter.last == last_column_id(named) else _with_last(fields, counter.last)


class _Counter:
    """The ids given after ``last``, one a call: nested fields' ids for :func:`with_nested_ids`."""

    def __init__(self, last: int) -> None:
        self.last = last

    def __call__(self) -> int:
        self.last += 1
        return self.last


def file_schema(schema: pa.Schema) -> pa.Schema:
    """The table's columns with their field ids only (the schema of inline rows)."""
    return pa.schema(
        [
            pa.field(f.name, f.type, f.nullable, None if (i := field_id(f)) is None else {FIELD_ID: str(i).encode()})
            for f in schema
        ]
    )


def stored_type(t: pa.DataType) -> pa.DataType:
    """The type a Parquet file castable writes holds a column of type ``t`` in: a timestamp of
    seconds or milliseconds as microseconds, the unit of Iceberg's and Delta's timestamps
    (iceberg-rust refuses others), and an instant in any zone as one in UTC (Parquet keeps
    instants in UTC whatever the zone; the zone Arrow's schema in the file would name stops
    pyiceberg); reads cast it back, exactly. The fields of a nested type likewise. Any other
    type as itself."""
    inner = children(t)
    if inner:
        stored = [c.with_type(stored_type(c.type)) for c in inner]
        same = all(s.type.equals(c.type) for s, c in zip(stored, inner, strict=True))
        return t if same else rebuilt(t, stored)
    if pa.types.is_timestamp(t) and (t.unit in ("s", "ms") or t.tz not in (None, "UTC")):
        return pa.timestamp("us" if t.unit in ("s", "ms") else t.unit, None if t.tz is None else "UTC")
    return t


def parquet_schema(schema: pa.Schema) -> pa.Schema:
    """The schema castable writes Parquet files with: :func:`file_schema`, each type as
    :func:`stored_type` gives it."""
    return pa.schema([f.with_type(stored_type(f.type)) for f in file_schema(schema)])


def to_stored(rows: pa.Table, stored: pa.Schema) -> pa.Table:
    """``rows`` as ``stored`` (their :func:`parquet_schema`); a timestamp that microseconds
    cannot hold is refused."""
    try:
        return rows.cast(stored)
    except pa.ArrowInvalid as e:
        raise InvalidInputError(
            f"{e}: castable stores timestamps in microseconds, as Iceberg and Delta do "
            "(years -290308 to 294247), and cannot write this value"
        ) from None


def check_key_columns(schema: pa.Schema, keys: Sequence[str]) -> None:
    """That ``keys`` can be a primary key of ``schema``: one column, of a type whose values
    castable orders and compares exactly (an integer, string, date, timestamp or decimal)."""
    if len(keys) > 1:
        raise InvalidInputError("castable supports a single-column primary key")
    for k in keys:
        if k not in schema.names:
            raise InvalidInputError(f"primary key column {k!r} is not in the schema {columns_hint(k, schema.names)}")
        if not supports_stats(schema.field(k).type) or pa.types.is_floating(schema.field(k).type):
            raise InvalidInputError(f"primary key column {k!r} must be an integer, string, date, timestamp or decimal")


R = TypeVar("R")
Path = str | tuple[str, ...]
"""A column's name, or a tuple: a column's name, then the names of fields inside it (a list's
element is ``element``, a map's key and value ``key`` and ``value``)."""


@dataclass
class SchemaUpdate(Generic[R]):
    """A set of schema changes, applied in one commit (``Table.alter``).

    ``with table.alter() as change: change.add_column("note", pa.string())`` commits on exit;
    each method returns the update, so calls chain, then :meth:`commit`, which returns what the
    table's commit of it returns (``R``: a :class:`~castable.commit.written.WriteResult`)."""

    _commit: Callable[[SchemaUpdate[R]], R] | None = field(default=None, repr=False)
    changes: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)

    def add_column(self, name: Path, type: pa.DataType, *, default: object = None) -> SchemaUpdate[R]:
        """A new nullable column at the end (a tuple path: a field at the end of a struct inside a
        column, ``("payload", "note")``); rows written before it read as ``default`` (or NULL;
        top-level columns only)."""
        self.changes.append(("add", (name, type, default)))
        return self

    def rename_column(self, name: Path, new_name: str) -> SchemaUpdate[R]:
        """Rename a column, or the field at a tuple path inside one (``("payload", "user")``)."""
        self.changes.append(("rename", (name, new_name)))
        return self

    def drop_column(self, name: Path) -> SchemaUpdate[R]:
        """Drop a column, or the field at a tuple path inside one (a struct keeps one field)."""
        self.changes.append(("drop", (name,)))
        return self

    def widen_column(self, name: Path, type: pa.DataType) -> SchemaUpdate[R]:
        """Change a column's type (or a field's, at a tuple path) to one that holds every old
        value exactly (see :func:`widens`)."""
        self.changes.append(("widen", (name, type)))
        return self

    def make_nullable(self, name: Path) -> SchemaUpdate[R]:
        """Let a column (or a field, at a tuple path) hold NULLs."""
        self.changes.append(("nullable", (name,)))
        return self

    def reorder(self, names: Sequence[str], *, inside: Path | None = None) -> SchemaUpdate[R]:
        """Put the columns in this order (with ``inside``, the fields of the struct at that path:
        ``("payload", "user")``); those not named keep their order, after these. Files are read
        by field id, so nothing is rewritten."""
        if inside is None:
            self.changes.append(("reorder", (tuple(names),)))
        else:
            self.changes.append(("reorder_in", ((inside,) if isinstance(inside, str) else tuple(inside), tuple(names))))
        return self

    def set_primary_key(self, columns: str | Sequence[str]) -> SchemaUpdate[R]:
        """Make ``columns`` the primary key (in place of the table's, if it has one). The commit
        checks that no live row has a NULL key (nor, where the table enforces its key, a key
        twice); nothing is rewritten."""
        self.changes.append(("key", ((columns,) if isinstance(columns, str) else tuple(columns),)))
        return self

    def drop_primary_key(self) -> SchemaUpdate[R]:
        """The table has no primary key any more (its column stays)."""
        self.changes.append(("unkey", ()))
        return self

    def describe(self) -> list[str]:
        """The changes in words, as the commit summary records them."""
        words = {"add": "add {0} {1}", "rename": "rename {0} to {1}", "drop": "drop {0}", "widen": "widen {0} to {1}"}
        words |= {"nullable": "make {0} nullable", "reorder": "reorder {0}", "reorder_in": "reorder {0} as {1}"}
        words |= {"key": "set primary key {0}", "unkey": "drop the primary key"}
        return [
            words[kind].format(
                *(_shown(a, "reorder" if kind == "reorder_in" and i else kind) for i, a in enumerate(args))
            )
            for kind, args in self.changes
        ]

    def commit(self) -> R:
        """Commit the changes as one version; what the commit returns."""
        if self._commit is None:
            raise InvalidInputError("this schema update is not bound to a table")
        return self._commit(self)

    def __enter__(self) -> SchemaUpdate[R]:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            self.commit()

    def apply(self, schema: pa.Schema, primary_key: tuple[str, ...], version: int) -> tuple[pa.Schema, tuple[str, ...]]:
        """The schema (and primary key) after the changes, taking effect at ``version``; a change
        that is lossy, names an unknown column, or touches the primary key's values is refused."""
        if not self.changes:
            raise InvalidInputError("the schema update has no changes")
        identified = with_all_ids(schema)
        fields = list(identified)
        last = last_column_id(identified)
        pk = list(primary_key)

        def find(name: str) -> int:
            for i, f in enumerate(fields):
                if f.name == name:
                    return i
            raise InvalidInputError(f"unknown column {name!r} {columns_hint(name, (f.name for f in fields))}")

        def fresh(name: str) -> None:
            if not name or any(f.name == name for f in fields):
                raise InvalidInputError(f"column name {name!r} is empty or already taken")

        for kind, args in self.changes:
            if kind in ("key", "unkey"):
                pk = list(args[0]) if kind == "key" else []
                continue
            target = args[0]
            if kind == "reorder_in":
                _reorder_inside(target, list(args[1]), fields, find)
                continue
            if kind != "reorder" and isinstance(target, tuple) and len(target) == 1:
                args = (target[0], *args[1:])
            elif kind != "reorder" and isinstance(target, tuple):
                last = _change_inside(kind, args, fields, find, last, version)
                continue
            if kind == "add":
                name, t, default = args
                fresh(name)
                if not isinstance(t, pa.DataType):
                    raise InvalidInputError(f"the type of {name!r} must be a pyarrow.DataType")
                last += 1
                counter = _Counter(last)
                typed = with_nested_ids(without_nested_metadata(t), counter)
                fields.append(_field(name, typed, True, last, [(name, version)], _encode_default(name, t, default)))
                last = counter.last
            elif kind == "rename":
                old, new = args
                i = find(old)
                fresh(new)
                f = fields[i]
                fields[i] = f.with_name(new).with_metadata({**f.metadata, NAMES: _json_names(f, new, version)})
                pk = [new if k == old else k for k in pk]
            elif kind == "drop":
                i = find(args[0])
                if args[0] in pk:
                    raise InvalidInputError(f"column {args[0]!r} is the primary key: it cannot be dropped")
                if len(fields) == 1:
                    raise InvalidInputError("a table keeps at least one column")
                del fields[i]
            elif kind == "widen":
                name, t = args
                i = find(name)
                f = fields[i]
                if name in pk and not f.type.equals(t):
                    raise InvalidInputError(f"column {name!r} is the primary key: its type cannot change")
                if not isinstance(t, pa.DataType) or not widens(f.type, t):
                    raise SchemaMismatchError(
                        f"column {name!r} cannot change from {f.type} to {t}: only widening keeps every value "
                        "(a wider int or float, decimal precision up at the same scale, a finer unit of time up to "
                        "microseconds, date32 to date64 or timestamp, string to large_string)"
                    )
                fields[i] = f.with_type(t)
            elif kind == "nullable":
                i = find(args[0])
                if args[0] in pk:
                    raise InvalidInputError(f"column {args[0]!r} is the primary key: it stays non-nullable")
                fields[i] = fields[i].with_nullable(True)
            elif kind == "reorder":
                names = list(args[0])
                for n in names:
                    find(n)
                if len(set(names)) != len(names):
                    raise InvalidInputError(f"reorder names a column twice: {names}")
                fields = [fields[find(n)] for n in names] + [f for f in fields if f.name not in names]
            else:  # pragma: no cover - the methods above are the only producers
                raise AssertionError(kind)
        check_names(fields)
        after = _with_last(fields, last)
        check_key_columns(after, pk)
        return after, tuple(pk)


def _change_inside(
    kind: str, args: tuple[Any, ...], fields: list[pa.Field], find: Callable[[str], int], last: int, version: int
) -> int:
    """Apply change ``kind`` to the field at path ``args[0]`` inside one of ``fields`` (in
    place); the last id given after it. A field added takes the next id, then its type's
    fields theirs (Iceberg's order); a rename adds to the field's name history."""
    path: tuple[str, ...] = args[0]
    shown = ".".join(map(str, path))
    if not all(isinstance(p, str) and p for p in path):
        raise InvalidInputError(f"a field's path is a tuple of names, not {path!r}")
    counter = _Counter(last)
    leaf = path[-1]

    def edit(kids: list[pa.Field]) -> list[pa.Field]:
        names = [k.name for k in kids]
        if kind == "add":
            _, t, default = args
            if default is not None:
                raise InvalidInputError(f"{shown}: a field inside a column is added without a default (NULL)")
            if not isinstance(t, pa.DataType):
                raise InvalidInputError(f"the type of {shown!r} must be a pyarrow.DataType")
            if leaf in names:
                raise InvalidInputError(f"field name {leaf!r} is already taken in {'.'.join(path[:-1])}")
            fid = counter()
            typed = with_nested_ids(without_nested_metadata(t), counter)
            return [*kids, _field(leaf, typed, True, fid, [(leaf, version)])]
        if leaf not in names:
            raise InvalidInputError(f"unknown field {shown!r} {columns_hint(leaf, names)}")
        j = names.index(leaf)
        k = kids[j]
        if kind == "rename":
            new = args[1]
            if not new or new in names:
                raise InvalidInputError(f"field name {new!r} is empty or already taken in {'.'.join(path[:-1])}")
            kids[j] = k.with_name(new).with_metadata({**(k.metadata or {}), NAMES: _json_names(k, new, version)})
        elif kind == "drop":
            if len(kids) == 1:
                raise InvalidInputError(f"{'.'.join(path[:-1])} keeps at least one field: {shown} is its last")
            del kids[j]
        elif kind == "widen":
            t = args[1]
            if not isinstance(t, pa.DataType) or not widens(k.type, t):
                raise SchemaMismatchError(
                    f"field {shown!r} cannot change from {k.type} to {t}: only widening keeps every value"
                )
            kids[j] = k.with_type(t)
        else:
            kids[j] = k.with_nullable(True)
        return kids

    i = find(path[0])
    fields[i] = fields[i].with_type(_inside(fields[i].type, path[1:-1], edit, path[0]))
    return counter.last


def _reorder_inside(
    path: tuple[str, ...], names: list[str], fields: list[pa.Field], find: Callable[[str], int]
) -> None:
    """Put the fields of the struct at ``path`` in the order ``names`` gives (the rest after), in place."""
    shown = ".".join(path)

    def edit(kids: list[pa.Field]) -> list[pa.Field]:
        have = [k.name for k in kids]
        unknown = [n for n in names if n not in have]
        if unknown or len(set(names)) != len(names):
            raise InvalidInputError(f"reorder of {shown} names {names}: unknown or repeated {unknown or names}")
        return [kids[have.index(n)] for n in names] + [k for k in kids if k.name not in names]

    if not path or not all(isinstance(p, str) and p for p in path):
        raise InvalidInputError(f"a struct's path is a tuple of names, not {path!r}")
    i = find(path[0])
    t = _inside(fields[i].type, path[1:], edit, path[0], element_ok=False)
    fields[i] = fields[i].with_type(t)


def _inside(
    t: pa.DataType,
    steps: tuple[str, ...],
    edit: Callable[[list[pa.Field]], list[pa.Field]],
    at: str,
    *,
    element_ok: bool = True,
) -> pa.DataType:
    """``t`` with ``edit`` applied to the fields of the struct at ``steps`` inside it (``at``:
    the path so far, for errors): a struct's field by name, a list's ``element``, a map's
    ``key`` or ``value``. At the end of the path a list's element, or a map's key and value
    (``element_ok``), are edited as fields named so: they are widened or made nullable, and
    nothing else."""
    kids = children(t)
    if not steps:
        if pa.types.is_struct(t):
            return rebuilt(t, edit(list(kids)))
        if not kids or not element_ok:
            raise InvalidInputError(f"{at} is {t}, not a struct: fields are added, renamed and dropped in structs")
        canon = ["key", "value"] if pa.types.is_map(t) else ["element"]
        edited = edit([k.with_name(c) for k, c in zip(kids, canon, strict=True)])
        if [k.name for k in edited] != canon:
            verb = "is" if len(canon) == 1 else "are"
            raise InvalidInputError(
                f"{at} is {t}: its {' and '.join(canon)} {verb} widened or made nullable, nothing else"
            )
        if pa.types.is_map(t) and edited[0].nullable:
            raise InvalidInputError(f"{at}: a map's keys are never NULL")
        return rebuilt(t, [e.with_name(k.name) for e, k in zip(edited, kids, strict=True)])
    step = steps[0]
    if pa.types.is_struct(t):
        names = [k.name for k in kids]
    elif pa.types.is_map(t):
        names = ["key", "value"]
    elif kids:
        names = [step] if step in ("element", "item") else ["element"]
    else:
        raise InvalidInputError(f"{at} is {t}: it has no field {step!r}")
    if step not in names:
        raise InvalidInputError(f"unknown field {at}.{step} {columns_hint(step, names)}")
    j = names.index(step)
    kids = list(kids)
    kids[j] = kids[j].with_type(_inside(kids[j].type, steps[1:], edit, f"{at}.{step}"))
    return rebuilt(t, kids)


def _shown(arg: object, kind: str) -> object:
    """A change's argument as the summary says it: a path dotted, a reorder's names listed."""
    if isinstance(arg, tuple):
        return list(arg) if kind == "reorder" else ", ".join(arg) if kind == "key" else ".".join(arg)
    return arg


def restored(schema: pa.Schema, current: pa.Schema) -> pa.Schema:
    """An older version's ``schema``, made current again (``Table.restore``): ids stay unique."""
    if not has_ids(schema):
        return schema
    return _with_last(list(schema), max(last_column_id(schema), last_column_id(with_ids(current))))


def _json_names(f: pa.Field, new: str, version: int) -> bytes:
    return json.dumps([*names_of(f), (new, version)]).encode()


def _encode_default(name: str, t: pa.DataType, default: object) -> bytes | None:
    if default is None:
        return None
    if not supports_stats(t):
        raise InvalidInputError(f"column {name!r}: defaults are supported for numbers, strings, dates and timestamps")
    try:
        return json.dumps(encode_value(pa.scalar(default, type=t))).encode()
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise InvalidInputError(f"column {name!r}: default {default!r} is not a {t}: {e}") from None


def columns_added(schema: pa.Schema, data: pa.Schema) -> SchemaUpdate[Any] | None:
    """The columns of ``data`` the table lacks, as a schema update (``schema_mode="merge"``)."""
    new = [f for f in data if f.name not in schema.names]
    if not new:
        return None
    update: SchemaUpdate[Any] = SchemaUpdate()
    for f in new:
        update.add_column(f.name, f.type)
    return update


def name_at(f: pa.Field, version: int) -> str | None:
    """The name column ``f`` had at ``version``; ``None`` if it did not exist yet."""
    found = None
    for name, since in names_of(f):
        if since <= version:
            found = name
    return found


def iceberg_file_name(name: str) -> str:
    """The name Iceberg's writers give column ``name`` in the Parquet files they write (Java's
    ``AvroSchemaUtil.makeCompatibleName``, pyiceberg's ``make_compatible_name``): a name that
    starts with a letter or ``_`` and holds only letters, digits and ``_`` stays as it is; in any
    other, a digit that starts it becomes ``_`` and the digit, and every other character that is
    not a letter, digit or ``_`` becomes ``_x`` and its code point in upper-case hex
    (``a.b`` -> ``a_x2Eb``, ``1st`` -> ``_1st``). Such files are read by field id."""
    if name and (name[0].isalpha() or name[0] == "_") and all(c.isalnum() or c == "_" for c in name[1:]):
        return name

    def kept(c: str, first: bool) -> str:
        if c.isalpha() or c == "_" or (c.isdigit() and not first):
            return c
        return "_" + c if c.isdigit() else f"_x{ord(c):X}"

    return "".join(kept(c, i == 0) for i, c in enumerate(name))


class Where(dict[str, "str | None"]):
    """:func:`resolve`'s answer: each column's name in the file (``None``: the file lacks it),
    and the version the file was added at, by which its nested fields are found likewise."""

    def __init__(self, found: Mapping[str, str | None], added_version: int) -> None:
        super().__init__(found)
        self.added_version = added_version


def resolve(file: pa.Schema, schema: pa.Schema, added_version: int) -> Where:
    """Where each column of ``schema`` is in a data file of schema ``file``: the file column's
    name, or ``None`` when the file has no such column (it reads as the column's default).

    By field id when the file carries castable's ids (each id naming a column under a name
    it has had, or under the name Iceberg's writers give it, :func:`iceberg_file_name`);
    otherwise by the name each column had at the version the file was added. The fields
    inside a nested column are found by the same rules (:func:`conform_read`)."""
    return Where(_found(file, schema, added_version), added_version)


def _found(file: pa.Schema, schema: pa.Schema, added_version: int) -> dict[str, str | None]:
    if not has_ids(schema):
        return {n: (n if n in file.names else None) for n in schema.names}
    by_id = {fid: f.name for f in file if (fid := field_id(f)) is not None}
    ours = bool(by_id) and all(
        by_id[fid] in {m for n, _ in names_of(f) for m in (n, iceberg_file_name(n))}
        for f in schema
        if (fid := field_id(f)) in by_id
    )
    if ours:
        return {f.name: by_id.get(field_id(f)) for f in schema}  # type: ignore[arg-type]
    out: dict[str, str | None] = {}
    for f in schema:
        name = name_at(f, added_version)
        out[f.name] = name if name in file.names else None
    return out


def conform_read(table: pa.Table, where: Mapping[str, str | None], schema: pa.Schema) -> pa.Table:
    """Columns read from a file (under their file names) as ``schema``'s: renamed, widened,
    and the columns the file lacks filled with their default (or NULL)."""
    if len(schema) == 0:
        return table.select([])  # keeps the row count
    rows = table.num_rows
    version = where.added_version if isinstance(where, Where) else sys.maxsize
    arrays = []
    for f in schema:
        source = where[f.name]
        if source is None:
            default = default_of(f)
            arrays.append(pa.nulls(rows, f.type) if default is None else pa.array([default.as_py()] * rows, f.type))
            continue
        column = table.column(source)
        held = table.schema.field(source).type
        if children(f.type) and not _same_nested(held, f.type):
            column = pa.chunked_array(
                [_conformed(c, held, f.type, version) for c in column.chunks], without_nested_metadata(f.type)
            )
        arrays.append(column if column.type.equals(f.type) else column.cast(f.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema([bare_field(f) for f in schema]))


def _same_nested(held: pa.DataType, wanted: pa.DataType) -> bool:
    """Whether a file's nested column of type ``held`` is read as it is as ``wanted``: the same
    fields, by name and type, with the same ids (or none in either: a table never changed since
    before nested ids)."""
    return held.equals(wanted) and nested_ids(held) == nested_ids(wanted)


def _conformed(array: pa.Array, held: pa.DataType, wanted: pa.DataType, version: int) -> pa.Array:
    """A file's nested ``array`` (type ``held``) as type ``wanted``: each field found by
    :func:`resolve`'s rules among the fields inside it (added ones NULL, renamed, dropped,
    reordered and widened ones as the table has them), nulls kept at every level."""
    if not children(wanted) or not children(held):
        return array if array.type.equals(wanted) else array.cast(without_nested_metadata(wanted))
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(wanted):
        inside, kids = pa.schema(children(held)), children(wanted)
        where = _found(inside, pa.schema(kids), version)
        parts = {f.name: part for f, part in zip(children(held), array.flatten(), strict=True)}
        arrays = [
            pa.nulls(len(array), without_nested_metadata(k.type))
            if where[k.name] is None
            else _conformed(parts[where[k.name]], inside.field(where[k.name]).type, k.type, version)
            for k in kids
        ]
        return pa.StructArray.from_arrays(arrays, fields=[bare_field(k) for k in kids], mask=mask)
    if pa.types.is_map(wanted):
        keys = _conformed(array.keys, held.key_type, wanted.key_type, version)
        items = _conformed(array.items, held.item_type, wanted.item_type, version)
        return pa.MapArray.from_arrays(array.offsets, keys, items, type=without_nested_metadata(wanted), mask=mask)
    made = without_nested_metadata(wanted)
    if pa.types.is_fixed_size_list(wanted):
        size = wanted.list_size
        inner = array.values.slice(array.offset * size, len(array) * size)
        values = _conformed(inner, held.value_type, wanted.value_type, version)
        return pa.FixedSizeListArray.from_arrays(values, type=made, mask=mask)
    values = _conformed(array.values, held.value_type, wanted.value_type, version)
    return type(array).from_arrays(array.offsets, values, type=made, mask=mask)


def bare_field(f: pa.Field) -> pa.Field:
    """Column ``f`` as a scan returns it: without castable's metadata, nested fields' ids included."""
    return f.remove_metadata().with_type(without_nested_metadata(f.type))


def translate_stats(stats: Mapping[str, Any], old: pa.Schema, new: pa.Schema) -> dict[str, Any]:
    """JSON statistics keyed by ``old``'s keys (``castable.format.stats.stat_fields``: column
    names, and paths of fields inside structs), keyed (and encoded) by ``new``'s, found by id."""
    old_units = stat_fields(old)
    old_by_id = {field_id(f): (key, f) for key, f in old_units.items()}
    out: dict[str, Any] = {}
    for key, f in stat_fields(new).items():
        fid = field_id(f)
        found = old_by_id.get(fid) if fid is not None else ((key, old_units[key]) if key in old_units else None)
        if found is None or found[0] not in stats:
            continue
        was_key, was = found
        doc = dict(stats[was_key])
        if "min" in doc and not was.type.equals(f.type):
            try:
                doc["min"], doc["max"] = (
                    encode_value(decode_value(doc[k], was.type).cast(f.type)) for k in ("min", "max")
                )
            except (pa.ArrowException, TypeError, ValueError):
                doc.pop("min"), doc.pop("max")
        out[key] = doc
    return out
