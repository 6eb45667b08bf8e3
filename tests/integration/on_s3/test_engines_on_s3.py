"""tests/unit/read/test_engines.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.read.test_engines import *  # noqa: F403
