"""castable's benchmarks, one package per theme; ``python -m bench`` lists and runs them (see ``__main__``).

Every module of bench/ runs as ``python -m bench.THEME.NAME`` from the repository's root, so the
root is on ``sys.path`` (``app``, ``infra`` and ``lambdas`` import as they do in the tests) and
one module imports another by its full name (``from bench.common.benchlib import ...``). Importing
this package puts ``tests/`` on ``sys.path`` too, before any module of it runs: the helpers the
benchmarks share with the tests (``from helpers.s3servers import ...``) live in ``tests/helpers``.
"""

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parent.parent / "tests")
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
