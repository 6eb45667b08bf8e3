"""tests/unit/iceberg/test_iceberg.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.iceberg.test_iceberg import *  # noqa: F403
