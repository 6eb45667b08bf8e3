"""Tombstone Lambda: soft-delete the rows matching a SQL predicate (rows invisible at once).

Event: ``{"table": "s3://bucket/prefix", "predicate": "user_id = 42", "commit_id": "..."}``.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ConfigDict, Field

from lambdas._runtime import TableUri, lambda_handler, logger, metrics, open_table, tracer


class TombstoneEvent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    table: TableUri
    predicate: str = Field(min_length=1, max_length=100_000)
    commit_id: str | None = Field(default=None, min_length=1, max_length=256)


@lambda_handler(TombstoneEvent)
@tracer.capture_method
def handler(event: TombstoneEvent) -> dict[str, Any]:
    table = open_table(event.table)
    before = table.version
    version = table.delete(event.predicate, commit_id=event.commit_id)
    summary = table.manifest_at(version).commit.summary if version != before else {}
    logger.info("deleted", extra={"version": version, "summary": summary})
    metrics.add_metric(name="Deletes", unit=MetricUnit.Count, value=1)
    return {"table": event.table, "version": version, "committed": version != before, "summary": summary}
