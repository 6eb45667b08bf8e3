"""tests/unit/maintenance/test_maintenance.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.maintenance.test_maintenance import *  # noqa: F403
