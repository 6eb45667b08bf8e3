"""tests/unit/commit/test_protocol_checks.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.commit.test_protocol_checks import *  # noqa: F403
