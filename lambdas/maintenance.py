"""Maintenance Lambda: the steps of the maintenance workflow, one action per invocation.

- ``{"action": "plan", "table": ..., "run": ...}`` keeps the groups of files worth compacting
  (independent units of work) in a work plan under the table, named by the run, and returns
  where it is and how many groups it holds: the Distributed Map over ``compact`` reads it
- ``{"action": "compact", "table": ..., "files": [...]}`` compacts one group and commits it
- ``{"action": "coalesce", "table": ...}`` merges the tombstone files of the files that stay
- ``{"action": "expire", "table": ..., "retain_versions": 100, "retain_hours": 168}``
- ``{"action": "gc", "table": ..., "grace_hours": 24, "dry_run": false}``
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal

from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ConfigDict, Field, RootModel

from castable.layout import MAINTENANCE_PLAN_PREFIX
from castable.workplans import write_plan
from lambdas.runtime import TableUri, lambda_handler, logger, metrics, open_table, plan_location, tracer


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


class MaintenanceEvent(RootModel[Annotated[Plan | Compact | Coalesce | Expire | Gc, Field(discriminator="action")]]):
    pass


@lambda_handler(MaintenanceEvent)
@tracer.capture_method
def handler(event: MaintenanceEvent) -> dict[str, Any]:
    step = event.root
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
