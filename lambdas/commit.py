"""Commit Lambda: register Parquet files written elsewhere (Spark on EMR, ...) in one commit.

Event: ``{"table": "s3://bucket/prefix", "files": ["data/.../part-0.parquet", ...],
"commit_id": "job-run-42", "mode": "append"}``, or ``"file_list": "data/_file_lists/..."``
instead of ``files``: the entries a Spark job's executors wrote, statistics included
(``castable.register.write_file_list``), any number of them, checked by listing their
directories (or one HEAD each where a directory holds few of them) and each against its footer
(a range GET each, 64 at once): an entry whose rows, row groups, statistics or columns disagree
with the file refuses the whole commit (``FileMismatchError``, ``SchemaMismatchError``).
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

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ConfigDict, Field, model_validator

from castable.manifest import DataFile
from castable.register import Verify, read_file_list
from castable.types import parse_type
from castable.writes import AddMode
from lambdas.runtime import TableUri, lambda_handler, logger, metrics, open_table, tracer


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
    verify: Verify = "decode"
    add_columns: list[NewColumn] | None = Field(default=None, min_length=1, max_length=1_000)
    """Columns to add (a schema change of its own), instead of files to register."""

    @model_validator(mode="after")
    def _one_source(self) -> CommitEvent:
        if sum(x is not None for x in (self.files, self.file_list, self.add_columns)) != 1:
            raise ValueError("give one of files, file_list or add_columns")
        if self.add_columns is not None and (self.mode != "append" or self.where is not None):
            raise ValueError("add_columns takes no mode or where")
        return self


@lambda_handler(CommitEvent)
@tracer.capture_method
def handler(event: CommitEvent) -> dict[str, Any]:
    table = open_table(event.table)
    files: Sequence[str | DataFile] = []
    version = table.committed_version(event.commit_id)  # a retry: its file list may be gone already
    if version is None and event.add_columns is not None:
        columns = [pa.field(c.name, parse_type(c.type)) for c in event.add_columns]
        version = table.add_columns(columns, commit_id=event.commit_id)
    elif version is None:
        files = read_file_list(table.store, event.file_list, table.schema) if event.file_list else event.files or []
        version = table.add_files(
            files, mode=event.mode, where=event.where, commit_id=event.commit_id, verify=event.verify
        )
    summary = table.manifest_at(version).commit.summary
    logger.info("committed", extra={"version": version, "commit_id": event.commit_id, "summary": summary})
    metrics.add_metric(name="FilesCommitted", unit=MetricUnit.Count, value=len(files))
    return {"table": event.table, "version": version, "commit_id": event.commit_id, "summary": summary}
