"""Registering Parquet files written elsewhere (Spark on EMR, other tools) as an append.

Each file must already exist under the table's ``data/`` prefix, be valid Parquet, and have
exactly the table's columns and types; only its footer is read (one or two range GETs).
"""

from __future__ import annotations

from castable.errors import CorruptObjectError, InvalidInputError, SchemaMismatchError
from castable.layout import DATA_PREFIX
from castable.manifest import DataFile
from castable.schema import describe_mismatch
from castable.splice import Transfer, read_footer
from castable.store import ObjectNotFoundError, ObjectStore
from castable.writer import data_file_from_metadata


def table_key(store: ObjectStore, path: str) -> str:
    """The table-relative key of ``path`` (relative already, or a URI inside the table)."""
    root = store.uri.rstrip("/") + "/"
    key = path[len(root) :] if path.startswith(root) else path
    parts = key.split("/")
    if "://" in key or key.startswith("/") or ".." in parts or "" in parts or not key.startswith(DATA_PREFIX):
        raise InvalidInputError(f"{path!r} is not under the table's data prefix {root}{DATA_PREFIX}")
    if not key.endswith(".parquet"):
        raise InvalidInputError(f"{path!r} is not a .parquet file")
    return key


def describe_data_file(store: ObjectStore, key: str, schema: object) -> DataFile:
    """The manifest entry for an existing Parquet file, checked against the table schema."""
    try:
        info = store.head(key)
    except ObjectNotFoundError:
        raise InvalidInputError(f"{key} does not exist") from None
    probe = DataFile(key, info.size, info.etag, rows=0, row_groups=0)
    try:
        metadata = read_footer(store, probe, Transfer()).pyarrow_metadata()
        file_schema = metadata.schema.to_arrow_schema()
    except (CorruptObjectError, OSError, ValueError) as e:
        raise InvalidInputError(f"{key} is not valid Parquet: {e}") from None
    problems = describe_mismatch(file_schema, schema)  # type: ignore[arg-type]
    if problems:
        raise SchemaMismatchError(f"{key} does not match the table schema: " + "; ".join(problems))
    return data_file_from_metadata(info, metadata, schema)  # type: ignore[arg-type]
