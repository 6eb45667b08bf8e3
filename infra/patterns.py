"""EventBridge patterns the stack matches S3's events with."""

from __future__ import annotations

from aws_cdk import aws_events as events
from aws_cdk import aws_s3 as s3


def objects_created(bucket: s3.IBucket, keys: list[dict[str, str]]) -> events.EventPattern:
    """Objects created in ``bucket`` whose keys match any of ``keys`` (EventBridge key filters,
    such as ``{"wildcard": "tables/*/tombstone/*"}``); the bucket sends its events to EventBridge."""
    return events.EventPattern(
        source=["aws.s3"],
        detail_type=["Object Created"],
        detail={"bucket": {"name": [bucket.bucket_name]}, "object": {"key": keys}},
    )
