"""Building blocks both the main stack and its ingest stacks make: a function with its log
group, an encrypted TLS-only queue, and a function's grant on table prefixes."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from castable.format.layout import ICEBERG_PREFIX
from castable.format.properties import AFTER_COMMIT
from castable.store.probe import PROBE_PREFIX
from infra.bundling import Package


def function(
    scope: Construct,
    name: str,
    package: Package,
    description: str,
    timeout: int,
    memory: int,
    construct: str | None = None,
) -> lambda_.Function:
    """The function running ``lambdas/<name>.py`` from ``package``; ``construct`` names it when
    one handler serves several."""
    construct = construct or name.title()
    log_group = logs.LogGroup(scope, f"{construct}Logs", retention=logs.RetentionDays.ONE_MONTH)
    handler = f"lambdas.{name}.handler"
    return lambda_.Function(
        scope,
        f"{construct}Function",
        description=f"castable: {description}",
        runtime=package.runtime,
        architecture=package.lambda_architecture,
        handler=package.handler(handler),
        code=package.code(handler),
        timeout=Duration.seconds(timeout),
        memory_size=memory,
        ephemeral_storage_size=None,
        tracing=lambda_.Tracing.ACTIVE,
        log_group=log_group,
        environment={
            "POWERTOOLS_SERVICE_NAME": f"castable-{name}",
            "POWERTOOLS_METRICS_NAMESPACE": "castable",
            "POWERTOOLS_LOG_LEVEL": "INFO",
            # the catalog function publishes every commit (publish.iceberg), off the commit's path
            AFTER_COMMIT: "false",
        },
    )


def queue(scope: Construct, construct_id: str, **kwargs: object) -> sqs.Queue:
    """An SQS queue that refuses plain HTTP and is encrypted at rest."""
    return sqs.Queue(
        scope,
        construct_id,
        enforce_ssl=True,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        **kwargs,  # type: ignore[arg-type]
    )


def object_key_use(key_arn: str) -> iam.PolicyStatement:
    """Use of the bucket's customer-managed KMS key to read and write its objects, through S3
    only (S3 asks KMS for a data key to write, and to decrypt one to read or copy)."""
    return iam.PolicyStatement(
        actions=["kms:Decrypt", "kms:GenerateDataKey"],
        resources=[key_arn],
        conditions={"StringLike": {"kms:ViaService": "s3.*.amazonaws.com"}},
    )


def grant_tables(
    fn: lambda_.Function, bucket: s3.IBucket, prefixes: list[str], *, delete: bool = True, key_arn: str | None = None
) -> None:
    """Read/write (and with ``delete``, delete) under ``prefixes`` only (``tables/`` and
    ``databases/`` for a function serving every table, one table's for its ingest function);
    listing restricted to them. Without ``delete`` a function may delete only the scratch keys
    of castable's store probe (each table and database probes under its own prefix). With
    ``key_arn`` (the bucket's customer-managed key) it may use that key through S3."""
    actions = ["s3:GetObject", "s3:GetObjectVersion", "s3:PutObject", "s3:AbortMultipartUpload"]
    actions.append("s3:ListMultipartUploadParts")
    if delete:
        actions += ["s3:DeleteObject", "s3:DeleteObjectVersion"]
    else:
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:DeleteObject", "s3:DeleteObjectVersion"],
                resources=[bucket.arn_for_objects(f"{p}{PROBE_PREFIX}*") for p in prefixes]
                + [bucket.arn_for_objects(f"{p}*/{PROBE_PREFIX}*") for p in prefixes],
            )
        )
    fn.add_to_role_policy(
        iam.PolicyStatement(actions=actions, resources=[bucket.arn_for_objects(f"{p}*") for p in prefixes])
    )
    fn.add_to_role_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket", "s3:ListBucketVersions"],
            resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{p}*" for p in prefixes]}},
        )
    )
    # Whether the bucket keeps versions: castable's deletes then delete every version.
    fn.add_to_role_policy(iam.PolicyStatement(actions=["s3:GetBucketVersioning"], resources=[bucket.bucket_arn]))
    if key_arn is not None:
        fn.add_to_role_policy(object_key_use(key_arn))


def grant_publication(
    fn: lambda_.Function, bucket: s3.IBucket, roots: list[str], *, key_arn: str | None = None
) -> None:
    """Read every table under ``roots``; write only the Iceberg metadata published beside each
    (``<table>/metadata/``) and the scratch keys of castable's store probe (which the hint's
    compare-and-swap runs first). No delete but the probe's: a publication never deletes."""
    tables = [f"{root}*/" for root in roots]
    grant_reads(fn, bucket, roots, key_arn=key_arn)
    fn.add_to_role_policy(
        iam.PolicyStatement(
            actions=["s3:PutObject"],
            resources=[bucket.arn_for_objects(f"{t}{p}*") for t in tables for p in (ICEBERG_PREFIX, PROBE_PREFIX)],
        )
    )
    fn.add_to_role_policy(
        iam.PolicyStatement(
            actions=["s3:DeleteObject"], resources=[bucket.arn_for_objects(f"{t}{PROBE_PREFIX}*") for t in tables]
        )
    )


def grant_reads(fn: lambda_.Function, bucket: s3.IBucket, roots: list[str], *, key_arn: str | None = None) -> None:
    """Read and list every table under ``roots``, nothing else."""
    fn.add_to_role_policy(
        iam.PolicyStatement(actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{r}*") for r in roots])
    )
    fn.add_to_role_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{r}*" for r in roots]}},
        )
    )
    if key_arn is not None:
        fn.add_to_role_policy(object_key_use(key_arn))
