"""tests/unit/maintenance/test_erase_traces.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.maintenance.test_erase_traces import *  # noqa: F403
