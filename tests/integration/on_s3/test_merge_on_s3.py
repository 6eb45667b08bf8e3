"""tests/unit/ops/test_merge.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.ops.test_merge import *  # noqa: F403
