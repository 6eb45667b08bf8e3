"""tests/unit/maintenance/test_erase.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.maintenance.test_erase import *  # noqa: F403
