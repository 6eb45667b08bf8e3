#!/usr/bin/env python3
"""The castable CDK app: ``npx aws-cdk@2 deploy -c tables='[{"name": "events"}]'``.

Context: ``tables`` (a JSON list of {"name", "schedule", "retain_versions", "retain_hours",
"grace_hours", "ingest_concurrency", "ingest_mode", "schema_mode", "op_column"}), ``databases`` (a JSON
list of {"name", "tables": [members to maintain, as in ``tables``], "ingest_concurrency", "ingest_memory_mb"}),
``versioned`` (true to version the bucket), ``alertEmail`` (who the alerts topic emails). Findings of cdk-nag's AWS
Solutions checks fail the synth; each suppression in infra/ says why.
"""

from __future__ import annotations

import json

import aws_cdk as cdk

from infra.nag import check
from infra.stack import CastableConfig, CastableStack, DatabaseConfig, TableConfig


def config_from_context(app: cdk.App) -> CastableConfig:
    tables = app.node.try_get_context("tables") or [{"name": "events"}]
    if isinstance(tables, str):
        tables = json.loads(tables)
    databases = app.node.try_get_context("databases") or []
    if isinstance(databases, str):
        databases = json.loads(databases)
    versioned = app.node.try_get_context("versioned") in (True, "true", "True", "1")
    return CastableConfig(
        tables=[TableConfig(**t) for t in tables],
        databases=[DatabaseConfig(**d) for d in databases],
        versioned=versioned,
        emr_image=app.node.try_get_context("emrImage"),
        alert_email=app.node.try_get_context("alertEmail"),
    )


FEATURE_FLAGS = {
    # Server access logs are granted by a bucket policy, not the legacy LogDeliveryWrite ACL.
    "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": True,
}


def build(app: cdk.App) -> CastableStack:
    for flag, value in FEATURE_FLAGS.items():
        app.node.set_context(flag, value)
    stack = CastableStack(app, "Castable", config_from_context(app))
    check(app, stack)
    return stack


if __name__ == "__main__":
    app = cdk.App()
    build(app)
    app.synth()
