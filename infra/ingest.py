"""Ingest stacks: each table's (and database's) landing queue, its dead letters and its own
ingest function, and each maintained table's schedule, in nested stacks of at most
``UNITS_PER_STACK`` tables, so a deployment of hundreds of tables stays under CloudFormation's
500 resources per stack (each unit is about 12 resources)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration, NestedStack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as scheduler_targets
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.bundle import Architecture
from infra.bundling import Package, PackageKind
from infra.operations import FAILED_LANDING_PREFIX
from infra.parts import function, grant_tables, queue
from lambdas.names import schedule_name

UNITS_PER_STACK = 30
"""Tables and databases per ingest stack: 30 units are about 360 resources."""
SCHEDULE_RETRIES = 3
"""Times a maintenance schedule retries a start that failed (throttled, say) before it keeps it
as a dead letter."""


@dataclass(frozen=True)
class IngestUnit:
    """One landing prefix ``landing/<name>/`` and what its function ingests into."""

    name: str
    prefix: str
    """The table's (or database's) prefix in the bucket, all the function may write."""
    environment: dict[str, str]
    suffix: str | None
    """Only keys ending so notify the queue (a database's batch manifests); ``None``: every key."""
    description: str
    memory: int
    concurrency: int


@dataclass(frozen=True)
class Maintained:
    """A table maintained on a schedule: its key (a name, or ``<db>/<member>``), its schedule
    expression and the maintenance workflow's input."""

    key: str
    expression: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Shared:
    """What every ingest stack uses from the main stack."""

    bucket: s3.IBucket
    maintenance: sfn.IStateMachine
    schedule_group: scheduler.IScheduleGroup
    schedule_role: iam.IRole
    schedule_dead_letters: sqs.IQueue
    architecture: Architecture
    package: PackageKind
    key_arn: str | None
    """The bucket's customer-managed KMS key, if it has one."""


class IngestStack(NestedStack):
    """Ingest units and schedules of a slice of the deployment's tables."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        shared: Shared,
        units: Sequence[IngestUnit],
        maintained: Sequence[Maintained],
    ) -> None:
        super().__init__(scope, construct_id, description="castable: landing queues, ingest functions and schedules")
        self.shared = shared
        self.units = list(units)
        # an asset belongs to one stack (a zip is bundled once: CDK caches it)
        self.package = Package(shared.architecture, shared.package)
        self.functions: list[lambda_.Function] = []
        self.dead_letters: list[sqs.Queue] = []
        for unit in units:
            self._ingest(unit)
        for table in maintained:
            self._schedule(table)

    def _ingest(self, unit: IngestUnit) -> None:
        """A landing queue with its dead letters, fed by ``landing/<name>/`` keys ending in the
        unit's suffix (every key if ``None``: S3's suffix filters are case-sensitive, so a table's
        function picks its data files itself, in any case), and an ingest function scoped to the
        unit's prefix and that landing prefix, at most ``concurrency`` at a time."""
        bucket, name = self.shared.bucket, unit.name
        construct = _construct_name(name)
        dead_letters = queue(self, f"Landing{construct}DeadLetters", retention_period=Duration.days(14))
        self.dead_letters.append(dead_letters)
        landing = queue(
            self,
            f"Landing{construct}",
            visibility_timeout=Duration.seconds(6 * 900),
            dead_letter_queue=sqs.DeadLetterQueue(queue=dead_letters, max_receive_count=5),
        )
        fn = function(self, "ingest", self.package, unit.description, 900, unit.memory, f"Ingest{construct}")
        self.functions.append(fn)
        grant_tables(fn, bucket, [unit.prefix], delete=False, key_arn=self.shared.key_arn)
        fn.add_environment("POWERTOOLS_SERVICE_NAME", f"castable-ingest-{name}")  # each table's logs apart
        fn.add_environment("CASTABLE_LANDING", f"s3://{bucket.bucket_name}/landing/{name}/")
        fn.add_environment("CASTABLE_DEAD_LETTER_PREFIX", FAILED_LANDING_PREFIX)
        for key, value in unit.environment.items():
            fn.add_environment(key, value)
        bucket.add_event_notification(
            s3.EventType.OBJECT_CREATED,
            s3n.SqsDestination(landing),
            s3.NotificationKeyFilter(prefix=f"landing/{name}/", suffix=unit.suffix),
        )
        fn.add_event_source(
            sources.SqsEventSource(
                landing,
                batch_size=50,
                max_batching_window=Duration.seconds(30),
                report_batch_item_failures=True,
                max_concurrency=unit.concurrency,
            )
        )
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:DeleteObject", "s3:PutObject"],
                resources=[
                    bucket.arn_for_objects(f"landing/{name}/*"),
                    bucket.arn_for_objects(f"{FAILED_LANDING_PREFIX}landing/{name}/*"),
                ],
            )
        )
        # Without listing, S3 answers 403 instead of 404 for a landed file already ingested (a
        # duplicate delivery): the function could not tell it from a refusal.
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"landing/{name}/*"]}},
            )
        )

    def _schedule(self, table: Maintained) -> None:
        """EventBridge Scheduler, not legacy scheduled rules: a start that fails is retried, then
        kept in a dead-letter queue (which an alarm watches) instead of being dropped. The
        tombstone trigger reads the workflow's input back from the schedule by its name."""
        scheduler.Schedule(
            self,
            "Maintain" + _construct_name(table.key),
            schedule_name=schedule_name(table.key),
            schedule_group=self.shared.schedule_group,
            description=f"castable maintenance of table {table.key}",
            schedule=scheduler.ScheduleExpression.expression(table.expression),
            target=scheduler_targets.StepFunctionsStartExecution(
                self.shared.maintenance,
                input=scheduler.ScheduleTargetInput.from_object(table.input),
                role=self.shared.schedule_role,
                retry_attempts=SCHEDULE_RETRIES,
                max_event_age=Duration.hours(1),
                dead_letter_queue=self.shared.schedule_dead_letters,
            ),
        )


def _construct_name(name: str) -> str:
    """``name`` (``my-table``, ``shop/orders``) as a construct id part: ``MyTable``, ``ShopOrders``."""
    return name.replace("/", " ").replace("-", " ").replace("_", " ").title().replace(" ", "")
