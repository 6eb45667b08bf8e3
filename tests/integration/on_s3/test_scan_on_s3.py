"""tests/unit/read/test_scan.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.read.test_scan import *  # noqa: F403
