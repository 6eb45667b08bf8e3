"""Every code block of every page (README.md and docs/**/*.md) runs: the examples
tests/integration/project/test_docs_examples.py checks the output of, and here the rest of each page, top to bottom,
as a reader would run it. A block that cannot run on this machine says why just above its
fence (``<!-- not run: REASON -->``), and those are few."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import ROOT
from helpers.docs import NOT_CODE, Block, blocks, pages, run

from integration.engines.test_catalog_duckdb import DUCKDB_SECTION
from integration.project.test_docs_examples import EXAMPLES
from integration.project.test_packaging import INSTALL

MAX_NOT_RUN = 4
"""The deployment's two (an AWS account), EMR's (Docker, AWS) and the README's two commands
(``make test`` is this suite)."""
SPARK = [pytest.mark.slow, pytest.mark.spark, pytest.mark.xdist_group("spark")]
MARKS = {"docs/guides/spark.md": SPARK}
"""Pages whose run is a slow one, marked as the suite's other tests of the same engine are."""
LINK = re.compile(r"\]\(([^)#\s]+)")


def checked() -> set[Block]:
    """The blocks tests/integration/project/test_docs_examples.py and test_packaging.py run, and
    the DuckDB example (tests/integration/engines/test_catalog_duckdb.py, in DuckDB's side venv)."""
    return {example.block() for example in [*EXAMPLES, INSTALL, DUCKDB_SECTION]}


def left_to_run(page: str) -> list[Block]:
    """The code of ``page`` that runs here: not checked elsewhere, not excused."""
    done = checked()
    return [b for b in blocks(page) if b.kind is not None and b.not_run is None and b not in done]


def test_every_block_is_code_or_shown() -> None:
    """A block in a language neither run nor listed as shown (a misspelt ``Python``, a ``pycon``
    session) fails rather than going unrun; a not-run note stands only above code."""
    unknown = [str(b) for page in pages() for b in blocks(page) if b.kind is None and b.language not in NOT_CODE]
    assert not unknown, f"blocks in a language that is neither run nor shown: {unknown}"
    misplaced = [str(b) for page in pages() for b in blocks(page) if b.not_run and b.kind is None]
    assert not misplaced, f"not-run notes above blocks that are not code: {misplaced}"
    excused = [str(b) for b in checked() if b.not_run]
    assert not excused, f"examples tests/integration/project/test_docs_examples.py runs are marked not run: {excused}"


def test_blocks_not_run_are_few() -> None:
    excused = [b for page in pages() for b in blocks(page) if b.not_run]
    for block in excused:
        print(f"not run: {block}: {block.not_run}")
    assert len(excused) <= MAX_NOT_RUN, "\n".join(f"{b}: {b.not_run}" for b in excused)


@pytest.mark.parametrize("page", [pytest.param(p, marks=MARKS.get(p, [])) for p in pages() if left_to_run(p)])
def test_page_runs_as_written(page: str, tmp_path: Path) -> None:
    """The page's code, in page order, in a scratch directory that links the checkout's jobs/
    (the Spark job a page submits, as from a checkout)."""
    (tmp_path / "jobs").symlink_to(ROOT / "jobs")
    done = run(left_to_run(page), tmp_path)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-10000:]


def test_readme_links_resolve() -> None:
    """The README is not part of the site, whose build checks its links: its links to files of
    the repository (the guides, the results) are checked here."""
    targets = LINK.findall((ROOT / "README.md").read_text())
    missing = [t for t in targets if "://" not in t and not (ROOT / t).exists()]
    assert targets and not missing, missing
