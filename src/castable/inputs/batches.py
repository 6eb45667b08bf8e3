"""What callers may hand castable as rows: pyarrow Tables, RecordBatches, readers, iterables of
them, pandas DataFrames (recognised without importing pandas) and anything that exports an
Arrow stream (polars, DuckDB, ...: the Arrow PyCapsule interface); and how they become batches
of a table's schema, or a change feed's rows and operations."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from castable.errors import InvalidInputError, SchemaMismatchError
from castable.format.conversions import inferred_type
from castable.format.schema import conform

if TYPE_CHECKING:
    import pandas as pd


class ArrowStream(Protocol):
    """An object that exports its rows as an Arrow C stream (``__arrow_c_stream__``)."""

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...


DataLike: TypeAlias = (
    "pa.Table | pa.RecordBatch | pa.RecordBatchReader | pd.DataFrame | Iterable[pa.RecordBatch] | ArrowStream"
)
"""What the write methods accept: Arrow data, a reader or batches streamed, a pandas DataFrame,
or an object exporting an Arrow stream (a polars DataFrame, a DuckDB relation)."""


def is_dataframe(data: Any) -> bool:
    """Whether ``data`` is a pandas DataFrame (recognised without importing pandas)."""
    kind = type(data)
    return kind.__name__ == "DataFrame" and kind.__module__.split(".")[0] == "pandas"


def arrow_pieces(data: Any) -> Iterator[pa.Table | pa.RecordBatch]:
    """The pieces of ``data`` given as a pyarrow Table, RecordBatch, RecordBatchReader, an
    Arrow stream (read as a reader) or an iterable of Tables and RecordBatches, in order and
    lazily (a reader is read as it goes); ``InvalidInputError`` for anything else."""
    if isinstance(data, pa.Table | pa.RecordBatch):
        yield data
        return
    if hasattr(data, "__arrow_c_stream__") and not isinstance(data, pa.RecordBatchReader):
        data = pa.RecordBatchReader.from_stream(data)
    if not isinstance(data, Iterable) or isinstance(data, str | bytes | dict):
        raise InvalidInputError(
            f"cannot read rows from {type(data).__name__}; give a pyarrow Table, RecordBatch(Reader), "
            "a pandas or polars DataFrame or another object exporting an Arrow stream"
        )
    for item in data:
        if not isinstance(item, pa.Table | pa.RecordBatch):
            raise InvalidInputError(f"expected pyarrow RecordBatches, got {type(item).__name__}")
        yield item


def conforming_batches(
    data: DataLike, schema: pa.Schema, key: str | None, *, fill: bool = False
) -> Iterator[pa.RecordBatch]:
    """``data`` as non-empty RecordBatches of ``schema``, whose primary ``key`` holds no NULL;
    with ``fill``, nullable columns ``data`` lacks are NULL. ``SchemaMismatchError`` if it does not fit."""
    source = [from_pandas(data)] if is_dataframe(data) else arrow_pieces(data)
    for item in source:
        conformed = conform(with_missing(item, schema) if fill else item, schema)
        if key is not None and conformed.column(key).null_count:
            raise SchemaMismatchError(f"primary key column {key!r} holds NULLs; a row needs a key")
        batches = conformed.to_batches() if isinstance(conformed, pa.Table) else [conformed]
        yield from (b for b in batches if b.num_rows)


def schema_of(data: DataLike) -> tuple[pa.Schema, DataLike]:
    """The schema a table created from ``data`` takes (:func:`~castable.format.conversions.inferred_type`
    for each column, no metadata), and ``data`` to read its rows from: a reader or iterable is
    read no further than its first piece. ``InvalidInputError`` for a column of NULLs alone,
    whose type nothing says."""
    if is_dataframe(data):
        data = from_pandas(data)
    elif hasattr(data, "__arrow_c_stream__") and not isinstance(data, pa.Table | pa.RecordBatch):
        data = pa.RecordBatchReader.from_stream(data)  # a reader knows its schema before any row
    if isinstance(data, pa.Table | pa.RecordBatch | pa.RecordBatchReader):
        given = data.schema
    else:
        pieces = arrow_pieces(data)
        first = next(pieces, None)
        if first is None:
            raise InvalidInputError("the data holds no batch to take a schema from; give a pyarrow Schema")
        given, data = first.schema, itertools.chain([first], pieces)
    untyped = [f.name for f in given if pa.types.is_null(f.type)]
    if untyped:
        raise InvalidInputError(
            f"columns {untyped} hold only NULLs, so nothing says their type; give them a type, or a schema"
        )
    schema = pa.schema([pa.field(f.name, inferred_type(f.type), f.nullable) for f in given])
    return schema, data


def from_pandas(df: pd.DataFrame) -> pa.Table:
    """A DataFrame as Arrow, each column in the type pandas' own holds (int64, float64, text,
    nanosecond timestamps...), then held to the table's types by the rule every entry follows
    (:mod:`castable.format.conversions`): pandas gets no silent casts, text is not parsed."""
    names = [str(c) for c in df.columns]
    if len(set(names)) != len(names):
        raise SchemaMismatchError(f"the DataFrame repeats a column name: {names}")
    try:
        return pa.Table.from_pandas(df.set_axis(names, axis=1), preserve_index=False)
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise SchemaMismatchError(
            f"the DataFrame does not convert to Arrow ({e}); give each column values of one type"
        ) from None


def with_missing(data: pa.Table | pa.RecordBatch, schema: pa.Schema) -> pa.Table | pa.RecordBatch:
    """``data`` with a NULL column for each nullable column of ``schema`` it lacks."""
    missing = [f for f in schema if f.name not in data.schema.names and f.nullable]
    for f in missing:
        data = data.append_column(f.name, pa.nulls(data.num_rows, f.type))
    return data


def unique_keys(keys: pa.ChunkedArray) -> pa.Array:
    """The distinct keys of an upsert's rows; ``InvalidInputError`` if one appears twice."""
    distinct = pc.unique(keys)
    if len(distinct) != len(keys):
        counts = pc.value_counts(keys)
        twice = counts.filter(pc.greater(counts.field("counts"), 1))[0]["values"].as_py()
        raise InvalidInputError(
            f"the rows hold key {twice!r} more than once; an upsert gives each key one row "
            "(with last_wins=True the last row of each key counts)"
        )
    return distinct


def last_of_each(keys: pa.ChunkedArray) -> pa.Array:
    """The positions of the last row of each key, in the order of the rows."""
    positions = pa.table({"k": keys, "i": pa.array(np.arange(len(keys)))})
    last = positions.group_by("k", use_threads=False).aggregate([("i", "max")]).column("i_max")
    return pc.take(last, pc.sort_indices(last)).combine_chunks()


def split_column(data: DataLike, name: str) -> tuple[Any, pa.ChunkedArray]:
    """``data`` without its column ``name``, and that column as lower-case text (a change
    feed's operations)."""
    if is_dataframe(data):
        if name not in data.columns:  # type: ignore[union-attr]
            raise SchemaMismatchError(f"the change feed has no operation column {name!r}")
        rest: Any = data.drop(columns=[name])  # type: ignore[union-attr]
        column = pa.chunked_array([pa.array(data[name], from_pandas=True)])  # type: ignore[index]
    else:
        rest, parts = [], []
        for batch in arrow_pieces(data):
            if name not in batch.schema.names:
                raise SchemaMismatchError(f"the change feed has no operation column {name!r}")
            parts.append(batch.column(name))
            rest.append(batch.drop_columns([name]))
        chunks = [c for p in parts for c in (p.chunks if isinstance(p, pa.ChunkedArray) else [p])]
        column = pa.chunked_array(chunks) if chunks else pa.chunked_array([], pa.string())
    try:
        return rest, pc.utf8_lower(column.cast(pa.string()))
    except pa.ArrowException as e:
        raise SchemaMismatchError(f"operation column {name!r} is not text: {e}") from None
