"""The examples whose output the documentation states run as written and print it, so neither
can drift; tests/integration/project/test_docs.py runs every other code block of every page."""

from __future__ import annotations

from pathlib import Path

from helpers.docs import Section, run

TOUR = Section("README.md", "## Five-minute tour: the Python API", "python")
CLI = Section("docs/guides/cli.md", "# The command line", "bash")
DATABASE = Section("docs/guides/databases.md", "# Databases: several tables, one commit", "python")
DATABASE_CLI = Section("docs/guides/databases.md", "# Databases: several tables, one commit", "bash")
ISOLATION = Section("docs/guides/databases.md", "## Isolation", "python")
CHANGE_FEED = Section("docs/guides/change-feed.md", "# Change feed: what changed since you last looked", "python")
CATALOG = Section("docs/guides/iceberg.md", "## Every Iceberg engine writes: the REST catalog", "python")
EXAMPLES = [TOUR, CLI, DATABASE, DATABASE_CLI, ISOLATION, CHANGE_FEED, CATALOG]
"""Every block these tests run (tests/integration/project/test_docs.py leaves them to these)."""


def test_python_tour_runs_as_written(tmp_path: Path) -> None:
    done = run([TOUR.block()], tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == str(
        [{"id": 5, "amount": 2.5}, {"id": 6, "amount": 4.0}, {"id": 8, "amount": 8.0}, {"id": 9, "amount": 9.0}]
    )
    assert lines[1:3] == ["[(4,)]", "3"]
    assert "'verified': True" in done.stdout


def test_cli_section_runs_as_written(tmp_path: Path) -> None:
    done = run([CLI.block()], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "already committed as version 1" in done.stdout
    assert '{"version": 3, "count": 3}' in done.stdout
    assert "is not damaged" in done.stdout


def test_database_section_runs_as_written(tmp_path: Path) -> None:
    done = run([DATABASE.block()], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["1", "3", "{'lines': 2, 'orders': 2} 1", "[9.5]", "2 append"]
    done = run([DATABASE_CLI.block()], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "created table" in done.stdout and "database version 2" in done.stdout


def test_isolation_example_runs_after_the_database_section(tmp_path: Path) -> None:
    """The ``db.run`` example continues the database section's script."""
    done = run([DATABASE.block(), ISOLATION.block()], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "5.0"


def test_change_feed_section_runs_as_written(tmp_path: Path) -> None:
    """The bronze-to-silver consumer: silver holds bronze's rows, a repeated sync commits
    nothing, and the feed shows the update's pair and the delete (the compaction gives nothing)."""
    done = run([CHANGE_FEED.block()], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "2 2",
        "[{'id': 1, 'amount': 10.0}, {'id': 2, 'amount': 25.0}]",
        "[{'id': 2, 'amount': 20.0, '_change_type': 'update_preimage'}, "
        "{'id': 2, 'amount': 25.0, '_change_type': 'update_postimage'}, "
        "{'id': 3, 'amount': 30.0, '_change_type': 'delete'}]",
    ]


def test_catalog_section_runs_as_written(tmp_path: Path) -> None:
    """pyiceberg writes through the served catalog, castable reads and writes the same table,
    and pyiceberg sees castable's commit under castable's version number."""
    done = run([CATALOG.block()], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "[{'id': 1, 'amount': 10.0}, {'id': 3, 'amount': 30.0}]",
        "['overwrite', 'append', 'create']",
        "1 True",
    ]
