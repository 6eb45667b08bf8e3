"""tests/unit/ops/test_update.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.ops.test_update import *  # noqa: F403
