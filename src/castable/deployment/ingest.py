"""Ingest of the files that land in a deployment's bucket (Parquet, CSV, JSON Lines, gzipped or
not): each checked against the table it lands for, one commit per table a batch, each file once.
The deployment's ingest function (``lambdas/ingest.py``) hands an :class:`Intake` the objects a
batch of messages says were created, and commits it; nothing here knows of Lambda or SQS, so it
runs, and is tested, on any store.

A file lands under ``landing/<name>/`` (the bucket layout, :mod:`castable.deployment.layout`):
``<name>`` is the table ``tables/<name>`` or, failing that, the database ``databases/<name>``; how
to ingest comes from the table's own properties (``ingest.mode``, ``ingest.op-column``,
``ingest.schema-mode``), so a table created by any writer is ingested at once. Files for a name
that is neither go to the dead-letter prefix. One table's failed commit (S3 unreachable, say) is
retried for that table's messages only; the other tables' files still land.

Every file of a table's share is checked against the table first (a Parquet file by its footer:
schema, no NULL key; a CSV or JSON Lines file, parsed with the table's types, by reading it
through once); the good files are then streamed, a row group or a block at a time over ranged
GETs, into one commit, and removed from the landing prefix, so memory stays bounded whatever
the file size. The format comes from the file name (``castable.inputs.sources.format_of``). A bad
file (unreadable, wrong schema, a value that does not convert) goes to the dead-letter prefix with
a ``.reason.json`` beside it and its message succeeds, so it is never retried forever nor blocks
the others. A Parquet data page that does not decode (or fails its CRC) is found as the share
streams: that file goes to the dead-letter prefix and the share is appended again without it,
still in one commit. A created object in another bucket or outside ``landing/<name>/`` is logged
and skipped: nothing is read, copied, appended or deleted there.

Exactly once: a file's source id (:attr:`CheckedFile.source_id`, from its bucket, key and ETag) is
recorded with the commit that appends it, so a file delivered twice in a batch, or appended by
another invocation that died before removing it, is appended once.

``ingest.mode=append`` (the default) streams the rows in; ``upsert`` replaces the live rows with
the landed rows' primary keys (``Table.upsert``, the last row of a key in the share winning,
files in the order they were received). With ``ingest.op-column`` the landed files are a change
feed (Debezium style): that extra text column holds each row's operation, and a row whose
operation is ``d`` or ``delete`` deletes its key. An upsert holds the share's rows in memory.
``ingest.schema-mode=strict`` (the default) dead-letters a Parquet file with columns the table
lacks; ``merge`` adds them (one ``alter`` commit, as nullable columns) before the append, and a
file lacking some nullable columns reads them as NULL.

A database's landing prefix takes batches for several tables in one transaction: a landed
``<name>.manifest.json`` names the files beside it and the table each goes to (``{"tables":
{"orders": ["orders.parquet"], "lines": ["lines.csv"]}}``); when it lands, every file it names is
checked against its table and all of them are appended in one commit of the database, or none
(a bad file or a bad manifest sends the manifest and its files to the dead-letter prefix). Data
files are left where they land until the manifest naming them arrives.

The dead-letter prefix and the landing prefix are reached through a :class:`LandingArea`: on S3
(:class:`S3LandingArea`) a move is CopyObject then DeleteObject, the actions the ingest role is
granted there, which the store interface does not offer as such.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from castable.database import Database
from castable.deployment.layout import DATABASES, FAILED_LANDING_PREFIX, LANDING, TABLES, landing, landing_name
from castable.errors import CastableError, InvalidInputError, SchemaMismatchError, TableNotFoundError
from castable.format.stats import file_rows, file_stats
from castable.inputs import sources
from castable.inputs.batches import conforming_batches
from castable.inputs.sources import MANIFEST_SUFFIX
from castable.ops.register import check_key, check_schema
from castable.store import ObjectNotFoundError, ObjectStore, S3Store
from castable.table import Table

logger = logging.getLogger(__name__)

Count = Callable[[str, int, str | None], None]
"""Counts ``value`` of the metric ``name`` for the table or database at URI ``target`` (``None``:
for the batch as a whole)."""


class Log(Protocol):
    """Where an intake logs what it did: a :class:`logging.Logger`, or the Lambda's Powertools one."""

    def info(self, msg: str, *, extra: Mapping[str, object]) -> None: ...

    def warning(self, msg: str, *, extra: Mapping[str, object]) -> None: ...

    def exception(self, msg: str, *, extra: Mapping[str, object]) -> None: ...


def _uncounted(name: str, value: int, target: str | None) -> None:
    """Counts nothing: an intake's default, outside a deployment's functions."""


class BadFileError(CastableError):
    """A landed file that can never be appended (unreadable, wrong schema, a bad value)."""


class UndecodableFileError(BadFileError):
    """A landed Parquet file whose footer passed but a page of which does not decode, found
    while the share streams."""

    def __init__(self, key: str, problem: Exception) -> None:
        super().__init__(f"{key} does not decode: {problem}")
        self.key = key


@dataclass(frozen=True)
class CheckedFile:
    """A landed file that was checked against its table; its rows are streamed again (ranged
    GETs pinned to its ETag, a row group or a block at a time) only when the share is appended,
    so memory stays bounded whatever the file size."""

    bucket: str
    key: str
    etag: str
    rows: int
    batches: Callable[[], Iterator[pa.RecordBatch]]
    new_columns: tuple[pa.Field, ...] = ()

    @property
    def source_id(self) -> str:
        """The file's idempotency key: the table records it with the commit that appends it."""
        digest = hashlib.sha256(f"{self.bucket}/{self.key}@{self.etag}".encode()).hexdigest()[:32]
        return f"ingest-file-{digest}"


class LandingArea:
    """A bucket's landed files, through its store (rooted at the bucket): read to be checked,
    removed once ingested, moved to the dead-letter prefix with their reason when bad."""

    def __init__(self, store: ObjectStore, bucket: str, dead_letter_prefix: str = FAILED_LANDING_PREFIX) -> None:
        self.store = store
        self.bucket = bucket
        """The bucket's name, as notices of its created objects give it."""
        self.dead_letter_prefix = dead_letter_prefix

    def copy(self, key: str, target: str) -> None:
        """Copy the object at ``key`` to ``target``."""
        self.store.put(target, self.store.get(key).data)

    def remove(self, key: str) -> None:
        """Remove the landed file at ``key``."""
        self.store.delete(key)

    def dead_letter(self, key: str, reason: str) -> None:
        """Move the landed file ``key`` to the dead-letter prefix with a ``.reason.json`` beside it."""
        target = self.dead_letter_prefix + key
        self.copy(key, target)
        self.store.put(target + ".reason.json", json.dumps({"source": key, "reason": reason}).encode())
        self.remove(key)


class S3LandingArea(LandingArea):
    """The landed files of the S3 bucket ``bucket``, through ``client``. A copy is one CopyObject
    (server-side: no byte passes through the function, whatever the file's size) and a removal one
    DeleteObject (a versioned bucket keeps the older versions, for its noncurrent-version expiry):
    the actions the ingest role has on ``landing/`` and the dead-letter prefix. The store's own
    delete takes every version of an object, and it copies only by multipart ranges."""

    def __init__(self, bucket: str, client: Any, dead_letter_prefix: str = FAILED_LANDING_PREFIX) -> None:
        super().__init__(S3Store(bucket, "", client), bucket, dead_letter_prefix)
        self.client = client

    def copy(self, key: str, target: str) -> None:
        self.client.copy_object(Bucket=self.bucket, Key=target, CopySource={"Bucket": self.bucket, "Key": key})

    def remove(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=key)


@dataclass
class TableShare:
    """A table's share of a batch: the landed files checked against it, appended (or upserted) in
    one commit, as its ingest properties say."""

    table: Table
    mode: str = "append"
    op_column: str | None = None
    schema_mode: str = "strict"
    files: list[CheckedFile] = field(default_factory=list)

    @classmethod
    def of(cls, table: Table) -> TableShare:
        """The share of ``table``, ingested as its properties (``ingest.*``) say."""
        settings = table.settings
        return cls(table, settings.ingest_mode, settings.ingest_op_column, settings.ingest_schema_mode)

    @property
    def schema(self) -> pa.Schema:
        """What a landed file holds: the table's columns, and the operation column of a change feed."""
        if self.op_column is None:
            return self.table.schema
        return self.table.schema.append(pa.field(self.op_column, pa.string()))

    def rows(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """A landed file's batches as rows of the table (its operation column set aside)."""
        table = self.table
        if self.op_column is None:
            return conforming_batches(batches, table.schema, table.primary_key)
        return conforming_batches((b.drop_columns([self.op_column]) for b in batches), table.schema, table.primary_key)

    def add(self, file: CheckedFile) -> None:
        """Take ``file`` into the share, once however often it was delivered."""
        if all(f.source_id != file.source_id for f in self.files):
            self.files.append(file)


class Intake:
    """What one batch of created objects ingests, by the name each lands for: each table's share,
    committed once every object of the batch is received; a database's batch manifests, each
    committed as it is received; and, for a name that is neither, the dead-letter prefix. Counts
    and logs go to ``count`` and ``log``."""

    def __init__(self, area: LandingArea, *, log: Log = logger, count: Count = _uncounted) -> None:
        self.area = area
        self.log = log
        self.count = count
        self.targets: dict[str, TableShare | Database | None] = {}
        """By name, what files landing for it go into (``None``: nothing)."""
        self.messages: dict[str, list[str]] = {}
        """By name, the messages of the batch that told of its files."""

    def receive(self, message_id: str, bucket: str, key: str) -> None:
        """Take message ``message_id``'s notice that ``bucket``/``key`` was created: a landed file
        is checked against its table (dead-lettered if bad), a database's batch manifest is
        ingested. What it cannot get past (S3 unreachable, say) is raised, so the message is retried."""
        name = landing_name(key) if bucket == self.area.bucket else None
        if name is None:
            self._skipped(bucket, key, "outside the landing prefix")
            return
        self.messages.setdefault(name, []).append(message_id)
        if name not in self.targets:
            self.targets[name] = self._target(name)
        target = self.targets[name]
        if isinstance(target, TableShare):
            self._receive_file(target, key)
        elif isinstance(target, Database):
            self._receive_for_database(target, name, key)
        elif sources.is_data_file(key) or key.endswith(MANIFEST_SUFFIX):
            uri = self.area.store.uri
            reason = f"no table {TABLES}/{name} nor database {DATABASES}/{name} in {uri}/ to land {key} in"
            self._dead_letter(key, reason, f"{uri}/{LANDING}/{name}")

    def commit(self, failed: Collection[str]) -> list[str]:
        """Commit each table's share, one commit a table; return the messages to retry, beside the
        ``failed`` ones: a share whose commit failed (S3 unreachable, say) is retried whole, and
        its files already appended are skipped then, while the other tables' shares land."""
        retry = []
        for name, target in self.targets.items():
            if not isinstance(target, TableShare):
                continue
            try:
                self._commit(target)
            except Exception:
                self.log.exception("ingest failed: its messages are retried", extra={"table": target.table.uri})
                self.count("IngestFailures", 1, target.table.uri)
                retry += [m for m in self.messages[name] if m not in failed]
        return retry

    def _target(self, name: str) -> TableShare | Database | None:
        found = landing(self.area.store, name)
        if found is None:
            return None
        if found.database is not None:
            return found.database
        assert found.table is not None
        return TableShare.of(found.table)

    def _skipped(self, bucket: str, key: str, why: str) -> None:
        self.count("RecordsSkipped", 1, None)
        self.log.warning(f"skipped: {why}", extra={"bucket": bucket, "key": key})

    def _dead_letter(self, key: str, reason: str, target: str) -> None:
        """Move landed file ``key`` to the dead-letter prefix with its reason; counted for
        ``target``, the URI of the table (or database, or landing prefix) it landed for."""
        self.area.dead_letter(key, reason)
        self.count("FilesDeadLettered", 1, target)
        self.log.warning("dead-lettered", extra={"key": key, "reason": reason})

    def _receive_file(self, share: TableShare, key: str) -> None:
        if not sources.is_data_file(key):  # _SUCCESS markers, .crc files: left where they are
            self._skipped(self.area.bucket, key, "not a data file")
            return
        try:
            checked = self._check(share, key)
        except BadFileError as e:
            self._dead_letter(key, str(e), share.table.uri)
            return
        if checked is not None:
            share.add(checked)

    def _check(self, share: TableShare, key: str) -> CheckedFile | None:
        """The landed file ``key`` checked against the share's table; ``None`` if it is gone (a
        duplicate delivery).

        Parquet is checked from its footer (schema, and no NULL key per its statistics); CSV and
        JSON Lines, which have no footer, are read through once, converted to the table's types,
        so a bad value dead-letters the file instead of failing the share's commit."""
        store, bucket = self.area.store, self.area.bucket
        try:
            info = store.head(key)
        except ObjectNotFoundError:
            self.log.info("already ingested or removed", extra={"key": key})
            return None
        table = share.table

        def opened() -> sources.Source:
            return sources.open_source(store.open_input(key, size=info.size, etag=info.etag), key, schema=share.schema)

        try:
            if sources.format_of(key) == "parquet":
                source = store.open_input(key, size=info.size, etag=info.etag)
                file = pq.ParquetFile(source, page_checksum_verification=True)
                found = file.schema_arrow
                expected = _expected(share.schema, found) if share.schema_mode == "merge" else share.schema
                check_schema(key, found, expected)
                if table.primary_key is not None:
                    check_key(key, table.primary_key, file_stats(file.metadata, table.schema)[table.primary_key])
                new = tuple(f for f in found if f.name not in share.schema.names)
                batches = lambda: _decoded(key, sources.file_batches(file))  # noqa: E731
                return CheckedFile(bucket, key, info.etag, file_rows(file.metadata), batches, new)
            rows = sum(b.num_rows for b in share.rows(opened().batches))
        except (pa.ArrowInvalid, OSError) as e:
            raise BadFileError(f"not a readable {sources.format_of(key)} file: {e}") from None
        except (SchemaMismatchError, InvalidInputError) as e:
            raise BadFileError(str(e) if key in str(e) else f"{key}: {e}") from None
        return CheckedFile(bucket, key, info.etag, rows, lambda: opened().batches)

    def _commit(self, share: TableShare) -> None:
        """Append the share's files in one commit, the files whose pages do not decode
        dead-lettered, then remove the share's files from the landing prefix."""
        while True:
            try:
                self._append(share)
                break
            except UndecodableFileError as e:  # nothing was committed: again, without that file
                self._dead_letter(e.key, str(e), share.table.uri)
                share.files = [f for f in share.files if f.key != e.key]
        for f in share.files:
            self.area.remove(f.key)

    def _append(self, share: TableShare) -> None:
        """Append (or upsert) the share's files another invocation has not, in one commit."""
        table = share.table
        recent = table.refresh().manifest.recent_commits
        done = [f for f in share.files if f.source_id in recent]
        if done:
            self.log.info("already ingested by another invocation", extra={"keys": [f.key for f in done]})
        pending = [f for f in share.files if f.source_id not in recent]
        if not any(f.rows for f in pending):
            return
        source_ids = sorted(f.source_id for f in pending)
        commit_id = "ingest-" + hashlib.sha256("\n".join(source_ids).encode()).hexdigest()[:32]
        stream = (b for f in pending for b in f.batches())
        # An overlapping share committed by another invocation meanwhile raises CommitConflictError:
        # the whole share is retried, and the retry skips the files that invocation appended.
        if share.mode == "upsert":
            version = table.upsert(
                stream, op_column=share.op_column, last_wins=True, commit_id=commit_id, source_ids=source_ids
            )
        else:
            self._add_columns(table, pending, commit_id)
            merge = share.schema_mode == "merge"
            version = table.append(
                stream, commit_id=commit_id, source_ids=source_ids, schema_mode="merge" if merge else "strict"
            )
        rows = sum(f.rows for f in pending)
        self.count("RowsIngested", rows, table.uri)
        self.log.info("ingested", extra={"table": table.uri, "version": version, "files": len(pending), "rows": rows})

    def _add_columns(self, table: Table, files: list[CheckedFile], commit_id: str) -> None:
        """Add the columns the files bring (merge mode), in one commit before their append."""
        new: dict[str, pa.Field] = {}
        for f in files:
            for column in f.new_columns:
                new.setdefault(column.name, column)
        fresh = [c for c in new.values() if c.name not in table.refresh().schema.names]
        if not fresh:
            return
        version = table.add_columns(fresh, commit_id=f"{commit_id}-columns")
        columns = [c.name for c in fresh]
        self.log.info("columns added", extra={"table": table.uri, "version": version, "columns": columns})

    # -------------------------------------------------------------- several tables, one transaction

    def _receive_for_database(self, database: Database, name: str, key: str) -> None:
        prefix = f"{LANDING}/{name}/"
        if not _inside(prefix, key):
            self._skipped(self.area.bucket, key, "outside the landing prefix")
        elif key.endswith(MANIFEST_SUFFIX):
            self._ingest_manifest(database, prefix, key)
        else:
            self.log.info("a data file: appended when the manifest naming it lands", extra={"key": key})

    def _ingest_manifest(self, database: Database, prefix: str, key: str) -> None:
        """Append every file the landed batch manifest ``key`` names to its table of
        ``database``, all in one transaction, once."""
        store = self.area.store
        try:
            manifest = store.get(key)
        except ObjectNotFoundError:
            self.log.info("already ingested or removed", extra={"key": key})
            return
        digest = hashlib.sha256(f"{self.area.bucket}/{key}@{manifest.etag}".encode()).hexdigest()[:32]
        tx = database.transaction(commit_id=f"ingest-{digest}").begin()
        if database.committed_version(tx.commit_id) is not None:
            tx.abort()
            self.log.info("already ingested by another invocation", extra={"key": key})
            self._remove_batch(key, _targets(prefix, key, manifest.data))
            return
        try:
            targets = _targets(prefix, key, manifest.data)
            checked = {name: [self._member_file(database, name, k) for k in keys] for name, keys in targets.items()}
            for name, files in checked.items():
                table = tx.table(name)
                pending = [f for f in files if f.source_id not in table.manifest.recent_commits]
                if any(f.rows for f in pending):
                    stream = (b for f in pending for b in f.batches())
                    table.append(stream, source_ids=sorted(f.source_id for f in pending))
        except BadFileError as e:  # a file that does not decode is found as it streams
            tx.abort()
            for k in [key, *_named(store, key, manifest.data)]:
                self._dead_letter(k, str(e), database.uri)
            return
        if tx.tables_written:
            version = tx.commit()
            rows = sum(f.rows for files in checked.values() for f in files)
            self.count("RowsIngested", rows, database.uri)
            extra = {"database": database.uri, "database_version": version, "tables": tx.tables_written}
            self.log.info("ingested", extra={**extra, "rows": rows})
        else:
            tx.abort()
        self._remove_batch(key, targets)

    def _member_file(self, database: Database, name: str, key: str) -> CheckedFile:
        """The file ``key`` a batch manifest names for the member table ``name``, checked against it."""
        try:
            table = database.table(name)
        except (TableNotFoundError, InvalidInputError) as e:
            raise BadFileError(str(e)) from None
        checked = self._check(TableShare(table), key)
        if checked is None:
            raise BadFileError(f"{key}, named by the manifest for table {name!r}, does not exist")
        return checked

    def _remove_batch(self, key: str, targets: dict[str, list[str]]) -> None:
        """Remove the files of an ingested batch manifest, then the manifest."""
        for k in [*(k for keys in targets.values() for k in keys), key]:
            self.area.remove(k)


def _expected(schema: pa.Schema, found: pa.Schema) -> pa.Schema:
    """What a landed file may hold in merge mode: the table's columns, less the nullable ones it
    lacks, plus its own new columns."""
    kept = [f for f in schema if f.name in found.names or not f.nullable]
    return pa.schema(kept + [f for f in found if f.name not in schema.names])


def _decoded(key: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches`` of the landed file ``key``; a page that does not decode is an ``UndecodableFileError``."""
    try:
        yield from batches
    except (pa.ArrowInvalid, OSError) as e:
        raise UndecodableFileError(key, e) from None


def _inside(prefix: str, key: str) -> bool:
    """Whether ``key`` is a landed file's key under ``prefix`` (no ``..`` nor empty segment)."""
    return key.startswith(prefix) and ".." not in key.split("/") and "//" not in key


def _targets(prefix: str, key: str, data: bytes) -> dict[str, list[str]]:
    """The tables of the batch manifest ``key`` (of ``data``) under ``prefix`` and the landing keys
    of their files, checked; ``BadFileError`` if not."""
    folder = key.rpartition("/")[0]
    targets = {}
    for name, files in _manifest_tables(data).items():
        keys = [f"{folder}/{f}" if folder else f for f in files]
        outside = [f for f, k in zip(files, keys, strict=True) if not _inside(prefix, k) or k == key]
        if outside or not files:
            raise BadFileError(f"table {name!r}: files outside the landing prefix, or none: {outside}")
        targets[name] = keys
    return targets


def _manifest_tables(data: bytes) -> dict[str, list[str]]:
    """The ``tables`` of a batch manifest, ``{"tables": {"orders": ["orders.parquet"]}}``, the files
    named relative to the manifest's folder; ``BadFileError`` saying what is wrong if it is not one."""
    try:
        doc = json.loads(data)
    except ValueError as e:
        problem: str | None = f"not JSON: {e}"
    else:
        problem = _manifest_problem(doc)
    if problem is not None:
        raise BadFileError(f'not a batch manifest ({{"tables": {{table: [files]}}}}): {problem}')
    tables: dict[str, list[str]] = doc["tables"]
    return tables


def _manifest_problem(doc: object) -> str | None:
    """What keeps the JSON document ``doc`` from being a batch manifest, if anything."""
    if not isinstance(doc, dict):
        return "not an object"
    if list(doc) != ["tables"]:
        return f"its keys are {sorted(doc)}, not tables alone"
    tables = doc["tables"]
    if not isinstance(tables, dict) or not tables:
        return "tables does not name a table"
    for name, files in tables.items():
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            return f"the files of table {name!r} are not a list of names"
    return None


def _named(store: ObjectStore, key: str, data: bytes) -> list[str]:
    """The landing keys a (possibly malformed) manifest ``data`` names that exist: they go to the
    dead-letter prefix with it."""
    try:
        doc = json.loads(data)
        folder = key.rpartition("/")[0]
        keys = [f"{folder}/{f}" for files in doc["tables"].values() for f in files if isinstance(f, str)]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []
    return [k for k in dict.fromkeys(keys) if ".." not in k.split("/") and k != key and store.exists(k)]
