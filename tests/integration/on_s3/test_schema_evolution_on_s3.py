"""tests/unit/table/test_schema_evolution.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.table.test_schema_evolution import *  # noqa: F403
