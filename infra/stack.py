"""The castable stack: table bucket, landing queues, functions, workflows, schedules, and the EMR
side (an EMR Serverless Spark application and the job role of the ingest job).

Tables live under ``s3://<bucket>/tables/<name>/``; files dropped under ``landing/<name>/``
are ingested into table ``<name>`` by that table's own queue and ingest function. Every
function's role is limited to the table prefixes (an ingest function to its own table and
landing prefix); nothing gets a bucket-wide write.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from aws_cdk import ArnFormat, CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_emrserverless as emrs
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as scheduler_targets
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from castable.layout import ERASURE_PLAN_PREFIX, MAINTENANCE_PLAN_PREFIX, MANIFEST_PREFIX, POINTER_KEY
from castable.sources import MANIFEST_SUFFIX
from castable.store.probe import PROBE_PREFIX
from infra.bundling import RUNTIME, function_code
from infra.operations import Operations
from infra.patterns import objects_created

STATE_MACHINES = Path(__file__).resolve().parent.parent / "statemachines"
EMR_ARTIFACTS = "artifacts/"
"""Where the ingest job's entry script and packed Python environment are uploaded."""
EMR_LOGS = "emr-logs/"
ERASURE_RESULTS = "erasure-results/"
"""Where the erasure workflow's Distributed Map writes its splices' results (file, version, rows)."""
MAINTENANCE_RESULTS = "maintenance-results/"
"""Where the maintenance workflow's Distributed Map writes its compactions' results."""
RESULTS_DAYS = 30
"""How long the workflows' results are kept."""
SCHEDULE_RETRIES = 3
"""Times a maintenance schedule retries a start that failed (throttled, say) before it keeps it
as a dead letter."""


@dataclass(frozen=True)
class TableConfig:
    """One table of the deployment and its maintenance schedule."""

    name: str
    schedule: str = "rate(6 hours)"
    ingest_concurrency: int = 2
    """At most this many ingest Lambdas commit to the table at once (SQS ``maximumConcurrency``,
    2 to 1000): a burst of landed files makes fewer, larger commits instead of a race for the pointer."""
    ingest_memory_mb: int = 1024
    """The ingest function streams a landed file a row group at a time: a 2 GiB file peaks at
    about 512 MiB (bench/bench_ingest_memory.py). Raise it for row groups over ~256 MiB."""
    retain_versions: int | None = None
    retain_hours: float | None = None
    grace_hours: float | None = None
    ingest_mode: Literal["append", "upsert"] = "append"
    """``upsert``: landed rows replace the live rows with their primary keys (lambdas/ingest.py)."""
    schema_mode: Literal["strict", "merge"] = "strict"
    """``merge``: a landed Parquet file's new columns are added to the table; ``strict``
    dead-letters the file (lambdas/ingest.py). Merge needs ``ingest_mode="append"``."""
    op_column: str | None = None
    """With ``ingest_mode="upsert"``: the landed files' operation column (a change feed), whose
    ``d``/``delete`` rows delete their key."""

    def __post_init__(self) -> None:
        if self.ingest_mode not in ("append", "upsert"):
            raise ValueError(f"table {self.name}: ingest_mode must be append or upsert, not {self.ingest_mode!r}")
        if self.op_column is not None and self.ingest_mode != "upsert":
            raise ValueError(f"table {self.name}: op_column needs ingest_mode='upsert'")
        merge_needs_append = self.schema_mode == "merge" and self.ingest_mode != "append"
        if self.schema_mode not in ("strict", "merge") or merge_needs_append:
            raise ValueError(f"table {self.name}: schema_mode must be strict, or merge with ingest_mode='append'")


@dataclass(frozen=True)
class DatabaseConfig:
    """A database of the deployment (``s3://<bucket>/databases/<name>/``): its tables commit
    through one log. A batch manifest landing under ``landing/<name>/`` appends the files it
    names to several tables in one transaction (lambdas/ingest.py)."""

    name: str
    tables: list[TableConfig] = field(default_factory=list)
    """Member tables to maintain on their schedules (members are created with the library or CLI)."""
    ingest_concurrency: int = 2
    ingest_memory_mb: int = 1024

    def __post_init__(self) -> None:
        object.__setattr__(self, "tables", [t if isinstance(t, TableConfig) else TableConfig(**t) for t in self.tables])


@dataclass(frozen=True)
class CastableConfig:
    tables: list[TableConfig] = field(default_factory=lambda: [TableConfig("events")])
    databases: list[DatabaseConfig] = field(default_factory=list)
    versioned: bool = False
    noncurrent_days: int = 30
    """With versioning, how long a noncurrent version is kept: every commit overwrites a table's
    pointer, leaving one behind (castable's own deletes take every version at once)."""
    incomplete_upload_days: int = 2
    emr_release: str = "emr-7.5.0"
    """EMR 7.x runs Spark 3.5, which the ingest job supports (the data source needs Spark 4)."""
    emr_image: str | None = None
    """A custom EMR Serverless image with Python 3.11 and castable (jobs/emr.Dockerfile)."""
    alert_email: str | None = None
    """Who the alerts topic emails (infra/operations.py); without it, subscribe to the topic yourself."""


class CastableStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, config: CastableConfig, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        access_logs = s3.Bucket(
            self,
            "AccessLogs",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(90))],
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.bucket = s3.Bucket(
            self,
            "Tables",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            versioned=config.versioned,
            server_access_logs_bucket=access_logs,
            server_access_logs_prefix="tables-bucket/",
            event_bridge_enabled=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    abort_incomplete_multipart_upload_after=Duration.days(config.incomplete_upload_days),
                    noncurrent_version_expiration=Duration.days(config.noncurrent_days) if config.versioned else None,
                ),
                # the workflows' Distributed Map results: for looking into a run, not kept for ever
                *(
                    s3.LifecycleRule(prefix=results, expiration=Duration.days(RESULTS_DAYS))
                    for results in (ERASURE_RESULTS, MAINTENANCE_RESULTS)
                ),
            ],
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.table_uris = {t.name: f"s3://{self.bucket.bucket_name}/tables/{t.name}" for t in config.tables}
        self.database_uris = {d.name: f"s3://{self.bucket.bucket_name}/databases/{d.name}" for d in config.databases}
        self.prefixes = [f"tables/{t.name}/" for t in config.tables] + [
            f"databases/{d.name}/" for d in config.databases
        ]
        self._protect_logs()
        code = function_code()
        self.ingest_functions: dict[str, lambda_.Function] = {}
        self.dead_letters: list[sqs.Queue] = []
        self.workflow_logs: dict[str, logs.LogGroup] = {}
        self.functions = {
            name: self._function(name, code, description, timeout, memory)
            for name, description, timeout, memory in [
                ("commit", "Register Parquet files written elsewhere as one append", 900, 1024),
                ("tombstone", "Soft-delete rows by SQL predicate", 120, 1024),
                ("splice", "Erase rows from one data file (row-group splice)", 900, 3008),
                ("maintenance", "Compaction, expiry and garbage-collection steps", 900, 3008),
                ("erasure", "Erasure planning, purge and verification steps", 900, 3008),
                ("trigger", "Start maintenance when tombstones pile up (debounced)", 60, 256),
            ]
        }
        for name, fn in self.functions.items():
            if name != "trigger":
                self._grant_tables(fn)
        # Erase is refused on a bucket with Object Lock (its versions would outlive a purge).
        for name in ("erasure", "splice"):
            self.functions[name].add_to_role_policy(
                iam.PolicyStatement(actions=["s3:GetBucketObjectLockConfiguration"], resources=[self.bucket.bucket_arn])
            )
        # gc aborts stale multipart uploads. s3:prefix is no condition key of this listing, so it
        # is granted on the bucket: it names upload keys, never data.
        self.functions["maintenance"].add_to_role_policy(
            iam.PolicyStatement(actions=["s3:ListBucketMultipartUploads"], resources=[self.bucket.bucket_arn])
        )
        for table in config.tables:
            self._ingest_table(table, code)
        for database in config.databases:
            self._ingest_database(database, code)
        self.erasure = self._state_machine("erasure", ["tombstone", "erasure", "splice"])
        self._distributed_map(self.erasure, ERASURE_PLAN_PREFIX, ERASURE_RESULTS)
        self.maintenance = self._state_machine("maintenance", ["maintenance"])
        self._distributed_map(self.maintenance, MAINTENANCE_PLAN_PREFIX, MAINTENANCE_RESULTS)
        self._schedules()
        self.emr_job_role = self._emr_role()
        self.emr_application = self._emr_application()
        self.operations = Operations(
            self,
            "Operations",
            bucket=self.bucket,
            functions=[*self.functions.values(), *self.ingest_functions.values()],
            dead_letters=self.dead_letters,
            workflows=[self.erasure, self.maintenance],
            erasure_logs=self.workflow_logs["erasure"],
            email=config.alert_email,
        )
        self._outputs()

    def _protect_logs(self) -> None:
        """No principal may write a table's or database's pointer or manifests except by
        compare-and-swap, the only way castable writes them (docs/format.md section 7): a pointer
        PUT must carry If-Match or If-None-Match, a manifest PUT If-None-Match. So no role,
        however broad its grant on the prefix, can overwrite a committed version or move the
        pointer blindly (CopyObject and multipart uploads are PutObject too, and refused alike)."""
        logs = [f"{p}{member}" for p in self.prefixes for member in ("", "*/")]
        required = {
            POINTER_KEY: {"s3:if-match": "true", "s3:if-none-match": "true"},
            f"{MANIFEST_PREFIX}*": {"s3:if-none-match": "true"},
        }
        for key, absent in required.items():
            self.bucket.add_to_resource_policy(
                iam.PolicyStatement(
                    effect=iam.Effect.DENY,
                    principals=[iam.AnyPrincipal()],
                    actions=["s3:PutObject"],
                    resources=[self.bucket.arn_for_objects(f"{log}{key}") for log in logs],
                    conditions={"Null": absent},
                )
            )

    # ------------------------------------------------------------------ functions

    def _function(
        self, name: str, code: lambda_.Code, description: str, timeout: int, memory: int, construct: str | None = None
    ) -> lambda_.Function:
        """The function running ``lambdas/<name>.py``; ``construct`` names it when one handler serves several."""
        construct = construct or name.title()
        log_group = logs.LogGroup(self, f"{construct}Logs", retention=logs.RetentionDays.ONE_MONTH)
        return lambda_.Function(
            self,
            f"{construct}Function",
            description=f"castable: {description}",
            runtime=RUNTIME,
            architecture=lambda_.Architecture.X86_64,
            handler=f"lambdas.{name}.handler",
            code=code,
            timeout=Duration.seconds(timeout),
            memory_size=memory,
            ephemeral_storage_size=None,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=log_group,
            environment={
                "POWERTOOLS_SERVICE_NAME": f"castable-{name}",
                "POWERTOOLS_METRICS_NAMESPACE": "castable",
                "POWERTOOLS_LOG_LEVEL": "INFO",
            },
        )

    def _grant_tables(self, fn: lambda_.Function, prefixes: list[str] | None = None, *, delete: bool = True) -> None:
        """Read/write (and with ``delete``, delete) under the table and database prefixes only
        (``prefixes``, default all); listing restricted to them. Without ``delete`` a function may
        delete only the scratch keys of castable's store probe."""
        prefixes = prefixes or self.prefixes
        actions = ["s3:GetObject", "s3:GetObjectVersion", "s3:PutObject", "s3:AbortMultipartUpload"]
        actions.append("s3:ListMultipartUploadParts")
        if delete:
            actions += ["s3:DeleteObject", "s3:DeleteObjectVersion"]
        else:
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["s3:DeleteObject", "s3:DeleteObjectVersion"],
                    # a database's member tables probe under their own prefixes
                    resources=[self.bucket.arn_for_objects(f"{p}{PROBE_PREFIX}*") for p in prefixes]
                    + [
                        self.bucket.arn_for_objects(f"{p}*/{PROBE_PREFIX}*")
                        for p in prefixes
                        if p.startswith("databases/")
                    ],
                )
            )
        fn.add_to_role_policy(
            iam.PolicyStatement(actions=actions, resources=[self.bucket.arn_for_objects(f"{p}*") for p in prefixes])
        )
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket", "s3:ListBucketVersions"],
                resources=[self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{p}*" for p in prefixes]}},
            )
        )
        # Whether the bucket keeps versions: castable's deletes then delete every version.
        fn.add_to_role_policy(
            iam.PolicyStatement(actions=["s3:GetBucketVersioning"], resources=[self.bucket.bucket_arn])
        )

    # --------------------------------------------------------------------- ingest

    def _queue(self, construct_id: str, **kwargs: object) -> sqs.Queue:
        """An SQS queue that refuses plain HTTP and is encrypted at rest."""
        return sqs.Queue(
            self,
            construct_id,
            enforce_ssl=True,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            **kwargs,  # type: ignore[arg-type]
        )

    def _ingest_table(self, table: TableConfig, code: lambda_.Code) -> None:
        """Per table: a landing queue with its dead letters, fed by the table's landing prefix, and an
        ingest function of its own, scoped to that table, at most ``ingest_concurrency`` at a time."""
        environment = {
            "CASTABLE_TABLE": self.table_uris[table.name],
            "CASTABLE_INGEST_MODE": table.ingest_mode,
            "CASTABLE_SCHEMA_MODE": table.schema_mode,
        }
        if table.op_column is not None:
            environment["CASTABLE_OP_COLUMN"] = table.op_column
        description = f"{table.ingest_mode.title()} Parquet, CSV and JSON Lines files landing in landing/{table.name}/"
        self.ingest_functions[table.name] = self._ingest(
            table.name,
            f"tables/{table.name}/",
            environment,
            None,
            description,
            code,
            memory=table.ingest_memory_mb,
            concurrency=table.ingest_concurrency,
        )

    def _ingest_database(self, database: DatabaseConfig, code: lambda_.Code) -> None:
        """Per database: the same, fed by the batch manifests landing under its landing prefix."""
        description = f"Append the files of each batch manifest landing in landing/{database.name}/, in one commit"
        self.ingest_functions[database.name] = self._ingest(
            database.name,
            f"databases/{database.name}/",
            {"CASTABLE_DATABASE": self.database_uris[database.name]},
            MANIFEST_SUFFIX,
            description,
            code,
            memory=database.ingest_memory_mb,
            concurrency=database.ingest_concurrency,
        )

    def _ingest(
        self,
        name: str,
        prefix: str,
        environment: dict[str, str],
        suffix: str | None,
        description: str,
        code: lambda_.Code,
        *,
        memory: int,
        concurrency: int,
    ) -> lambda_.Function:
        """A landing queue with its dead letters, fed by ``landing/<name>/`` keys ending in
        ``suffix`` (every key if ``None``: S3's suffix filters are case-sensitive, so a table's
        function picks its data files itself, in any case), and an ingest function scoped to
        ``prefix`` and that landing prefix."""
        construct = name.replace("-", " ").replace("_", " ").title().replace(" ", "")
        dead_letters = self._queue(f"Landing{construct}DeadLetters", retention_period=Duration.days(14))
        self.dead_letters.append(dead_letters)
        queue = self._queue(
            f"Landing{construct}",
            visibility_timeout=Duration.seconds(6 * 900),
            dead_letter_queue=sqs.DeadLetterQueue(queue=dead_letters, max_receive_count=5),
        )
        fn = self._function("ingest", code, description, 900, memory, f"Ingest{construct}")
        self._grant_tables(fn, [prefix], delete=False)
        fn.add_environment("POWERTOOLS_SERVICE_NAME", f"castable-ingest-{name}")  # each table's logs apart
        fn.add_environment("CASTABLE_LANDING", f"s3://{self.bucket.bucket_name}/landing/{name}/")
        fn.add_environment("CASTABLE_DEAD_LETTER_PREFIX", "landing-failed/")
        for key, value in environment.items():
            fn.add_environment(key, value)
        self.bucket.add_event_notification(
            s3.EventType.OBJECT_CREATED,
            s3n.SqsDestination(queue),
            s3.NotificationKeyFilter(prefix=f"landing/{name}/", suffix=suffix),
        )
        fn.add_event_source(
            sources.SqsEventSource(
                queue,
                batch_size=50,
                max_batching_window=Duration.seconds(30),
                report_batch_item_failures=True,
                max_concurrency=concurrency,
            )
        )
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:DeleteObject", "s3:PutObject"],
                resources=[
                    self.bucket.arn_for_objects(f"landing/{name}/*"),
                    self.bucket.arn_for_objects(f"landing-failed/landing/{name}/*"),
                ],
            )
        )
        # Without listing, S3 answers 403 instead of 404 for a landed file already ingested (a
        # duplicate delivery): the function could not tell it from a refusal.
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"landing/{name}/*"]}},
            )
        )
        return fn

    # -------------------------------------------------------------- state machines

    def _state_machine(self, name: str, functions: list[str]) -> sfn.StateMachine:
        log_group = logs.LogGroup(self, f"{name.title()}WorkflowLogs", retention=logs.RetentionDays.ONE_MONTH)
        self.workflow_logs[name] = log_group
        definition = (STATE_MACHINES / f"{name}.asl.json").read_text()
        substitutions = {f"{f.title()}FunctionArn": self.functions[f].function_arn for f in functions}
        if "${ResultsBucket}" in definition:  # a Distributed Map writes its results to the tables' bucket
            substitutions["ResultsBucket"] = self.bucket.bucket_name
        machine = sfn.StateMachine(
            self,
            f"{name.title()}Workflow",
            definition_body=sfn.DefinitionBody.from_string(definition),
            definition_substitutions=substitutions,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=self.workflow_logs[name], level=sfn.LogLevel.ALL),
            timeout=Duration.hours(6),
        )
        for f in functions:
            self.functions[f].grant_invoke(machine)
        return machine

    def _distributed_map(self, machine: sfn.StateMachine, plans: str, results: str) -> None:
        """What a Distributed Map of ``machine`` needs: read its work plans under each table's (and
        database's) ``plans`` prefix, write its results under ``results``, and run, watch and stop
        its child executions. A policy of its own, attached after the state machine exists, since
        it names the machine's ARN."""
        executions = self.format_arn(
            service="states",
            resource="execution",
            resource_name=f"{machine.state_machine_name}/*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        iam.Policy(
            self,
            f"{machine.node.id}DistributedMap",
            roles=[machine.role],
            statements=[
                iam.PolicyStatement(
                    actions=["s3:GetObject"],
                    resources=[self.bucket.arn_for_objects(f"{p}{plans}*") for p in self.prefixes],
                ),
                iam.PolicyStatement(actions=["s3:PutObject"], resources=[self.bucket.arn_for_objects(f"{results}*")]),
                iam.PolicyStatement(actions=["states:StartExecution"], resources=[machine.state_machine_arn]),
                iam.PolicyStatement(
                    actions=["states:DescribeExecution", "states:StopExecution"], resources=[executions]
                ),
            ],
        )

    def _schedules(self) -> None:
        """A maintenance schedule per table, a database's members included (keyed ``<db>/<member>``)."""
        maintained = [(t.name, self.table_uris[t.name], t) for t in self.config.tables] + [
            (f"{d.name}/{t.name}", f"{self.database_uris[d.name]}/{t.name}", t)
            for d in self.config.databases
            for t in d.tables
        ]
        self.maintenance_inputs = {
            key: {
                "table": uri,
                "retain_versions": t.retain_versions,
                "retain_hours": t.retain_hours,
                "grace_hours": t.grace_hours,
            }
            for key, uri, t in maintained
        }
        # EventBridge Scheduler, not legacy scheduled rules: a start that fails is retried, then
        # kept in a dead-letter queue (which an alarm watches) instead of being dropped.
        dead_letters = self._queue("MaintenanceSchedulesDeadLetters", retention_period=Duration.days(14))
        self.dead_letters.append(dead_letters)
        self.schedule_dead_letters = dead_letters
        role = iam.Role(
            self,
            "MaintenanceSchedulesRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": self.account}}
            ),
        )
        for key, _, t in maintained:
            scheduler.Schedule(
                self,
                "Maintain" + key.replace("/", " ").replace("-", " ").replace("_", " ").title().replace(" ", ""),
                description=f"castable maintenance of table {key}",
                schedule=scheduler.ScheduleExpression.expression(t.schedule),
                target=scheduler_targets.StepFunctionsStartExecution(
                    self.maintenance,
                    input=scheduler.ScheduleTargetInput.from_object(self.maintenance_inputs[key]),
                    role=role,
                    retry_attempts=SCHEDULE_RETRIES,
                    max_event_age=Duration.hours(1),
                    dead_letter_queue=dead_letters,
                ),
            )
        self._tombstone_trigger()

    def _tombstone_trigger(self) -> None:
        """S3 tombstone writes -> EventBridge -> SQS -> trigger Lambda -> one maintenance run per window."""
        dead_letters = self._queue("TombstoneEventsDeadLetters")
        self.dead_letters.append(dead_letters)
        queue = self._queue(
            "TombstoneEvents",
            visibility_timeout=Duration.seconds(360),
            dead_letter_queue=sqs.DeadLetterQueue(queue=dead_letters, max_receive_count=5),
        )
        events.Rule(
            self,
            "TombstonesWritten",
            description="castable: tombstone files written under any table",
            event_pattern=objects_created(
                self.bucket,
                [{"wildcard": f"tables/{t.name}/tombstone/*"} for t in self.config.tables]
                + [{"wildcard": f"databases/{d.name}/*/tombstone/*"} for d in self.config.databases],
            ),
            targets=[targets.SqsQueue(queue)],
        )
        fn = self.functions["trigger"]
        fn.add_environment("MAINTENANCE_STATE_MACHINE_ARN", self.maintenance.state_machine_arn)
        fn.add_environment("CASTABLE_TABLES", json.dumps(self.maintenance_inputs))
        fn.add_environment("DEBOUNCE_SECONDS", "900")
        fn.add_event_source(sources.SqsEventSource(queue, batch_size=100, max_batching_window=Duration.seconds(60)))
        self.maintenance.grant_start_execution(fn)

    # ------------------------------------------------------------------------ EMR

    def _emr_role(self) -> iam.Role:
        """The job role of the Spark ingest job: read its inputs and the tables, write data files
        (``tables/*/data/``, and ``databases/*/<member>/data/``) and logs, and commit only through the
        commit function."""
        here = f"arn:{self.partition}:"
        role = iam.Role(
            self,
            "EmrJobRole",
            # Only this account's EMR may assume it (no confused deputy): EMR Serverless for its
            # applications here, EMR on EC2 for its clusters here.
            assumed_by=iam.CompositePrincipal(
                *(
                    iam.ServicePrincipal(
                        f"{service}.amazonaws.com",
                        conditions={
                            "StringEquals": {"aws:SourceAccount": self.account},
                            "ArnLike": {"aws:SourceArn": f"{here}{service}:{self.region}:{self.account}:{what}"},
                        },
                    )
                    for service, what in (("emr-serverless", "/applications/*"), ("elasticmapreduce", "cluster/*"))
                )
            ),
            description="castable Spark jobs: write Parquet under tables/*/data/ and call the commit function",
        )
        tables = self.prefixes
        landing = [f"landing/{t.name}/" for t in self.config.tables] + [
            f"landing/{d.name}/" for d in self.config.databases
        ]
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                resources=[self.bucket.arn_for_objects(f"tables/{t.name}/data/*") for t in self.config.tables]
                + [self.bucket.arn_for_objects(f"databases/{d.name}/*/data/*") for d in self.config.databases]
                + [self.bucket.arn_for_objects(f"{EMR_LOGS}*")],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[self.bucket.arn_for_objects(f"{p}*") for p in [*tables, *landing, EMR_ARTIFACTS]],
            )
        )
        # Without ListBucket a GET of a missing key is 403, not 404: the commit protocol's probe
        # for a newer manifest needs the 404, so listing is granted on exactly these prefixes.
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{p}*" for p in [*tables, *landing, EMR_ARTIFACTS]]}},
            )
        )
        self.functions["commit"].grant_invoke(role)
        return role

    def _emr_application(self) -> emrs.CfnApplication:
        """A Spark application that starts on the first job and stops when idle (no cluster to keep)."""
        return emrs.CfnApplication(
            self,
            "SparkApplication",
            name="castable-spark",
            release_label=self.config.emr_release,
            type="Spark",
            architecture="X86_64",
            auto_start_configuration=emrs.CfnApplication.AutoStartConfigurationProperty(enabled=True),
            auto_stop_configuration=emrs.CfnApplication.AutoStopConfigurationProperty(
                enabled=True, idle_timeout_minutes=15
            ),
            maximum_capacity=emrs.CfnApplication.MaximumAllowedResourcesProperty(
                cpu="64 vCPU", memory="256 GB", disk="1000 GB"
            ),
            image_configuration=None
            if self.config.emr_image is None
            else emrs.CfnApplication.ImageConfigurationInputProperty(image_uri=self.config.emr_image),
            monitoring_configuration=emrs.CfnApplication.MonitoringConfigurationProperty(
                s3_monitoring_configuration=emrs.CfnApplication.S3MonitoringConfigurationProperty(
                    log_uri=f"s3://{self.bucket.bucket_name}/{EMR_LOGS}"
                )
            ),
        )

    def _outputs(self) -> None:
        """What the README's commands need: the bucket, the functions, the workflows, EMR."""
        for name, value in [
            ("TablesBucket", self.bucket.bucket_name),
            ("CommitFunctionName", self.functions["commit"].function_name),
            ("ErasureStateMachineArn", self.erasure.state_machine_arn),
            ("MaintenanceStateMachineArn", self.maintenance.state_machine_arn),
            ("EmrApplicationId", self.emr_application.attr_application_id),
            ("EmrJobRoleArn", self.emr_job_role.role_arn),
            ("AlertsTopicArn", self.operations.topic.topic_arn),
        ]:
            CfnOutput(self, name, value=value)
