"""tests/unit/format/test_inline.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.format.test_inline import *  # noqa: F403
