"""tests/unit/ops/test_replace.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.ops.test_replace import *  # noqa: F403
