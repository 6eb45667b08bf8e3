"""tests/unit/ops/test_add_files.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.ops.test_add_files import *  # noqa: F403
