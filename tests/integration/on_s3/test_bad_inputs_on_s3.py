"""tests/unit/table/test_bad_inputs.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.table.test_bad_inputs import *  # noqa: F403
