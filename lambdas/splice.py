"""Splice Lambda: erase the rows matching a predicate from one data file (a Map item).

Event: ``{"table": ..., "predicate": ..., "file": "data/...parquet", "commit_id": "req-1",
"mode": "auto"}``. The file's rows are removed physically (row-group splice, or rewrite for
small files) and the replacement is committed with the commit id ``<commit_id>/splice/<digest of
file>`` (fixed length, however long the file's key), so a retried item commits nothing twice.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ConfigDict, Field

from castable.deployment.erasure import splice_prefix
from lambdas.runtime import (
    ERASURE_COMMIT_ID_LIMIT,
    TableUri,
    lambda_handler,
    metrics,
    open_table,
    tracer,
)


class SpliceEvent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    table: TableUri
    predicate: str = Field(min_length=1)
    file: str = Field(min_length=1)
    commit_id: str = Field(min_length=1, max_length=ERASURE_COMMIT_ID_LIMIT)
    mode: Literal["auto", "splice", "rewrite"] = "auto"


def splice_commit_id(commit_id: str, file: str) -> str:
    """The commit id of one file's splice in the erasure ``commit_id``."""
    return f"{splice_prefix(commit_id)}{hashlib.sha256(file.encode()).hexdigest()[:16]}"


@lambda_handler(SpliceEvent)
@tracer.capture_method
def handler(event: SpliceEvent) -> dict[str, Any]:
    table = open_table(event.table)
    report = table.erase(
        event.predicate, files=[event.file], mode=event.mode, commit_id=splice_commit_id(event.commit_id, event.file)
    )
    transfer = report.transfer
    metrics.add_metric(name="RowsErased", unit=MetricUnit.Count, value=report.rows_erased)
    return {
        "file": event.file,
        "version": report.version,
        "rows_erased": report.rows_erased,
        "new_objects": report.clean_objects,
        "method": [e.method for e in report.files],
        "bytes_downloaded": transfer.downloaded,
        "bytes_uploaded": transfer.uploaded,
        "bytes_copied": transfer.copied,
    }
