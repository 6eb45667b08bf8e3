"""tests/unit/ops/test_restore.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.ops.test_restore import *  # noqa: F403
