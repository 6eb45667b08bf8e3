"""tests/unit/commit/test_commit_protocol.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.commit.test_commit_protocol import *  # noqa: F403
