"""tests/unit/commit/test_turns.py's tests over ``table_uri`` or ``store``, on moto S3."""

from unit.commit.test_turns import *  # noqa: F403
