"""The castable stack: table bucket, landing queues, functions, workflows, the maintenance
schedule, and the EMR side (an EMR Serverless Spark application and the job role of the ingest job).

Tables live under ``s3://<bucket>/tables/<name>/`` (databases under ``databases/<name>/``), and
are data, not resources of the stack: its functions find them by listing those prefixes and
read how to serve each from its properties, so the template is the same for 0 tables or 10,000
and a table created by any writer is served at once. Files dropped under ``landing/<name>/``
reach one shared ingest function through an EventBridge rule, a route function and an SQS fair
queue whose message group is the table; one schedule starts the maintain-due workflow, which
maintains the tables whose ``maintenance.schedule`` fell due. The functions are limited to
``tables/``, ``databases/`` and their own working prefixes; nothing gets a bucket-wide write.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
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
from aws_cdk import aws_scheduler_targets as scheduler_targets
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from castable.deployment.layout import FAILED_LANDING_PREFIX, LANDING, MAINTENANCE_DUE_PREFIX
from castable.format.layout import ERASURE_PLAN_PREFIX, MAINTENANCE_PLAN_PREFIX, MANIFEST_PREFIX, POINTER_KEY
from infra.bundling import Package
from infra.emr import Emr
from infra.emr_env import check_archive
from infra.iceberg_rest import IcebergRestCatalog
from infra.operations import Operations
from infra.parts import function, grant_publication, grant_reads, grant_tables, object_key_use, queue
from infra.patterns import objects_created

STATE_MACHINES = Path(__file__).resolve().parent.parent / "statemachines"
ERASURE_RESULTS = "erasure-results/"
"""Where the erasure workflow's Distributed Map writes its splices' results (file, version, rows)."""
MAINTENANCE_RESULTS = "maintenance-results/"
"""Where the maintenance workflow's Distributed Map writes its compactions' results."""
RESULTS_DAYS = 30
"""How long the workflows' results are kept."""
SCHEDULE_RETRIES = 3
"""Times the maintenance schedule retries a start that failed (throttled, say) before it keeps it
as a dead letter."""
ROOTS = ("tables/", "databases/")
"""Where every table and database of the deployment lives: the functions that serve them all
are granted these prefixes (a list per table would outgrow IAM's policy sizes at ~50 tables)."""


@dataclass(frozen=True)
class CastableConfig:
    """Deployment-wide settings; each table's own (ingest mode, schedule, retention) are its properties."""

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
    ingest_concurrency: int = 20
    """At most this many ingest functions run at once, for all tables together (SQS
    ``maximumConcurrency``, 2 to 1000); the fair queue shares them among the busy tables."""
    ingest_memory_mb: int = 1024
    """The ingest function streams a landed file a row group at a time: a 2 GiB file peaks at
    about 512 MiB (bench/deployment/ingest_memory.py). Raise it for row groups over ~256 MiB."""
    maintenance_every_minutes: int = 15
    """How often the maintain-due workflow looks for tables whose ``maintenance.schedule`` fell due."""
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
        if not 2 <= self.ingest_concurrency <= 1000:
            raise ValueError(
                f"ingest_concurrency must be 2 to 1000 (SQS maximumConcurrency), not {self.ingest_concurrency}"
            )
        if not 1 <= self.maintenance_every_minutes <= 24 * 60:
            raise ValueError(f"maintenance_every_minutes must be 1 to 1440, not {self.maintenance_every_minutes}")


class CastableStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, config: CastableConfig, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        self.bucket = self._bucket()
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
                (
                    "ingest",
                    "Ingest files landing for any table, one commit per table a batch",
                    900,
                    config.ingest_memory_mb,
                ),
                ("route", "Give each landed file's message its table as message group", 60, 256),
            ]
        }
        for name, fn in self.functions.items():
            if name not in ("trigger", "catalog", "route"):
                grant_tables(fn, self.bucket, list(ROOTS), delete=name != "ingest", key_arn=config.kms_key_arn)
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
        self.maintain_due = self._state_machine("maintain-due", ["maintenance"])
        self._maintain_due()
        self._ingest()
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
                *([] if self.iceberg_rest is None else [self.iceberg_rest.function]),
            ],
            dead_letters=self.dead_letters,
            workflows=[self.erasure, self.maintenance, self.maintain_due],
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
        its policy, encryption, versioning and lifecycle stay its owner's (docs/guides/deployment.md: what to add)."""
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
                    for results in (ERASURE_RESULTS, MAINTENANCE_RESULTS, MAINTENANCE_DUE_PREFIX)
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
        construct = name.title().replace("-", "")
        log_group = logs.LogGroup(self, f"{construct}WorkflowLogs", retention=logs.RetentionDays.ONE_MONTH)
        self.workflow_logs[name] = log_group
        definition = (STATE_MACHINES / f"{name}.asl.json").read_text()
        substitutions = {f"{f.title()}FunctionArn": self.functions[f].function_arn for f in functions}
        if "${ResultsBucket}" in definition:  # a Distributed Map writes its results to the tables' bucket
            substitutions["ResultsBucket"] = self.bucket.bucket_name
        if "${MaintenanceWorkflowArn}" in definition:  # the maintain-due workflow runs the maintenance one
            substitutions["MaintenanceWorkflowArn"] = self.maintenance.state_machine_arn
        machine = sfn.StateMachine(
            self,
            f"{construct}Workflow",
            definition_body=sfn.DefinitionBody.from_string(definition),
            definition_substitutions=substitutions,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=self.workflow_logs[name], level=sfn.LogLevel.ALL),
            timeout=Duration.hours(6),
        )
        for f in functions:
            self.functions[f].grant_invoke(machine)
        return machine

    def _distributed_map(
        self, machine: sfn.StateMachine, plans: str, results: str, extra: Sequence[iam.PolicyStatement] = ()
    ) -> None:
        """What a Distributed Map of ``machine`` needs: read its work plans under each table's (and
        database's) ``plans`` prefix (or the bucket's own, for a plan of tables), write its results
        under ``results``, and run, watch and stop its child executions, and whatever ``extra``
        its items do. A policy of its own, attached after the state machine exists, since it
        names the machine's ARN."""
        plan_objects = [f"{plans}*"] if plans == MAINTENANCE_DUE_PREFIX else [f"{root}*/{plans}*" for root in ROOTS]
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
                    actions=["s3:GetObject"], resources=[self.bucket.arn_for_objects(p) for p in plan_objects]
                ),
                iam.PolicyStatement(actions=["s3:PutObject"], resources=[self.bucket.arn_for_objects(f"{results}*")]),
                iam.PolicyStatement(actions=["states:StartExecution"], resources=[machine.state_machine_arn]),
                iam.PolicyStatement(
                    actions=["states:DescribeExecution", "states:StopExecution"], resources=[executions]
                ),
                *([] if self.config.kms_key_arn is None else [object_key_use(self.config.kms_key_arn)]),
                *extra,
            ],
        )

    def _maintain_due(self) -> None:
        """One schedule, every ``maintenance_every_minutes``, starts the maintain-due workflow with
        the schedule's time: its discovery step lists the tables (and may write their list under
        ``maintenance-due/``), and its Distributed Map runs the maintenance workflow for each table
        due and waits for it. EventBridge Scheduler, not a scheduled rule: a start that fails is
        retried, then kept in a dead-letter queue (which an alarm watches) instead of dropped."""
        maintenance = self.maintenance
        executions = self.format_arn(
            service="states",
            resource="execution",
            resource_name=f"{maintenance.state_machine_name}:*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        sync_rule = self.format_arn(
            service="events", resource="rule", resource_name="StepFunctionsGetEventsForStepFunctionsExecutionRule"
        )
        self._distributed_map(
            self.maintain_due,
            MAINTENANCE_DUE_PREFIX,
            MAINTENANCE_RESULTS,
            [
                iam.PolicyStatement(actions=["states:StartExecution"], resources=[maintenance.state_machine_arn]),
                iam.PolicyStatement(
                    actions=["states:DescribeExecution", "states:StopExecution"], resources=[executions]
                ),
                # how Step Functions waits for a child workflow (the .sync:2 integration)
                iam.PolicyStatement(
                    actions=["events:PutTargets", "events:PutRule", "events:DescribeRule"], resources=[sync_rule]
                ),
            ],
        )
        self.functions["maintenance"].add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject"], resources=[self.bucket.arn_for_objects(f"{MAINTENANCE_DUE_PREFIX}*")]
            )
        )
        dead_letters = queue(self, "MaintenanceScheduleDeadLetters", retention_period=Duration.days(14))
        self.dead_letters.append(dead_letters)
        self.schedule_dead_letters = dead_letters
        role = iam.Role(
            self,
            "MaintenanceScheduleRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": self.account}}
            ),
        )
        every = self.config.maintenance_every_minutes
        scheduler.Schedule(
            self,
            "MaintenanceSchedule",
            description="castable: maintain the tables whose maintenance.schedule fell due",
            schedule=scheduler.ScheduleExpression.rate(Duration.minutes(every)),
            target=scheduler_targets.StepFunctionsStartExecution(
                self.maintain_due,
                input=scheduler.ScheduleTargetInput.from_object(
                    {"now": scheduler.ContextAttribute.scheduled_time, "every_minutes": every}
                ),
                role=role,
                retry_attempts=SCHEDULE_RETRIES,
                max_event_age=Duration.hours(1),
                dead_letter_queue=dead_letters,
            ),
        )

    def _ingest(self) -> None:
        """S3 objects created under ``landing/`` -> EventBridge -> the landing-events queue -> the
        route function, which sends each to the ingest queue with its table as message group (an
        SQS fair queue: a busy table does not starve a quiet one) -> the ingest function, at most
        ``ingest_concurrency`` at once, in batches of 50 (or 30 s) with partial-batch failures."""
        events_queue = self._landing_events()
        landing = self._queue("Landing", 6 * 900)
        route = self.functions["route"]
        route.add_environment("CASTABLE_INGEST_QUEUE_URL", landing.queue_url)
        landing.grant_send_messages(route)
        route.add_event_source(sources.SqsEventSource(events_queue, batch_size=10, report_batch_item_failures=True))
        fn = self.functions["ingest"]
        fn.add_environment("CASTABLE_BUCKET", self.bucket.bucket_name)
        fn.add_environment("CASTABLE_DEAD_LETTER_PREFIX", FAILED_LANDING_PREFIX)
        fn.add_event_source(
            sources.SqsEventSource(
                landing,
                batch_size=50,
                max_batching_window=Duration.seconds(30),
                report_batch_item_failures=True,
                max_concurrency=self.config.ingest_concurrency,
            )
        )
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:DeleteObject"], resources=[self.bucket.arn_for_objects(f"{LANDING}/*")]
            )
        )
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject"], resources=[self.bucket.arn_for_objects(f"{FAILED_LANDING_PREFIX}{LANDING}/*")]
            )
        )
        # Without listing, S3 answers 403 instead of 404 for a landed file already ingested (a
        # duplicate delivery): the function could not tell it from a refusal.
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{LANDING}/*"]}},
            )
        )

    def _landing_events(self) -> sqs.Queue:
        """The queue (with its dead letters) that one EventBridge rule fills with the events of
        every object created under ``landing/``."""
        events_queue = self._queue("LandingEvents", 6 * 60)
        events.Rule(
            self,
            "FilesLanded",
            description="castable: files landed for any table or database",
            event_pattern=objects_created(self.bucket, [{"prefix": f"{LANDING}/"}]),
            targets=[targets.SqsQueue(events_queue)],
        )
        return events_queue

    def _queue(self, name: str, visibility: int) -> sqs.Queue:
        """Queue ``name`` and its dead letters (``<name>DeadLetters``, kept 14 days, which an alarm
        watches), where a message goes after 5 failed receives."""
        dead_letters = queue(self, f"{name}DeadLetters", retention_period=Duration.days(14))
        self.dead_letters.append(dead_letters)
        return queue(
            self,
            name,
            visibility_timeout=Duration.seconds(visibility),
            dead_letter_queue=sqs.DeadLetterQueue(queue=dead_letters, max_receive_count=5),
        )

    def _object_events(self, name: str, rule: str, description: str, under: str, visibility: int) -> sqs.Queue:
        """A queue (``name``, with a dead-letter queue) that EventBridge rule ``rule`` fills with
        the S3 events of objects created ``under`` any table's (and database member's) prefix:
        one rule whatever the number of tables."""
        events_queue = self._queue(name, visibility)
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
        Every table's: the trigger reads the table's schedule property, and skips a table it says
        the deployment does not maintain."""
        events_queue = self._object_events(
            "TombstoneEvents", "TombstonesWritten", "tombstone files written under any table", "tombstone/", 360
        )
        fn = self.functions["trigger"]
        fn.add_environment("MAINTENANCE_STATE_MACHINE_ARN", self.maintenance.state_machine_arn)
        fn.add_environment("DEBOUNCE_SECONDS", "900")
        grant_reads(fn, self.bucket, list(ROOTS), key_arn=self.config.kms_key_arn)  # each table's schedule
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
        """What the deployment guide's commands need: the bucket, the functions, the workflows, EMR."""
        for name, value in [
            ("TablesBucket", self.bucket.bucket_name),
            ("CommitFunctionName", self.functions["commit"].function_name),
            ("ErasureStateMachineArn", self.erasure.state_machine_arn),
            ("MaintenanceStateMachineArn", self.maintenance.state_machine_arn),
            ("MaintainDueStateMachineArn", self.maintain_due.state_machine_arn),
            ("GlueDatabase", self.config.glue_database),
            *self.emr.outputs(),
            ("AlertsTopicArn", self.operations.topic.topic_arn),
        ]:
            CfnOutput(self, name, value=value)
