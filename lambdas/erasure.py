"""Erasure Lambda: the planning, purge and verification steps of the erasure workflow.

- ``{"action": "validate", "input": <the workflow's input>}`` checks the request before anything
  runs: its commit id, the table or database and its tables, each predicate against its schema,
  and that the bucket has no Object Lock (which would keep the erased rows' versions);
- ``{"action": "preview", "input": <the workflow's input with "dry_run": true>}`` reports what
  the request would erase, writing nothing: per table, the rows its predicate matches now and
  the data files a splice would rewrite;
- ``{"action": "plan", "commit_id", "items": [{"table", "predicate"}, ...]}`` keeps the data
  files of every table that may hold matching rows in one plan object, under the tables'
  common root, and returns where it is and how many files it names: the Distributed Map over
  ``splice`` reads it item by item, so no state carries the list (Step Functions' 256 KB);
- ``{"action": "purge", "table", "predicate", "plan_uri", "version", "commit_id"}`` expires the
  versions that still reference the replaced files and deletes those objects (every version of
  them): the table's planned files and every file a splice of this ``commit_id`` replaced, so a
  re-run of an erasure that stopped after its splices finishes it; it counts the files spliced
  and the rows erased from the table's history;
- ``{"action": "verify", "table", "predicate"}`` checks every file of every retained version
  for a physically present matching row, and lists noncurrent copies left under the table.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, StrictBool, model_validator

from castable.deployment import erasure
from lambdas.runtime import ERASURE_COMMIT_ID_LIMIT, TableUri, lambda_handler, logger, plan_location, tracer


class Request(BaseModel):
    """What the erasure workflow is started with: one table and a predicate, or a database and a
    predicate per table, and the request's commit id."""

    model_config = ConfigDict(extra="forbid")
    commit_id: str = Field(min_length=1, max_length=ERASURE_COMMIT_ID_LIMIT)
    table: TableUri | None = None
    predicate: str | None = Field(default=None, min_length=1)
    database: TableUri | None = None
    tables: dict[str, Annotated[str, Field(min_length=1)]] | None = Field(default=None, min_length=1)
    dry_run: StrictBool = False
    """Report what would be erased (``preview``) instead of erasing it. Strictly a JSON boolean:
    the workflow's choice compares it as one, so a ``"yes"`` pydantic would read as true would
    send the request to the erasure itself."""

    @model_validator(mode="after")
    def _one_target(self) -> Request:
        if (self.table is None) == (self.database is None):
            raise ValueError("give either table and predicate, or database and tables")
        if (self.table is None) != (self.predicate is None) or (self.database is None) != (self.tables is None):
            raise ValueError("a table needs a predicate, a database its tables' predicates")
        return self


class Validate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["validate"]
    input: Request


class Preview(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["preview"]
    input: Request


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid")
    table: TableUri
    predicate: str = Field(min_length=1)


class _Target(_Step):
    model_config = ConfigDict(extra="ignore")


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["plan"]
    commit_id: str = Field(min_length=1, max_length=ERASURE_COMMIT_ID_LIMIT)
    items: list[_Target] = Field(min_length=1)
    """The tables erased from and their predicates (the tombstone step's items)."""


class Purge(_Step):
    action: Literal["purge"]
    plan_uri: str = Field(pattern=r"^s3://[^/]+/.+")
    """Where Plan kept the plan."""
    version: int = Field(ge=0)
    commit_id: str = Field(min_length=1, max_length=ERASURE_COMMIT_ID_LIMIT)
    """The request's: files its earlier runs' splices replaced are purged too."""


class Verify(_Step):
    action: Literal["verify"]


class Receipt(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["receipt"]
    table: TableUri
    commit_id: str = Field(min_length=1, max_length=ERASURE_COMMIT_ID_LIMIT)
    receipt: dict[str, Any]
    """What the workflow's TableReceipt state built: kept under the table (predicate hashed)."""


class ErasureEvent(
    RootModel[Annotated[Validate | Preview | Plan | Purge | Verify | Receipt, Field(discriminator="action")]]
):
    pass


@lambda_handler(ErasureEvent)
@tracer.capture_method
def handler(event: ErasureEvent) -> dict[str, Any]:
    step = event.root
    if isinstance(step, Validate | Preview):
        request = step.input
        targets = erasure.targets(request.table, request.predicate, request.database, request.tables)
        if isinstance(step, Validate):
            return {"valid": True, "tables": erasure.validate(targets)}
        return erasure.preview(targets, request.commit_id)
    if isinstance(step, Plan):
        root, key, files = erasure.plan([(item.table, item.predicate) for item in step.items], step.commit_id)
        return {"files": files, **plan_location(root, key)}
    if isinstance(step, Receipt):
        return {**step.receipt, "receipt": erasure.keep_receipt(step.table, step.commit_id, step.receipt)}
    logger.append_keys(action=step.action)
    if isinstance(step, Purge):
        return erasure.purge(step.table, step.predicate, step.commit_id, step.plan_uri, step.version)
    return erasure.verify(step.table, step.predicate)
