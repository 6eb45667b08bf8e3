"""The castable stack: table bucket, landing queues, functions, workflows, schedules, and the EMR
side (an EMR Serverless Spark application and the job role of the ingest job).

Tables live under ``s3://<bucket>/tables/<name>/`` (databases under ``databases/<name>/``);
files dropped under ``landing/<name>/`` are ingested into table ``<name>`` by that table's own
queue and ingest function, which live with its maintenance schedule in nested stacks of 30
(infra/ingest.py). The functions serving every table are limited to ``tables/`` and
``databases/``, an ingest function to its own table and landing prefix; nothing gets a
bucket-wide write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from aws_cdk import ArnFormat, CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from castable.layout import ERASURE_PLAN_PREFIX, MAINTENANCE_PLAN_PREFIX, MANIFEST_PREFIX, POINTER_KEY
from castable.sources import MANIFEST_SUFFIX
from infra.bundling import Package
from infra.emr import Emr
from infra.emr_env import check_archive
from infra.iceberg_rest import IcebergRestCatalog
from infra.ingest import UNITS_PER_STACK, IngestStack, IngestUnit, Maintained, Shared
from infra.operations import Operations
from infra.parts import function, grant_publication, grant_tables, object_key_use, queue
from infra.patterns import objects_created
from lambdas.names import glue_table_name

STATE_MACHINES = Path(__file__).resolve().parent.parent / "statemachines"
ERASURE_RESULTS = "erasure-results/"
"""Where the erasure workflow's Distributed Map writes its splices' results (file, version, rows)."""
MAINTENANCE_RESULTS = "maintenance-results/"
"""Where the maintenance workflow's Distributed Map writes its compactions' results."""
RESULTS_DAYS = 30
"""How long the workflows' results are kept."""
ROOTS = ("tables/", "databases/")
"""Where every table and database of the deployment lives: the functions that serve them all
are granted these prefixes (a list per table would outgrow IAM's policy sizes at ~50 tables)."""


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
    """A custom EMR Serverless image with castable's environment (``make emr-image``, pushed to
    the stack's ``EmrImageRepositoryUri``)."""
    emr_environment: str | None = None
    """The packed environment the Spark application's jobs run in (``make emr-env`` builds
    build/emr-al2023/castable-emr-env.tgz): uploaded with the stack and unpacked for every job."""
    alert_email: str | None = None
    """Who the alerts topic emails (infra/operations.py); without it, subscribe to the topic yourself."""
    kms_key_arn: str | None = None
    """A customer-managed KMS key to encrypt the table bucket with (SSE-KMS, with an S3 Bucket
    Key); every role that reads or writes its objects may use the key through S3. Without it,
    S3-managed keys. The key's policy must let the account's IAM policies grant its use."""
    architecture: Literal["x86_64", "arm64"] = "x86_64"
    """Of the functions (their wheels are bundled for it) and of the EMR Serverless application
    (Graviton: ``arm64``; a custom ``emr_image`` must be built for it)."""
    function_package: Literal["zip", "image"] = "zip"
    """``image`` deploys the functions as the container image of infra/lambda.Dockerfile (built
    with Docker on deploy; up to 10 GB) instead of the zip bundle (250 MiB unzipped)."""
    glue_database: str = "castable"
    """The Glue Data Catalog database in which each table with ``publish.iceberg`` on is registered
    as an Iceberg table (for Athena); created by the stack, so unique per account and region."""
    iceberg_catalog: bool = False
    """Serve the Iceberg REST catalog of the deployment's tables (infra/iceberg_rest.py): an API
    Gateway API with IAM authorization in front of ``lambdas/iceberg_rest.py``, through which
    Iceberg engines write the tables (``IcebergCatalogUri`` output)."""
    bucket_name: str | None = None
    """An existing bucket to keep the tables in, instead of one the stack creates. The stack adds
    its landing notifications and turns on its EventBridge events; the compare-and-swap policy
    statements are an output (``RequiredBucketPolicyStatements``) to add to the bucket's policy,
    and its encryption, versioning and lifecycle stay as its owner set them."""

    def __post_init__(self) -> None:
        if self.bucket_name is not None and self.versioned:
            raise ValueError("versioned applies to a bucket the stack creates: set it on the existing bucket yourself")
        if self.emr_image is not None and self.emr_environment is not None:
            raise ValueError("emr_image and emr_environment both give the jobs their Python: choose one")
        if self.emr_environment is not None:
            check_archive(Path(self.emr_environment), self.architecture)
        if not re.fullmatch(r"[a-z0-9_]{1,255}", self.glue_database):
            raise ValueError(
                f"glue_database must be lower-case letters, digits and _, as Athena needs: {self.glue_database!r}"
            )
        keys = [t.name for t in self.tables] + [f"{d.name}/{t.name}" for d in self.databases for t in d.tables]
        names: dict[str, str] = {}
        for key in keys:
            if names.setdefault(glue_table_name(key), key) != key:
                raise ValueError(
                    f"tables {names[glue_table_name(key)]} and {key} share Glue table name {glue_table_name(key)}"
                )


class CastableStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, config: CastableConfig, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        self.bucket = self._bucket()
        self.table_uris = {t.name: f"s3://{self.bucket.bucket_name}/tables/{t.name}" for t in config.tables}
        self.database_uris = {d.name: f"s3://{self.bucket.bucket_name}/databases/{d.name}" for d in config.databases}
        self._protect_logs()
        package = Package(config.architecture, config.function_package)
        self.dead_letters: list[sqs.Queue] = []
        self.workflow_logs: dict[str, logs.LogGroup] = {}
        self.functions = {
            name: function(self, name, package, description, timeout, memory)
            for name, description, timeout, memory in [
                ("commit", "Register Parquet files written elsewhere as one append", 900, 1024),
                ("tombstone", "Soft-delete rows by SQL predicate", 120, 1024),
                ("splice", "Erase rows from one data file (row-group splice)", 900, 3008),
                ("maintenance", "Compaction, expiry and garbage-collection steps", 900, 3008),
                ("erasure", "Erasure planning, purge and verification steps", 900, 3008),
                ("trigger", "Start maintenance when tombstones pile up (debounced)", 60, 256),
                ("catalog", "Publish commits as Iceberg metadata and register them in Glue", 600, 2048),
            ]
        }
        for name, fn in self.functions.items():
            if name not in ("trigger", "catalog"):
                grant_tables(fn, self.bucket, list(ROOTS), key_arn=config.kms_key_arn)
        self._commit_invokes_itself()
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
        self.erasure = self._state_machine("erasure", ["tombstone", "erasure", "splice"])
        self._distributed_map(self.erasure, ERASURE_PLAN_PREFIX, ERASURE_RESULTS)
        self.maintenance = self._state_machine("maintenance", ["maintenance"])
        self._distributed_map(self.maintenance, MAINTENANCE_PLAN_PREFIX, MAINTENANCE_RESULTS)
        self.ingest_stacks = self._ingest_stacks()
        self.ingest_functions = [fn for group in self.ingest_stacks for fn in group.functions]
        self.dead_letters += [q for group in self.ingest_stacks for q in group.dead_letters]
        self._tombstone_trigger()
        self._catalog()
        self.iceberg_rest = (
            IcebergRestCatalog(
                self, "IcebergCatalog", package=package, bucket=self.bucket, roots=ROOTS, key_arn=config.kms_key_arn
            )
            if config.iceberg_catalog
            else None
        )
        self.emr = Emr(
            self,
            self.bucket,
            self.functions["commit"],
            roots=ROOTS,
            release=config.emr_release,
            architecture=config.architecture,
            image=config.emr_image,
            environment=config.emr_environment,
            kms_key_arn=config.kms_key_arn,
        )
        self.operations = Operations(
            self,
            "Operations",
            bucket=self.bucket,
            functions=[
                *self.functions.values(),
                *self.ingest_functions,
                *([] if self.iceberg_rest is None else [self.iceberg_rest.function]),
            ],
            dead_letters=self.dead_letters,
            workflows=[self.erasure, self.maintenance],
            erasure_logs=self.workflow_logs["erasure"],
            email=config.alert_email,
        )
        if self.iceberg_rest is not None:  # Spark on EMR writes through the catalog too
            self.iceberg_rest.clients.attach_to_role(self.emr.job_role)
        self._outputs()

    def _commit_invokes_itself(self) -> None:
        """The commit function may invoke itself, and nothing else: it has invocations of itself
        check the slices of a long file list (lambdas/commit.py). The grant is a policy of its
        own: the function depends on its role's default policy, which therefore cannot name the
        function's ARN (a circular dependency); this one depends on the function instead."""
        commit = self.functions["commit"]
        iam.Policy(
            self,
            "CommitInvokesItself",
            roles=[role for role in [commit.role] if role is not None],
            statements=[iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[commit.function_arn])],
        )

    def _bucket(self) -> s3.IBucket:
        """The table bucket: one the stack creates (private, encrypted, TLS only, access-logged,
        sending its events to EventBridge, with lifecycle rules), or the existing ``bucket_name``,
        whose notifications the stack adds to and which it makes send events to EventBridge;
        its policy, encryption, versioning and lifecycle stay its owner's (README: what to add)."""
        config = self.config
        if config.bucket_name is not None:
            existing = s3.Bucket.from_bucket_name(self, "Tables", config.bucket_name)
            existing.enable_event_bridge_notification()
            return existing
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
        return s3.Bucket(
            self,
            "Tables",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED if config.kms_key_arn is None else s3.BucketEncryption.KMS,
            encryption_key=None
            if config.kms_key_arn is None
            else kms.Key.from_key_arn(self, "TablesKey", config.kms_key_arn),
            bucket_key_enabled=config.kms_key_arn is not None or None,
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

    def _protect_logs(self) -> None:
        """No principal may write a table's or database's pointer or manifests except by
        compare-and-swap, the only way castable writes them (docs/format.md section 7): a pointer
        PUT must carry If-Match or If-None-Match, a manifest PUT If-None-Match. So no role,
        however broad its grant on the prefix, can overwrite a committed version or move the
        pointer blindly (CopyObject and multipart uploads are PutObject too, and refused alike)."""
        required = {
            POINTER_KEY: {"s3:if-match": "true", "s3:if-none-match": "true"},
            f"{MANIFEST_PREFIX}*": {"s3:if-none-match": "true"},
        }
        statements = [
            iam.PolicyStatement(
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["s3:PutObject"],
                # a table's, a database's and its members' (``*`` spans ``/`` in an ARN)
                resources=[self.bucket.arn_for_objects(f"{root}*/{key}") for root in ROOTS],
                conditions={"Null": absent},
            )
            for key, absent in required.items()
        ]
        if self.config.bucket_name is None:
            for statement in statements:
                self.bucket.add_to_resource_policy(statement)
        else:  # a stack cannot add to the policy of a bucket it does not own without replacing it
            document = iam.PolicyDocument(statements=statements)
            CfnOutput(
                self,
                "RequiredBucketPolicyStatements",
                value=Stack.of(self).to_json_string(document.to_json()["Statement"]),
                description="Add these statements to the existing bucket's policy: pointer and manifest "
                "writes only by compare-and-swap",
            )

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
                    resources=[self.bucket.arn_for_objects(f"{root}*/{plans}*") for root in ROOTS],
                ),
                iam.PolicyStatement(actions=["s3:PutObject"], resources=[self.bucket.arn_for_objects(f"{results}*")]),
                iam.PolicyStatement(actions=["states:StartExecution"], resources=[machine.state_machine_arn]),
                iam.PolicyStatement(
                    actions=["states:DescribeExecution", "states:StopExecution"], resources=[executions]
                ),
                *([] if self.config.kms_key_arn is None else [object_key_use(self.config.kms_key_arn)]),
            ],
        )

    def _ingest_stacks(self) -> list[IngestStack]:
        """Each table's and database's ingest unit, and each maintained table's schedule (a
        database's members keyed ``<db>/<member>``), in nested stacks of ``UNITS_PER_STACK``."""
        units = [self._table_unit(t) for t in self.config.tables]
        units += [self._database_unit(d) for d in self.config.databases]
        maintained = {t.name: [self._maintained(t.name, self.table_uris[t.name], t)] for t in self.config.tables}
        maintained |= {
            d.name: [
                self._maintained(f"{d.name}/{t.name}", f"{self.database_uris[d.name]}/{t.name}", t) for t in d.tables
            ]
            for d in self.config.databases
        }
        dead_letters = queue(self, "MaintenanceSchedulesDeadLetters", retention_period=Duration.days(14))
        self.dead_letters.append(dead_letters)
        self.schedule_dead_letters = dead_letters
        self.schedule_group = scheduler.ScheduleGroup(self, "MaintenanceSchedules")
        role = iam.Role(
            self,
            "MaintenanceSchedulesRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": self.account}}
            ),
        )
        shared = Shared(
            self.bucket,
            self.maintenance,
            self.schedule_group,
            role,
            dead_letters,
            self.config.architecture,
            self.config.function_package,
            self.config.kms_key_arn,
        )
        return [
            IngestStack(
                self,
                f"Ingest{start // UNITS_PER_STACK + 1}",
                shared,
                chunk,
                [m for unit in chunk for m in maintained[unit.name]],
            )
            for start in range(0, len(units), UNITS_PER_STACK)
            for chunk in [units[start : start + UNITS_PER_STACK]]
        ]

    def _table_unit(self, table: TableConfig) -> IngestUnit:
        environment = {
            "CASTABLE_TABLE": self.table_uris[table.name],
            "CASTABLE_INGEST_MODE": table.ingest_mode,
            "CASTABLE_SCHEMA_MODE": table.schema_mode,
        }
        if table.op_column is not None:
            environment["CASTABLE_OP_COLUMN"] = table.op_column
        description = f"{table.ingest_mode.title()} Parquet, CSV and JSON Lines files landing in landing/{table.name}/"
        return IngestUnit(
            table.name,
            f"tables/{table.name}/",
            environment,
            None,
            description,
            table.ingest_memory_mb,
            table.ingest_concurrency,
        )

    def _database_unit(self, database: DatabaseConfig) -> IngestUnit:
        """The same, fed by the batch manifests landing under the database's landing prefix."""
        return IngestUnit(
            database.name,
            f"databases/{database.name}/",
            {"CASTABLE_DATABASE": self.database_uris[database.name]},
            MANIFEST_SUFFIX,
            f"Append the files of each batch manifest landing in landing/{database.name}/, in one commit",
            database.ingest_memory_mb,
            database.ingest_concurrency,
        )

    @staticmethod
    def _maintained(key: str, uri: str, t: TableConfig) -> Maintained:
        retention = {"retain_versions": t.retain_versions, "retain_hours": t.retain_hours, "grace_hours": t.grace_hours}
        return Maintained(key, t.schedule, {"table": uri, **retention})

    def _object_events(self, name: str, rule: str, description: str, under: str, visibility: int) -> sqs.Queue:
        """A queue (``name``, with a dead-letter queue) that EventBridge rule ``rule`` fills with
        the S3 events of objects created ``under`` any table's (and database member's) prefix:
        one rule whatever the number of tables."""
        dead_letters = queue(self, f"{name}DeadLetters")
        self.dead_letters.append(dead_letters)
        events_queue = queue(
            self,
            name,
            visibility_timeout=Duration.seconds(visibility),
            dead_letter_queue=sqs.DeadLetterQueue(queue=dead_letters, max_receive_count=5),
        )
        keys = [{"wildcard": f"tables/*/{under}*"}, {"wildcard": f"databases/*/*/{under}*"}]
        events.Rule(
            self,
            rule,
            description=f"castable: {description}",
            event_pattern=objects_created(self.bucket, keys),
            targets=[targets.SqsQueue(events_queue)],
        )
        return events_queue

    def _tombstone_trigger(self) -> None:
        """S3 tombstone writes -> EventBridge -> SQS -> trigger Lambda -> one maintenance run per window.
        Every table's: the trigger looks the table's schedule up, and skips one without."""
        events_queue = self._object_events(
            "TombstoneEvents", "TombstonesWritten", "tombstone files written under any table", "tombstone/", 360
        )
        fn = self.functions["trigger"]
        fn.add_environment("MAINTENANCE_STATE_MACHINE_ARN", self.maintenance.state_machine_arn)
        fn.add_environment("MAINTENANCE_SCHEDULE_GROUP", self.schedule_group.schedule_group_name)
        fn.add_environment("DEBOUNCE_SECONDS", "900")
        schedules = self.format_arn(
            service="scheduler", resource="schedule", resource_name=f"{self.schedule_group.schedule_group_name}/*"
        )
        fn.add_to_role_policy(iam.PolicyStatement(actions=["scheduler:GetSchedule"], resources=[schedules]))
        fn.add_event_source(
            sources.SqsEventSource(events_queue, batch_size=100, max_batching_window=Duration.seconds(60))
        )
        self.maintenance.grant_start_execution(fn)

    def _catalog(self) -> None:
        """S3 manifest writes -> EventBridge -> SQS -> catalog Lambda -> Iceberg metadata and its
        Glue table, for every table with ``publish.iceberg`` on."""
        self.glue_database = glue.CfnDatabase(
            self,
            "Catalog",
            catalog_id=self.account,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=self.config.glue_database, description="castable tables, as Iceberg tables"
            ),
        )
        events_queue = self._object_events(
            "CommitEvents", "ManifestsWritten", "versions committed under any table", MANIFEST_PREFIX, 3600
        )
        fn = self.functions["catalog"]
        fn.add_environment("GLUE_DATABASE", self.config.glue_database)
        grant_publication(fn, self.bucket, list(ROOTS), key_arn=self.config.kms_key_arn)
        catalog = self.format_arn(service="glue", resource="catalog")
        database = self.format_arn(service="glue", resource="database", resource_name=self.config.glue_database)
        tables = self.format_arn(service="glue", resource="table", resource_name=f"{self.config.glue_database}/*")
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["glue:GetTable", "glue:CreateTable", "glue:UpdateTable"], resources=[catalog, database, tables]
            )
        )
        fn.add_event_source(
            sources.SqsEventSource(
                events_queue,
                batch_size=100,
                max_batching_window=Duration.seconds(10),
                report_batch_item_failures=True,
                max_concurrency=5,
            )
        )

    def _outputs(self) -> None:
        """What the README's commands need: the bucket, the functions, the workflows, EMR."""
        for name, value in [
            ("TablesBucket", self.bucket.bucket_name),
            ("CommitFunctionName", self.functions["commit"].function_name),
            ("ErasureStateMachineArn", self.erasure.state_machine_arn),
            ("MaintenanceStateMachineArn", self.maintenance.state_machine_arn),
            ("GlueDatabase", self.config.glue_database),
            *self.emr.outputs(),
            ("AlertsTopicArn", self.operations.topic.topic_arn),
        ]:
            CfnOutput(self, name, value=value)
