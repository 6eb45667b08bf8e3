"""Erasure Lambda: the planning, purge and verification steps of the erasure workflow.

- ``{"action": "plan", "table", "predicate"}`` -> the data files that may hold matching rows
  and the versions that added them (``old``), for the Map over ``splice``;
- ``{"action": "purge", "table", "predicate", "old", "version"}`` expires the versions that
  still reference the replaced files and deletes those objects (every version of them);
- ``{"action": "verify", "table", "predicate"}`` checks every file of every retained version
  for a physically present matching row.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from castable.erase import purge_objects, verify_erased
from castable.predicate import parse_predicate
from lambdas.runtime import TableUri, lambda_handler, logger, open_table, tracer


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid")
    table: TableUri
    predicate: str = Field(min_length=1)


class Plan(_Step):
    action: Literal["plan"]


class Purge(_Step):
    action: Literal["purge"]
    old: dict[str, int]
    version: int = Field(ge=0)


class Verify(_Step):
    action: Literal["verify"]


class ErasureEvent(RootModel[Annotated[Plan | Purge | Verify, Field(discriminator="action")]]):
    pass


@lambda_handler(ErasureEvent)
@tracer.capture_method
def handler(event: ErasureEvent) -> dict[str, Any]:
    step = event.root
    table = open_table(step.table)
    predicate = parse_predicate(step.predicate, table.schema)
    logger.append_keys(action=step.action)
    if isinstance(step, Plan):
        files = table.scan(filter=predicate).files()
        return {"files": [f.path for f in files], "old": {f.path: f.added_version for f in files}}
    if isinstance(step, Purge):
        report = purge_objects(table.store, step.old, max(step.version, table.refresh().version), predicate)
        return report.summary()
    remaining = verify_erased(table.store, predicate)
    return {"verified": not remaining, "remaining_matches": remaining}
