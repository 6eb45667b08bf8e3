"""tests/unit/database/test_database.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.database.test_database import *  # noqa: F403
