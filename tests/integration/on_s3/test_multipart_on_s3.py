"""tests/unit/store/test_multipart.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.store.test_multipart import *  # noqa: F403
