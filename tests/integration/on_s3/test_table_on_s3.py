"""tests/unit/table/test_table.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.table.test_table import *  # noqa: F403
