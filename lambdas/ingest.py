"""Ingest Lambda: append files landing in S3 (Parquet, CSV, JSON Lines, gzipped or not), one
commit per table a batch of SQS messages; one function for every table of the deployment.

Each SQS message carries EventBridge's S3 "Object Created" event for a key under
``landing/<name>/`` (the route function gave it the message group ``<name>``, so the queue shares
this function fairly among tables). A batch is split by name: ``<name>`` is the table
``tables/<name>`` or, failing that, the database ``databases/<name>``; how to ingest comes from
the table's own properties (``ingest.mode``, ``ingest.op-column``, ``ingest.schema-mode``), so a
table created by any writer is ingested at once. Files for a name that is neither go to the
dead-letter prefix. One table's failure (S3 unreachable while it commits, say) is reported in
``batchItemFailures`` for that table's messages only; the other tables' files still land.

Every file of a table's share is checked against the table first (a Parquet file by its footer:
schema, no NULL key; a CSV or JSON Lines file, parsed with the table's types, by reading it
through once); the good files are then streamed, a row group or a block at a time over ranged
GETs, into one commit, and removed from the landing prefix, so memory stays bounded whatever
the file size. The format comes from the file name (``castable.inputs.sources.format_of``). A bad file
(unreadable, wrong schema, a value that does not convert) goes to the dead-letter prefix with a
``.reason.json`` beside it and its message succeeds, so it is never retried forever nor blocks
the others. A Parquet data page that does not decode (or fails its CRC) is found as the batch
streams: that file goes to the dead-letter prefix and the share is appended again without it,
still in one commit. A record for another bucket or a key outside ``landing/<name>/`` is logged
and skipped: nothing is read, copied, appended or deleted there.

``ingest.mode=append`` (the default) streams the rows in; ``upsert`` replaces the live rows with
the landed rows' primary keys (``Table.upsert``, the last row of a key in the batch winning,
files in the order of their messages). With ``ingest.op-column`` the landed files are a change
feed (Debezium style): that extra text column holds each row's operation, and a row whose
operation is ``d`` or ``delete`` deletes its key. An upsert holds the batch's rows in memory.
``ingest.schema-mode=strict`` (the default) dead-letters a Parquet file with columns the table
lacks; ``merge`` adds them (one ``alter`` commit, as nullable columns) before the append, and a
file lacking some nullable columns reads them as NULL.

A database's landing prefix takes batches for several tables in one transaction: a landed
``<name>.manifest.json`` names the files beside it and the table each goes to (``{"tables":
{"orders": ["orders.parquet"], "lines": ["lines.csv"]}}``); when it lands, every file it names is
checked against its table and all of them are appended in one commit of the database, or none
(a bad file or a bad manifest sends the manifest and its files to the dead-letter prefix). Data
files are left where they land until the manifest naming them arrives.

Environment: ``CASTABLE_BUCKET`` (the deployment's bucket), ``CASTABLE_DEAD_LETTER_PREFIX``
(default ``landing-failed/``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes import S3EventBridgeNotificationEvent
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field, ValidationError

import castable
from castable.deployment.layout import DATABASES, FAILED_LANDING_PREFIX, LANDING, TABLES, landing, landing_name
from castable.format.stats import file_rows, file_stats
from castable.inputs import sources
from castable.inputs.batches import conforming_batches
from castable.inputs.sources import MANIFEST_SUFFIX
from castable.ops.register import check_key, check_schema
from castable.store import ObjectNotFoundError, S3Store, shared_s3_client
from lambdas.runtime import count, logger, metrics, tracer


def _s3() -> Any:
    """The process's S3 client (settings from the environment): castable's, whose standard retry
    mode sends a request whose answer was lost up to 8 times (the SDK's legacy default gives up
    after 3 lost answers in a row)."""
    return shared_s3_client()


@dataclass(frozen=True)
class Landed:
    """A landed file that was checked against the table; its rows are streamed again (ranged
    GETs pinned to its ETag, a row group or a block at a time) only when the batch is appended,
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


class BadFileError(castable.CastableError):
    """A landed file that can never be appended (unreadable, wrong schema, a bad value)."""


class UndecodableFileError(BadFileError):
    """A landed Parquet file whose footer passed but a page of which does not decode, found
    while the batch streams."""

    def __init__(self, key: str, problem: Exception) -> None:
        super().__init__(f"{key} does not decode: {problem}")
        self.key = key


def _decoded(key: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches`` of the landed file ``key``; a page that does not decode is an ``UndecodableFileError``."""
    try:
        yield from batches
    except (pa.ArrowInvalid, OSError) as e:
        raise UndecodableFileError(key, e) from None


@dataclass
class _Batch:
    table: castable.Table
    landing_bucket: str
    landing_prefix: str
    dead_letter_prefix: str
    landed: list[Landed]
    mode: str = "append"
    op_column: str | None = None
    schema_mode: str = "strict"

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

    def owns(self, bucket: str, key: str) -> bool:
        """Whether ``bucket``/``key`` lies under this function's landing prefix."""
        return bucket == self.landing_bucket and key.startswith(self.landing_prefix) and ".." not in key.split("/")


def _expected(schema: pa.Schema, found: pa.Schema) -> pa.Schema:
    """What a landed file may hold in merge mode: the table's columns, less the nullable ones it
    lacks, plus its own new columns."""
    kept = [f for f in schema if f.name in found.names or not f.nullable]
    return pa.schema(kept + [f for f in found if f.name not in schema.names])


def _open(batch: _Batch, bucket: str, key: str) -> Landed | None:
    """The landed file checked against the table; ``None`` if it is gone (a duplicate delivery).

    Parquet is checked from its footer (schema, and no NULL key per its statistics); CSV and
    JSON Lines, which have no footer, are read through once, converted to the table's types,
    so a bad value dead-letters the file instead of failing the batch's commit."""
    landing = S3Store(bucket, "", _s3())
    try:
        info = landing.head(key)
    except ObjectNotFoundError:
        logger.info("already ingested or removed", extra={"key": key})
        return None
    table = batch.table

    def opened() -> sources.Source:
        return sources.open_source(landing.open_input(key, size=info.size, etag=info.etag), key, schema=batch.schema)

    try:
        if sources.format_of(key) == "parquet":
            source = landing.open_input(key, size=info.size, etag=info.etag)
            file = pq.ParquetFile(source, page_checksum_verification=True)
            found = file.schema_arrow
            expected = _expected(batch.schema, found) if batch.schema_mode == "merge" else batch.schema
            check_schema(key, found, expected)
            if table.primary_key is not None:
                check_key(key, table.primary_key, file_stats(file.metadata, table.schema)[table.primary_key])
            new = tuple(f for f in found if f.name not in batch.schema.names)
            batches = lambda: _decoded(key, sources.file_batches(file))  # noqa: E731
            return Landed(bucket, key, info.etag, file_rows(file.metadata), batches, new)
        rows = sum(b.num_rows for b in batch.rows(opened().batches))
    except (pa.ArrowInvalid, OSError) as e:
        raise BadFileError(f"not a readable {sources.format_of(key)} file: {e}") from None
    except (castable.SchemaMismatchError, castable.InvalidInputError) as e:
        raise BadFileError(str(e) if key in str(e) else f"{key}: {e}") from None
    return Landed(bucket, key, info.etag, rows, lambda: opened().batches)


def _dead_letter(dead_letter_prefix: str, bucket: str, key: str, reason: str, target: str) -> None:
    """Move landed file ``key`` to the dead-letter prefix with a ``.reason.json`` beside it;
    counted for ``target``, the URI of the table (or database) it landed for."""
    target = dead_letter_prefix + key
    _s3().copy_object(Bucket=bucket, Key=target, CopySource={"Bucket": bucket, "Key": key})
    _s3().put_object(Bucket=bucket, Key=target + ".reason.json", Body=json.dumps({"source": key, "reason": reason}))
    _s3().delete_object(Bucket=bucket, Key=key)
    count("FilesDeadLettered", 1, target)
    logger.warning("dead-lettered", extra={"key": key, "reason": reason})


def _created(record: SQSRecord) -> tuple[str, str] | None:
    """The bucket and key of the object a message says was created (``None`` for any other
    event); a body that is not JSON is a ``ValueError``, so the message is retried and then
    kept in the queue's dead letters."""
    event = S3EventBridgeNotificationEvent(json.loads(record.body))
    if event.get("detail-type") != "Object Created" or not isinstance(event.get("detail"), dict):
        return None
    return event.detail.bucket.name, event.detail.object.key


def _skipped(bucket: str, key: str, why: str) -> None:
    metrics.add_metric(name="RecordsSkipped", unit=MetricUnit.Count, value=1)
    logger.warning(f"skipped: {why}", extra={"bucket": bucket, "key": key})


def _make_record_handler(batch: _Batch) -> Callable[[SQSRecord], None]:
    def record_handler(record: SQSRecord) -> None:
        created = _created(record)
        if created is None:
            return
        bucket, key = created
        if not batch.owns(bucket, key):
            _skipped(bucket, key, "outside the landing prefix")
            return
        if not sources.is_data_file(key):  # _SUCCESS markers, .crc files: left where they are
            _skipped(bucket, key, "not a data file")
            return
        try:
            landed = _open(batch, bucket, key)
        except BadFileError as e:
            _dead_letter(batch.dead_letter_prefix, bucket, key, str(e), batch.table.uri)
            return
        if landed is not None and all(f.source_id != landed.source_id for f in batch.landed):
            batch.landed.append(landed)

    return record_handler


def _add_columns(table: castable.Table, landed: list[Landed], commit_id: str) -> None:
    """Add the columns the landed files bring (merge mode), in one commit before their append."""
    new: dict[str, pa.Field] = {}
    for f in landed:
        for column in f.new_columns:
            new.setdefault(column.name, column)
    fresh = [c for c in new.values() if c.name not in table.refresh().schema.names]
    if not fresh:
        return
    version = table.add_columns(fresh, commit_id=f"{commit_id}-columns")
    logger.info("columns added", extra={"table": table.uri, "version": version, "columns": [c.name for c in fresh]})


# ------------------------------------------------------------------ several tables, one transaction


class TargetsDocument(BaseModel):
    """A batch manifest: ``{"tables": {"orders": ["orders.parquet"], "lines": ["lines.csv"]}}``,
    the files named relative to the manifest's folder."""

    model_config = ConfigDict(extra="forbid")
    tables: dict[str, list[str]] = Field(min_length=1)


@dataclass
class _Manifests:
    database: castable.Database
    landing_bucket: str
    landing_prefix: str
    dead_letter_prefix: str

    def targets(self, key: str, data: bytes) -> dict[str, list[str]]:
        """The manifest's tables and the landing keys of their files, checked; ``BadFileError`` if not."""
        try:
            doc = TargetsDocument.model_validate_json(data)
        except ValidationError as e:
            raise BadFileError(f'not a batch manifest ({{"tables": {{table: [files]}}}}): {e}') from None
        folder = key.rpartition("/")[0]
        targets = {}
        for name, files in doc.tables.items():
            keys = [f"{folder}/{f}" if folder else f for f in files]
            outside = [f for f, k in zip(files, keys, strict=True) if not _inside(self, k) or k == key]
            if outside or not files:
                raise BadFileError(f"table {name!r}: files outside the landing prefix, or none: {outside}")
            targets[name] = keys
        return targets

    def append(self, key: str) -> None:
        """Append every file a landed manifest names to its table, all in one transaction."""
        landing = S3Store(self.landing_bucket, "", _s3())
        try:
            manifest = landing.get(key)
        except ObjectNotFoundError:
            logger.info("already ingested or removed", extra={"key": key})
            return
        digest = hashlib.sha256(f"{self.landing_bucket}/{key}@{manifest.etag}".encode()).hexdigest()[:32]
        tx = self.database.transaction(commit_id=f"ingest-{digest}").begin()
        if self.database.committed_version(tx.commit_id) is not None:
            tx.abort()
            logger.info("already ingested by another invocation", extra={"key": key})
            self._remove(key, self.targets(key, manifest.data))
            return
        try:
            targets = self.targets(key, manifest.data)
            opened = {name: [self._open(name, k) for k in keys] for name, keys in targets.items()}
            for name, landed in opened.items():
                table = tx.table(name)
                pending = [f for f in landed if f.source_id not in table.manifest.recent_commits]
                if any(f.rows for f in pending):
                    stream = (b for f in pending for b in f.batches())
                    table.append(stream, source_ids=sorted(f.source_id for f in pending))
        except BadFileError as e:  # a file that does not decode is found as it streams
            tx.abort()
            for k in [key, *_named(landing, key, manifest.data)]:
                _dead_letter(self.dead_letter_prefix, self.landing_bucket, k, str(e), self.database.uri)
            return
        if tx.tables_written:
            version = tx.commit()
            rows = sum(f.rows for landed in opened.values() for f in landed)
            count("RowsIngested", rows, self.database.uri)
            extra = {"database": self.database.uri, "database_version": version, "tables": tx.tables_written}
            logger.info("ingested", extra={**extra, "rows": rows})
        else:
            tx.abort()
        self._remove(key, targets)

    def _open(self, name: str, key: str) -> Landed:
        try:
            table = self.database.table(name)
        except (castable.TableNotFoundError, castable.InvalidInputError) as e:
            raise BadFileError(str(e)) from None
        batch = _Batch(table, self.landing_bucket, self.landing_prefix, self.dead_letter_prefix, [])
        landed = _open(batch, self.landing_bucket, key)
        if landed is None:
            raise BadFileError(f"{key}, named by the manifest for table {name!r}, does not exist")
        return landed

    def _remove(self, key: str, targets: dict[str, list[str]]) -> None:
        for k in [*(k for keys in targets.values() for k in keys), key]:
            _s3().delete_object(Bucket=self.landing_bucket, Key=k)


def _inside(manifests: _Manifests, key: str) -> bool:
    return key.startswith(manifests.landing_prefix) and ".." not in key.split("/") and "//" not in key


def _named(landing: S3Store, key: str, data: bytes) -> list[str]:
    """The landing keys a (possibly malformed) manifest ``data`` names that exist: they go to the
    dead-letter prefix with it."""
    try:
        doc = json.loads(data)
        folder = key.rpartition("/")[0]
        keys = [f"{folder}/{f}" for files in doc["tables"].values() for f in files if isinstance(f, str)]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []
    return [k for k in dict.fromkeys(keys) if ".." not in k.split("/") and k != key and landing.exists(k)]


def _make_manifest_handler(manifests: _Manifests) -> Callable[[SQSRecord], None]:
    def record_handler(record: SQSRecord) -> None:
        created = _created(record)
        if created is None:
            return
        bucket, key = created
        if bucket != manifests.landing_bucket or not _inside(manifests, key):
            _skipped(bucket, key, "outside the landing prefix")
        elif key.endswith(MANIFEST_SUFFIX):
            manifests.append(key)
        else:
            logger.info("a data file: appended when the manifest naming it lands", extra={"key": key})

    return record_handler


def _make_unserved_handler(bucket: str, dead_letter_prefix: str, name: str) -> Callable[[SQSRecord], None]:
    """Messages for ``landing/<name>/`` with neither a table nor a database of that name: its
    files go to the dead-letter prefix, saying so (a table created later ingests what lands after)."""

    def record_handler(record: SQSRecord) -> None:
        created = _created(record)
        if created is None:
            return
        key = created[1]
        if sources.is_data_file(key) or key.endswith(MANIFEST_SUFFIX):
            reason = f"no table {TABLES}/{name} nor database {DATABASES}/{name} in s3://{bucket}/ to land {key} in"
            _dead_letter(dead_letter_prefix, bucket, key, reason, f"s3://{bucket}/{LANDING}/{name}")

    return record_handler


@dataclass
class _Landings:
    """What one invocation ingests, by the name files land for: each name's record handler (a
    table's, a database's, or one for a name that is neither), the table batches to commit once
    every record is read, and which messages each name's share holds."""

    bucket: str
    dead_letter_prefix: str
    handlers: dict[str, Callable[[SQSRecord], None]] = field(default_factory=dict)
    batches: dict[str, _Batch] = field(default_factory=dict)
    messages: dict[str, list[str]] = field(default_factory=dict)

    def handle(self, record: SQSRecord) -> None:
        """Read one message: a landed file is checked against the table it lands for."""
        created = _created(record)
        if created is None:
            return
        bucket, key = created
        name = landing_name(key) if bucket == self.bucket else None
        if name is None:
            _skipped(bucket, key, "outside the landing prefix")
            return
        self.messages.setdefault(name, []).append(record.message_id)
        if name not in self.handlers:
            self.handlers[name] = self._handler(name)
        self.handlers[name](record)

    def _handler(self, name: str) -> Callable[[SQSRecord], None]:
        target = landing(S3Store(self.bucket, "", _s3()), name)
        prefix = f"{LANDING}/{name}/"
        if target is None:
            return _make_unserved_handler(self.bucket, self.dead_letter_prefix, name)
        if target.database is not None:
            manifests = _Manifests(target.database, self.bucket, prefix, self.dead_letter_prefix)
            return _make_manifest_handler(manifests)
        assert target.table is not None
        settings = target.table.settings
        batch = _Batch(
            table=target.table,
            landing_bucket=self.bucket,
            landing_prefix=prefix,
            dead_letter_prefix=self.dead_letter_prefix,
            landed=[],
            mode=settings.ingest_mode,
            op_column=settings.ingest_op_column,
            schema_mode=settings.ingest_schema_mode,
        )
        self.batches[name] = batch
        return _make_record_handler(batch)

    def commit(self, failed: set[str]) -> list[str]:
        """Commit each table's share, one commit a table; the messages to retry: a share whose
        commit failed (S3 unreachable, say) is retried whole, and its files already appended
        are skipped then, while the other tables' shares land."""
        retry = []
        for name, batch in self.batches.items():
            try:
                _commit(batch)
            except Exception:
                logger.exception("ingest failed: its messages are retried", extra={"table": batch.table.uri})
                count("IngestFailures", 1, batch.table.uri)
                retry += [m for m in self.messages[name] if m not in failed]
        return retry


def _commit(batch: _Batch) -> None:
    """Append the batch's files in one commit, the files whose pages do not decode dead-lettered,
    then remove the appended files from the landing prefix."""
    while True:
        try:
            _append_batch(batch)
            break
        except UndecodableFileError as e:  # nothing was committed: again, without that file
            _dead_letter(batch.dead_letter_prefix, batch.landing_bucket, e.key, str(e), batch.table.uri)
            batch.landed = [f for f in batch.landed if f.key != e.key]
    for f in batch.landed:
        _s3().delete_object(Bucket=f.bucket, Key=f.key)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    metrics.add_metric(name="Messages", unit=MetricUnit.Count, value=len(event.get("Records", [])))
    landings = _Landings(
        os.environ["CASTABLE_BUCKET"], os.environ.get("CASTABLE_DEAD_LETTER_PREFIX", FAILED_LANDING_PREFIX)
    )
    processor = BatchProcessor(event_type=EventType.SQS)
    response = process_partial_response(event, landings.handle, processor, context)
    failed = [str(f["itemIdentifier"]) for f in response["batchItemFailures"]]
    failed += landings.commit(set(failed))
    return {"batchItemFailures": [{"itemIdentifier": m} for m in failed]}


def _append_batch(batch: _Batch) -> None:
    """Append (or upsert) the batch's files another invocation has not, in one commit."""
    recent = batch.table.refresh().manifest.recent_commits
    done = [f for f in batch.landed if f.source_id in recent]
    if done:
        logger.info("already ingested by another invocation", extra={"keys": [f.key for f in done]})
    pending = [f for f in batch.landed if f.source_id not in recent]
    if not any(f.rows for f in pending):
        return
    source_ids = sorted(f.source_id for f in pending)
    commit_id = "ingest-" + hashlib.sha256("\n".join(source_ids).encode()).hexdigest()[:32]
    stream = (b for f in pending for b in f.batches())
    # An overlapping batch committed by another invocation meanwhile raises CommitConflictError:
    # the whole batch is retried, and the retry skips the files that invocation appended.
    if batch.mode == "upsert":
        version = batch.table.upsert(
            stream, op_column=batch.op_column, last_wins=True, commit_id=commit_id, source_ids=source_ids
        )
    else:
        _add_columns(batch.table, pending, commit_id)
        merge = batch.schema_mode == "merge"
        version = batch.table.append(
            stream, commit_id=commit_id, source_ids=source_ids, schema_mode="merge" if merge else "strict"
        )
    rows = sum(f.rows for f in pending)
    count("RowsIngested", rows, batch.table.uri)
    logger.info("ingested", extra={"table": batch.table.uri, "version": version, "files": len(pending), "rows": rows})
