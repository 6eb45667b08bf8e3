"""tests/unit/store/test_store.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.store.test_store import *  # noqa: F403
