"""Maintenance Lambda: the steps of the maintenance workflow, one action per invocation.

- ``{"action": "plan", "table": ..., "run": ...}`` keeps the groups of files worth compacting
  (independent units of work) in a work plan under the table, named by the run, and returns
  where it is and how many groups it holds: the Distributed Map over ``compact`` reads it
- ``{"action": "compact", "table": ..., "files": [...]}`` compacts one group and commits it
- ``{"action": "coalesce", "table": ...}`` merges the tombstone files of the files that stay
- ``{"action": "expire", "table": ..., "retain_versions": 100, "retain_hours": 168}``
- ``{"action": "gc", "table": ..., "grace_hours": 24, "dry_run": false}``
- ``{"action": "discover", "bucket": ..., "now": ..., "every_minutes": 15, "run": ...}`` finds
  every table of the deployment whose ``maintenance.schedule`` fell due in the ``every_minutes``
  up to ``now`` (the schedule's time, so a retried start finds the same tables), keeps them as
  a work plan under ``maintenance-due/`` and returns where it is: the Distributed Map of the
  maintain-due workflow starts one maintenance run per table from it
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ConfigDict, Field, RootModel

from castable.deployment.layout import MAINTENANCE_DUE_PREFIX, served_tables
from castable.deployment.names import execution_name
from castable.format.layout import MAINTENANCE_PLAN_PREFIX
from castable.format.workplans import write_plan
from castable.store import S3Store, shared_s3_client
from lambdas.runtime import (
    TableUri,
    lambda_handler,
    logger,
    maintenance_input,
    metrics,
    open_table,
    plan_location,
    tracer,
)


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid")
    table: TableUri


class Plan(_Step):
    action: Literal["plan"]
    run: str = Field(min_length=1, max_length=256)
    """The run's name (the execution's), which names its plan."""


class Compact(_Step):
    action: Literal["compact"]
    files: list[str] = Field(min_length=1)
    commit_id: str | None = Field(default=None, min_length=1, max_length=256)


class Coalesce(_Step):
    action: Literal["coalesce"]
    commit_id: str | None = Field(default=None, min_length=1, max_length=256)


class Expire(_Step):
    action: Literal["expire"]
    retain_versions: int | None = Field(default=None, ge=1)
    retain_hours: float | None = Field(default=None, ge=0)


class Gc(_Step):
    action: Literal["gc"]
    grace_hours: float | None = Field(default=None, ge=0)
    dry_run: bool = False


class Discover(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["discover"]
    bucket: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
    now: datetime
    every_minutes: int = Field(ge=1, le=24 * 60)
    run: str = Field(min_length=1, max_length=256)


class MaintenanceEvent(
    RootModel[Annotated[Plan | Compact | Coalesce | Expire | Gc | Discover, Field(discriminator="action")]]
):
    pass


def discover(step: Discover) -> dict[str, Any]:
    """The deployment's tables due for maintenance, kept as a work plan of maintenance inputs."""
    bucket = S3Store(step.bucket, "", shared_s3_client())
    now = step.now if step.now.tzinfo is not None else step.now.replace(tzinfo=UTC)
    start = now - timedelta(minutes=step.every_minutes)
    served = list(served_tables(bucket))
    due = [(table, when) for table in served if (when := table.due(start, now)) is not None]
    items = [
        {**maintenance_input(t.uri), "name": execution_name(t.key, when.strftime("%Y%m%d%H%M"))} for t, when in due
    ]
    key = write_plan(bucket, MAINTENANCE_DUE_PREFIX, step.run, items)
    metrics.add_metric(name="TablesDue", unit=MetricUnit.Count, value=len(items))
    logger.info("tables due", extra={"served": len(served), "due": len(items)})
    return {"served": len(served), "due": len(items), **plan_location(f"s3://{step.bucket}", key)}


@lambda_handler(MaintenanceEvent)
@tracer.capture_method
def handler(event: MaintenanceEvent) -> dict[str, Any]:
    step = event.root
    if isinstance(step, Discover):
        return discover(step)
    table = open_table(step.table)
    logger.append_keys(action=step.action)
    if isinstance(step, Plan):
        groups = table.plan_compaction()
        key = write_plan(table.store, MAINTENANCE_PLAN_PREFIX, step.run, [{"files": g} for g in groups])
        return {"table": step.table, "version": table.version, "groups": len(groups), **plan_location(table.uri, key)}
    if isinstance(step, Compact):
        report = table.compact_group(step.files, commit_id=step.commit_id)
        metrics.add_metric(name="FilesCompacted", unit=MetricUnit.Count, value=len(report.files_rewritten))
        return {"table": step.table, **report.summary()}
    if isinstance(step, Coalesce):
        report = table.coalesce_tombstones(commit_id=step.commit_id)
        return {"table": step.table, **report.summary()}
    if isinstance(step, Expire):
        retain_for = None if step.retain_hours is None else timedelta(hours=step.retain_hours)
        expired = table.expire(retain_versions=step.retain_versions, retain_for=retain_for)
        metrics.add_metric(name="VersionsExpired", unit=MetricUnit.Count, value=len(expired.versions_expired))
        return {
            "table": step.table,
            "versions_expired": expired.versions_expired,
            "versions_retained": expired.versions_retained,
        }
    grace = None if step.grace_hours is None else timedelta(hours=step.grace_hours)
    collected = table.gc(orphan_grace=grace, dry_run=step.dry_run)
    metrics.add_metric(name="ObjectsCollected", unit=MetricUnit.Count, value=len(collected.objects))
    return {"table": step.table, **collected.summary()}
