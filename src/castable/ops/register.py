"""Registering Parquet files written elsewhere (Spark on EMR, other tools) (docs/format.md section 5).

Each file must already exist under the table's ``data/`` prefix, be valid Parquet, and have
exactly the table's columns and types. By default every page is decoded, a row group at a time,
so a file that does not decode is refused before it is committed; ``verify="footer"`` reads only
the footer (one or two range GETs) and any INT96 timestamp columns, for files a trusted writer has
just written. Entries that
castable's writer produced in another process (Spark executors) carry their statistics
already, and nothing that crosses that boundary is trusted: a listing of the directories holding
many of them (1,000 objects a request) or one HEAD each shows that every object exists with the
described size and ETag, and its footer (one range GET, many at once) that it has the table's
columns and exactly the described rows, row groups and statistics.
"""

from __future__ import annotations

import hashlib
import posixpath
import sys
import uuid
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Literal, get_args

import pyarrow as pa
import pyarrow.parquet as pq

from castable.errors import CorruptObjectError, FileMismatchError, InvalidInputError, SchemaMismatchError
from castable.format.conversions import widens
from castable.format.evolution import default_of, resolve, stored_type
from castable.format.layout import DATA_PREFIX, FILE_LISTS_PREFIX
from castable.format.manifest import DataFile
from castable.format.schema import describe_mismatch
from castable.format.segment import data_files, data_table, decode, encode
from castable.format.stats import ColumnStats, decode_value, ordered
from castable.maintenance.rowgroups import Transfer, check_int96_file, read_footer, read_row_group
from castable.parquet.footer import Footer
from castable.parquet.writer import data_file_from_metadata
from castable.read.snapshot import remember_footer
from castable.store import ObjectInfo, ObjectNotFoundError, ObjectStore, PreconditionFailedError, canonical_location


def table_key(store: ObjectStore, path: str) -> str:
    """The table-relative key of ``path`` (relative already, or a URI inside the table)."""
    root = store.uri.rstrip("/") + "/"
    path = canonical_location(path)
    key = path[len(root) :] if path.startswith(root) else path
    parts = key.split("/")
    if "://" in key or key.startswith("/") or ".." in parts or "" in parts or not key.startswith(DATA_PREFIX):
        raise InvalidInputError(f"{path!r} is not under the table's data prefix {root}{DATA_PREFIX}")
    if not key.endswith(".parquet"):
        raise InvalidInputError(f"{path!r} is not a .parquet file")
    if "." in parts:  # one object, one spelling: data/./a.parquet would register data/a.parquet twice
        raise InvalidInputError(f"{path!r} is not in canonical form; write it as {posixpath.normpath(key)!r}")
    return key


_CHECK_THREADS = 16
"""Files described from their footers (or decoded) at once."""
_HEAD_THREADS = 64
"""Entries written elsewhere checked at once: a footer GET each, and a HEAD for those no listing
found."""
_LISTED_FROM = 100
"""Entries in one directory from which a listing checks them: 200,000 files of a Spark job are
200 LIST requests instead of 200,000 HEADs."""
Check = Literal["decode", "footer"]
"""What a caller asks to be checked of each path: every page decoded, or its footer only."""
Verify = Literal[Check, "checked"]
"""A :data:`Check`, or ``"checked"``: the ``DataFile`` entries given were each shown already to
describe their objects (every slice of a file list by :func:`check_file_list`, in other
processes), so they are not read again; paths are still described from their footers."""
VERIFY_MODES: tuple[str, ...] = get_args(Verify)


def check_schema(path: str, file_schema: pa.Schema, schema: pa.Schema) -> dict[str, str | None]:
    """Refuse a file whose columns are not the table's (layouts of the same type are fine), and
    say where each column is in it: found as a scan finds them, by field id where the file
    carries the table's ids (under the names Iceberg's writers give columns such as ``a.b``),
    else by name."""
    where = resolve(file_schema, schema, sys.maxsize)
    named = {held: name for name, held in where.items() if held is not None}
    as_named = pa.schema([f.with_name(named.get(f.name, f.name)) for f in file_schema])
    problems = describe_mismatch(as_named, schema)
    if problems:
        raise SchemaMismatchError(f"{path} does not match the table schema: " + "; ".join(problems))
    return where


def check_readable(path: str, file_schema: pa.Schema, schema: pa.Schema) -> dict[str, str | None]:
    """Refuse a file written for the table that a scan could not read as its schema. Columns are
    found as a scan finds them (by field id, else by name); one the file lacks reads as its
    default or NULL, as for a Spark job's files that a concurrent ``add_columns`` outran; one
    of a narrower type widens; timestamps in the unit castable's writer stores them in
    (:func:`castable.format.evolution.stored_type`) read back in the column's. Only a column the file
    lacks that has neither, or holds values of another type, refuses it. Says where each
    column is in the file."""
    where = resolve(file_schema, schema, sys.maxsize)
    problems = []
    for f in schema:
        source = where[f.name]
        if source is None:
            if not f.nullable and default_of(f) is None:
                problems.append(f"missing column {f.name!r} ({f.type}), which is NOT NULL with no default")
        elif not widens(held := file_schema.field(source).type, f.type) and held != stored_type(f.type):
            problems.append(f"column {f.name!r} is {held}, expected {f.type}")
    if problems:
        raise SchemaMismatchError(f"{path} does not match the table schema: " + "; ".join(problems))
    return where


def check_key(path: str, key: str, stats: ColumnStats | None, decoded_nulls: int | None = None) -> None:
    """Refuse a file whose primary-key column holds NULLs by its statistics (or, when they do not
    say, by the ``decoded_nulls`` its decoded pages hold), or when neither says."""
    nulls = decoded_nulls if stats is None or stats.null_count is None else stats.null_count
    if nulls is None or nulls:
        raise SchemaMismatchError(
            f"{path}: its primary key column {key!r} holds NULLs (or its footer does not say it holds none); "
            "a row needs a key"
        )


def check_files(
    store: ObjectStore,
    files: Sequence[str | DataFile],
    schema: pa.Schema,
    primary_key: str | None,
    verify: Verify = "decode",
) -> list[DataFile]:
    """The manifest entries of files to register, each checked, a few in parallel.

    A path is described from its footer and, unless ``verify="footer"``, decoded in full
    (:func:`describe_data_file`); a ``DataFile`` written by castable's writer is checked against
    the object's size and ETag and against its footer (:func:`verify_data_files`), unless
    ``verify="checked"`` says that was done. Either way a keyed table takes no file whose key
    column holds NULLs.
    """
    if verify not in VERIFY_MODES:
        raise InvalidInputError(f"verify must be one of {', '.join(VERIFY_MODES)}, not {verify!r}")
    keys = [table_key(store, f.path if isinstance(f, DataFile) else f) for f in files]
    if len(set(keys)) != len(keys):
        raise InvalidInputError("the same file is listed twice")

    # Entries written elsewhere are checked together (by listings), paths described a few at once.
    entries = [replace(f, path=k) for f, k in zip(files, keys, strict=True) if isinstance(f, DataFile)]
    verified = {f.path: f for f in (entries if verify == "checked" else verify_data_files(store, entries, schema))}
    paths = [k for k in keys if k not in verified]

    def describe(key: str) -> tuple[DataFile, dict[str, int] | None]:
        return describe_data_file(store, key, schema, decode=verify == "decode")

    with ThreadPoolExecutor(max(1, min(_CHECK_THREADS, len(paths)))) as pool:
        described = dict(zip(paths, pool.map(describe, paths), strict=True))
    checked = [(verified[k], None) if k in verified else described[k] for k in keys]
    if primary_key is not None:
        for f, nulls in checked:
            decoded = None if nulls is None else nulls.get(primary_key)
            check_key(f.path, primary_key, f.column_stats(primary_key, schema), decoded)
    return [f for f, _ in checked]


def _missing(store: ObjectStore, key: str) -> str:
    return (
        f"{key} does not exist: looked for {store.uri}/{key} (paths name objects the other engine "
        "already wrote under the table's data/ prefix, relative to the table or as full URIs)"
    )


def verify_data_files(store: ObjectStore, entries: Sequence[DataFile], schema: pa.Schema) -> list[DataFile]:
    """``entries`` themselves, once each is shown to describe its object (:func:`verify_data_file`).
    Each object's size and ETag come from one listing of each directory that holds at least
    ``_LISTED_FROM`` of them (S3 lists are strongly consistent and give both), or one HEAD each
    for the rest; footers are read ``_HEAD_THREADS`` at once. The first entry refused stops the
    checks not yet begun."""
    wanted: dict[str, set[str]] = defaultdict(set)
    for e in entries:
        wanted[posixpath.dirname(e.path) + "/"].add(e.path)
    listed: dict[str, ObjectInfo] = {}
    for directory, keys in wanted.items():
        if len(keys) >= _LISTED_FROM:
            listed |= _listed(store, directory, keys)
    pool = ThreadPoolExecutor(max(1, min(_HEAD_THREADS, len(entries))))
    try:
        return list(pool.map(lambda e: verify_data_file(store, e, schema, listed.get(e.path)), entries))
    finally:
        pool.shutdown(cancel_futures=True)


def _listed(store: ObjectStore, directory: str, keys: set[str]) -> dict[str, ObjectInfo]:
    """What a listing of ``directory`` says of ``keys``; it stops once other objects there
    outnumber them (a directory shared with many other files: the rest are HEADed)."""
    found: dict[str, ObjectInfo] = {}
    budget = 2 * len(keys) + 1_000
    for seen, info in enumerate(store.list(directory)):
        if info.key in keys:
            found[info.key] = info
            if len(found) == len(keys):
                break
        if seen >= budget:
            break
    return found


def verify_data_file(
    store: ObjectStore, entry: DataFile, schema: pa.Schema, listed: ObjectInfo | None = None
) -> DataFile:
    """``entry`` itself, once the object is shown (by ``listed``, or else one HEAD) to exist with
    the recorded size and ETag, and its footer to hold the table's columns and what ``entry``
    says of its rows, row groups and statistics (:func:`check_described`)."""
    try:
        info = listed or store.head(entry.path)
    except ObjectNotFoundError:
        raise InvalidInputError(_missing(store, entry.path)) from None
    if (info.size, info.etag) != (entry.size, entry.etag):
        raise InvalidInputError(
            f"{entry.path} is {info.size} bytes with ETag {info.etag}, "
            f"but was described as {entry.size} bytes with ETag {entry.etag}"
        )
    if entry.rows <= 0 or entry.row_groups <= 0:
        raise InvalidInputError(f"{entry.path} is described with no rows")
    check_described(entry, footer_entry(store, info, schema), schema)
    return entry


def check_described(entry: DataFile, found: DataFile, schema: pa.Schema) -> None:
    """Refuse ``entry``, a file's description from another process, where it disagrees with
    ``found``, what the file's footer says: its rows (summed over its row groups), row groups,
    or any statistic it records (a bound it gives that the footer does not is a disagreement; one
    it leaves out is not, as castable keeps only what the entry records). A wrong count would be
    the table's count, and a wrong bound would prune a scan of rows the file holds."""
    problems = []
    if entry.rows != found.rows:
        problems.append(f"{entry.rows} rows where its row groups hold {found.rows}")
    if entry.row_groups != found.row_groups:
        problems.append(f"{entry.row_groups} row groups where it has {found.row_groups}")
    for name, claimed in entry.stats.items():
        if name not in schema.names:
            problems.append(f"statistics of {name!r}, a column the table does not have")
            continue
        actual = found.stats.get(name, {})
        for kind in ("min", "max", "nulls"):
            if kind in claimed and not _same_stat(kind, claimed[kind], actual.get(kind), schema.field(name).type):
                problems.append(f"{name} {kind} {claimed[kind]!r} where its footer says {actual.get(kind)!r}")
    if problems:
        raise FileMismatchError(
            f"{entry.path} disagrees with its Parquet footer: it was described with "
            + "; ".join(problems)
            + ". Nothing was committed"
        )


def _same_stat(kind: str, claimed: Any, actual: Any, t: pa.DataType) -> bool:
    """Whether a statistic of the manifest's JSON form is the footer's: counts exactly, bounds as
    values of the column's type (``1.5`` and ``"1.50"`` are one decimal)."""
    if claimed == actual or actual is None or kind == "nulls":
        return bool(claimed == actual)
    try:
        return bool(ordered(decode_value(claimed, t)) == ordered(decode_value(actual, t)))
    except (pa.ArrowException, TypeError, ValueError, OverflowError, ArithmeticError):
        return False


def describe_data_file(
    store: ObjectStore, key: str, schema: pa.Schema, *, decode: bool = False
) -> tuple[DataFile, dict[str, int] | None]:
    """The manifest entry for an existing Parquet file, checked against the table schema; with
    ``decode``, every page decoded too, and the NULLs each top-level column holds. Either way its
    INT96 timestamps (if any) are read and refused outside what nanoseconds hold: a scan would
    return them wrapped around to other dates."""
    try:
        info = store.head(key)
    except ObjectNotFoundError:
        raise InvalidInputError(_missing(store, key)) from None
    entry, footer = read_described(store, info, schema)
    if decode:  # decoding checks the INT96 columns too
        return entry, decoded_nulls(store, entry, footer)
    check_int96_file(store, entry, footer, Transfer())
    return entry, None


def read_described(store: ObjectStore, info: ObjectInfo, schema: pa.Schema) -> tuple[DataFile, Footer]:
    """The manifest entry of the Parquet file ``info`` names, from its footer (one or two range
    GETs pinned to its ETag), and that footer; refused unless it holds the table's columns."""
    probe = DataFile(info.key, info.size, info.etag, rows=0, row_groups=0)
    try:
        footer = read_footer(store, probe, Transfer())
        metadata = footer.pyarrow_metadata()
        file_schema = metadata.schema.to_arrow_schema()
    except (CorruptObjectError, OSError, ValueError) as e:
        raise InvalidInputError(f"{info.key} is not valid Parquet: {e}") from None
    where = check_schema(info.key, file_schema, schema)
    entry = data_file_from_metadata(info, metadata, schema, where)
    remember_footer(store, entry, metadata)
    return entry, footer


def footer_entry(store: ObjectStore, info: ObjectInfo, schema: pa.Schema) -> DataFile:
    """The manifest entry of the Parquet file ``info`` names, from its footer read as a scan
    reads one (pyarrow over the store's range GETs pinned to the ETag: one for most files, and
    no Thrift decoded in Python, as a commit may read 200,000 of them); refused unless it holds
    the table's columns, or when an INT96 timestamp column holds values castable would misread
    (:func:`check_int96_file` reads those columns only, for the files that have one)."""
    try:
        with store.open_input(info.key, size=info.size, etag=info.etag) as source:
            metadata = pq.read_metadata(source)
        file_schema = metadata.schema.to_arrow_schema()
    except ObjectNotFoundError:
        raise InvalidInputError(_missing(store, info.key)) from None
    except (CorruptObjectError, OSError, ValueError) as e:
        raise InvalidInputError(f"{info.key} is not valid Parquet: {e}") from None
    where = check_readable(info.key, file_schema, schema)
    entry = data_file_from_metadata(info, metadata, schema, where)
    if any(metadata.schema.column(i).physical_type == "INT96" for i in range(metadata.num_columns)):
        check_int96_file(store, entry, read_footer(store, entry, Transfer()), Transfer())
    return entry


def decoded_nulls(store: ObjectStore, entry: DataFile, footer: Footer) -> dict[str, int]:
    """Decode every page of ``entry``, a row group at a time; the NULLs of each top-level column.
    ``InvalidInputError`` naming the file if a page does not decode."""
    nulls: dict[str, int] = {}
    for index in range(len(footer.row_groups)):
        try:
            rows = read_row_group(store, entry, footer, index, Transfer())
        except CorruptObjectError as e:
            raise InvalidInputError(str(e)) from None
        for name, column in zip(rows.column_names, rows.columns, strict=True):
            nulls[name] = nulls.get(name, 0) + column.null_count
    return nulls


def write_file_list(store: ObjectStore, commit_id: str, files: Sequence[DataFile], schema: pa.Schema) -> str:
    """Leave the entries of ``files`` (statistics included) under ``data/_file_lists/`` for a
    committer in another process, as one manifest data segment; return its key in the table.
    The list has no size cap, where an invocation's payload has (Lambda's 6 MB)."""
    digest = hashlib.sha256(commit_id.encode()).hexdigest()[:32]
    key = f"{FILE_LISTS_PREFIX}{digest}-{uuid.uuid4().hex[:12]}.arrow"
    store.put(key, encode(data_table(files, schema), "data"), if_none_match=True)
    return key


def _check_list_key(key: str) -> None:
    if not key.startswith(FILE_LISTS_PREFIX) or ".." in key.split("/"):
        raise InvalidInputError(f"a file list lies under {FILE_LISTS_PREFIX} of the table, not at {key!r}")


def file_list_etag(store: ObjectStore, key: str) -> str:
    """The ETag of the file list at ``key`` (one HEAD): processes that check its slices and the
    one that commits it read it pinned to this, so all of them see the same entries."""
    _check_list_key(key)
    try:
        return store.head(key).etag
    except ObjectNotFoundError:
        raise InvalidInputError(f"the file list {store.uri}/{key} does not exist") from None


def read_file_list(store: ObjectStore, key: str, schema: pa.Schema, *, etag: str | None = None) -> list[DataFile]:
    """The entries :func:`write_file_list` left at ``key`` (with ``etag``, the list of that ETag
    only); ``InvalidInputError`` for a key outside ``data/_file_lists/``, a missing list, one
    replaced since ``etag`` or one that is not a list of data files."""
    _check_list_key(key)
    try:
        return data_files(decode(store.get(key, if_match=etag).data, "data", key=key), schema)
    except ObjectNotFoundError:
        raise InvalidInputError(f"the file list {store.uri}/{key} does not exist") from None
    except PreconditionFailedError:
        raise InvalidInputError(f"the file list {store.uri}/{key} was replaced while it was checked") from None
    except (CorruptObjectError, KeyError, pa.ArrowException) as e:
        raise InvalidInputError(f"{key} is not a castable file list: {e}") from None


def check_file_list(store: ObjectStore, key: str, schema: pa.Schema, start: int, stop: int, *, etag: str) -> int:
    """Check entries ``[start, stop)`` of the file list at ``key`` (of ETag ``etag``) against their
    objects and footers (:func:`verify_data_files`); how many were checked. One process reads
    about 100 to 200 footers a second, so a list of any size is checked in the time of one slice
    when processes check its slices at once; ``add_files(..., verify="checked")`` then takes the
    list without reading the files again. A refused entry raises as in :func:`check_files`."""
    entries = read_file_list(store, key, schema, etag=etag)
    if not 0 <= start <= stop <= len(entries):
        raise InvalidInputError(f"entries [{start}, {stop}) are not a slice of {key}, which has {len(entries)}")
    part = [replace(e, path=table_key(store, e.path)) for e in entries[start:stop]]
    return len(verify_data_files(store, part, schema))
