"""Commit Lambda: register Parquet files written elsewhere (Spark on EMR, ...) in one commit.

Event: ``{"table": "s3://bucket/prefix", "files": ["data/.../part-0.parquet", ...],
"commit_id": "job-run-42", "mode": "append"}``, or ``"file_list": "data/_file_lists/..."``
instead of ``files``: the entries a Spark job's executors wrote, statistics included
(``castable.ops.register.write_file_list``), any number of them, checked by listing their
directories (or one HEAD each where a directory holds few of them) and each against its footer
(a range GET each, 64 at once): an entry whose rows, row groups, statistics or columns disagree
with the file refuses the whole commit (``FileMismatchError``, ``SchemaMismatchError``). One
invocation checks about 100 to 200 footers a second, so in Lambda a list of more than
:data:`CHECK_SLICE_FILES` entries is split: the function invokes itself once per slice, up to
:data:`CHECK_INVOCATIONS` at once, each with ``"check": [start, stop]`` (and the list's ETag, so
every slice reads the list the commit reads), which only checks those entries and returns
``{"checked": n}``; a slice's refusal refuses the commit, with its error class, and nothing is
committed. Each invocation of a 200,000-file list then checks 20,000 files, within the 900 s.
``mode`` is ``append`` (the default), ``upsert`` (the files' rows replace the live rows with
their primary keys) or ``overwrite`` (they replace the whole table, or with ``"where":
"<predicate>"`` the rows matching it), as ``Table.add_files``. The ``commit_id`` makes retried invocations idempotent.
Every file must exist under the table's ``data/`` prefix, match the table schema and decode
(``"verify": "footer"`` reads footers and INT96 columns only, as the Spark ingest job asks for
the files it has just written); otherwise the function fails with a clear error and changes
nothing.

``{"table", "commit_id", "add_columns": [{"name": "tag", "type": "string"}]}`` instead adds
nullable columns in one commit (types as ``castable info`` prints them): a Spark write with
``mergeSchema`` adds the columns its data brings before it writes files with them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any

import pyarrow as pa
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ConfigDict, Discriminator, Field, NonNegativeInt, RootModel, Tag, model_validator

from castable.deployment.invocation import invoke, lambda_client
from castable.format.manifest import DataFile
from castable.inputs.types import parse_type
from castable.ops.register import Check, Verify, check_file_list, file_list_etag, read_file_list
from castable.ops.writes import AddMode
from castable.table import Table
from lambdas.runtime import TableUri, lambda_handler, logger, metrics, open_table, tracer

CHECK_SLICE_FILES = 20_000
"""The most entries of a file list one invocation checks (``CASTABLE_CHECK_SLICE_FILES``
overrides it): about 100 to 200 s of footers at 5 to 10 ms a file, well within Lambda's 900 s."""
CHECK_INVOCATIONS = 16
"""Slices checked at once, each by an invocation of this function (of the account's concurrency)."""


class NewColumn(BaseModel):
    """A nullable column to add, its type as ``castable info`` prints it."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=1024)
    type: str = Field(min_length=1, max_length=4096)


class CommitEvent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    table: TableUri
    files: list[str] | None = Field(default=None, min_length=1, max_length=10_000)
    """Paths whose footers the function reads (at most 10,000: a path list rides in the event)."""
    file_list: str | None = Field(default=None, min_length=1)
    """A file list under the table's ``data/_file_lists/``: entries with their statistics."""
    commit_id: str = Field(min_length=1, max_length=256)
    mode: AddMode = "append"
    where: str | None = Field(default=None, min_length=1, max_length=65_536)
    verify: Check = "decode"
    add_columns: list[NewColumn] | None = Field(default=None, min_length=1, max_length=1_000)
    """Columns to add (a schema change of its own), instead of files to register."""

    @model_validator(mode="after")
    def _one_source(self) -> CommitEvent:
        if sum(x is not None for x in (self.files, self.file_list, self.add_columns)) != 1:
            raise ValueError("give one of files, file_list or add_columns")
        if self.add_columns is not None and (self.mode != "append" or self.where is not None):
            raise ValueError("add_columns takes no mode or where")
        return self


class CheckEvent(BaseModel):
    """Check entries ``[start, stop)`` of a file list (of ETag ``file_list_etag``) for the
    invocation committing it; nothing is committed."""

    model_config = ConfigDict(extra="forbid")

    table: TableUri
    file_list: str = Field(min_length=1)
    file_list_etag: str = Field(min_length=1)
    commit_id: str = Field(min_length=1, max_length=256)
    check: tuple[NonNegativeInt, NonNegativeInt]


def _kind(event: Any) -> str:
    return "check" if isinstance(event, dict) and "check" in event else "commit"


class CommitRequest(
    RootModel[
        Annotated[Annotated[CommitEvent, Tag("commit")] | Annotated[CheckEvent, Tag("check")], Discriminator(_kind)]
    ]
):
    """A commit, or (with ``check``) a slice of a file list to check for one."""


@lambda_handler(CommitRequest)
@tracer.capture_method
def handler(request: CommitRequest) -> dict[str, Any]:
    event = request.root
    return check_slice(event) if isinstance(event, CheckEvent) else commit(event)


def check_slice(event: CheckEvent) -> dict[str, Any]:
    """Check one slice of a file list against the files' objects and footers."""
    table = open_table(event.table)
    start, stop = event.check
    checked = check_file_list(table.store, event.file_list, table.schema, start, stop, etag=event.file_list_etag)
    metrics.add_metric(name="FilesChecked", unit=MetricUnit.Count, value=checked)
    return {"checked": checked}


def commit(event: CommitEvent) -> dict[str, Any]:
    """Commit the event's files (or columns) once per ``commit_id``; its result."""
    table = open_table(event.table)
    files: Sequence[str | DataFile] = []
    version = table.committed_version(event.commit_id)  # a retry: its file list may be gone already
    if version is None and event.add_columns is not None:
        columns = [pa.field(c.name, parse_type(c.type)) for c in event.add_columns]
        version = table.add_columns(columns, commit_id=event.commit_id).version
    elif version is None:
        files, verify = listed_files(table, event)
        version = table.add_files(
            files, mode=event.mode, where=event.where, commit_id=event.commit_id, verify=verify
        ).version
    summary = table.manifest_at(version).commit.summary
    logger.info("committed", extra={"version": version, "commit_id": event.commit_id, "summary": summary})
    metrics.add_metric(name="FilesCommitted", unit=MetricUnit.Count, value=len(files))
    return {"table": event.table, "version": version, "commit_id": event.commit_id, "summary": summary}


def listed_files(table: Table, event: CommitEvent) -> tuple[Sequence[str | DataFile], Verify]:
    """The event's files and what is left to check of them: a file list longer than a slice is
    checked here, in Lambda, by invocations of this function, a slice each, in parallel."""
    if event.file_list is None:
        return event.files or [], event.verify
    etag = file_list_etag(table.store, event.file_list)
    entries = read_file_list(table.store, event.file_list, table.schema, etag=etag)
    size = int(os.environ.get("CASTABLE_CHECK_SLICE_FILES", CHECK_SLICE_FILES))
    function = os.environ.get("AWS_LAMBDA_FUNCTION_NAME")  # set by the Lambda runtime
    if function is None or len(entries) <= size:
        return entries, event.verify
    base = {"table": event.table, "file_list": event.file_list, "file_list_etag": etag, "commit_id": event.commit_id}
    slices = [[start, min(start + size, len(entries))] for start in range(0, len(entries), size)]
    client = lambda_client()
    pool = ThreadPoolExecutor(min(CHECK_INVOCATIONS, len(slices)))
    try:  # the first refusal raises here; slices not yet begun are not invoked
        checked = sum(r["checked"] for r in pool.map(lambda s: invoke(function, {**base, "check": s}, client), slices))
    finally:
        pool.shutdown(cancel_futures=True)
    logger.info("file list checked", extra={"entries": checked, "slices": len(slices)})
    return entries, "checked"
