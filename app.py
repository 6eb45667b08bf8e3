#!/usr/bin/env python3
"""The castable CDK app: ``npx aws-cdk@2 deploy`` deploys what ``castable.json`` describes.

The configuration file (named by the ``config`` context in cdk.json; infra/config.py checks it)
holds ``tables`` (a list of {"name", "schedule", "retain_versions", "retain_hours", "grace_hours",
"ingest_concurrency", "ingest_memory_mb", "ingest_mode", "schema_mode", "op_column"}),
``databases`` (a list of {"name", "tables": [members to maintain, as in ``tables``],
"ingest_concurrency", "ingest_memory_mb"}), ``versioned``, ``emr_image``, ``alert_email``,
``architecture``, ``kms_key_arn``, ``bucket_name`` and ``function_package``.
With ``-c config=`` the same come from flags instead: ``-c tables='[...]'``, ``-c databases=``,
``-c versioned=true``, ``-c emrImage=``, ``-c alertEmail=``, ``-c architecture=``,
``-c kmsKeyArn=``, ``-c bucketName=``, ``-c functionPackage=``. Findings of cdk-nag's AWS Solutions
checks fail the synth; each suppression in infra/ says why.
"""

from __future__ import annotations

import aws_cdk as cdk

from infra.config import CONTEXT_KEYS, choose
from infra.nag import check
from infra.stack import CastableStack

FEATURE_FLAGS = {
    # Server access logs are granted by a bucket policy, not the legacy LogDeliveryWrite ACL.
    "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": True,
}


def build(app: cdk.App) -> CastableStack:
    for flag, value in FEATURE_FLAGS.items():
        app.node.set_context(flag, value)
    context = {key: app.node.try_get_context(key) for key in ("config", *CONTEXT_KEYS)}
    stack = CastableStack(app, "Castable", choose(context))
    check(app, stack)
    return stack


if __name__ == "__main__":
    app = cdk.App()
    build(app)
    app.synth()
