#!/usr/bin/env python3
"""The castable CDK app: ``npx aws-cdk@2 deploy`` deploys what ``castable.json`` describes.

The configuration file (named by the ``config`` context in cdk.json; infra/config.py checks it)
holds deployment-wide settings only: ``versioned``, ``emr_image``, ``emr_environment``,
``alert_email``, ``architecture``, ``kms_key_arn``, ``bucket_name``, ``function_package``,
``glue_database``, ``iceberg_catalog``, ``ingest_concurrency``, ``ingest_memory_mb`` and
``maintenance_every_minutes``. Tables are data in the bucket, each served as its own properties
say. With ``-c config=`` the same come from flags instead (``-c versioned=true``, ``-c emrImage=``,
...). Findings of cdk-nag's AWS Solutions checks fail the synth; each suppression in infra/ says why.
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
    # tables and databases are flags of the per-table deployment, refused with what to do instead
    context = {key: app.node.try_get_context(key) for key in ("config", "tables", "databases", *CONTEXT_KEYS)}
    stack = CastableStack(app, "Castable", choose(context))
    check(app, stack)
    return stack


if __name__ == "__main__":
    app = cdk.App()
    build(app)
    app.synth()
