"""tests/unit/format/test_format_v2.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.format.test_format_v2 import *  # noqa: F403
