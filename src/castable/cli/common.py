"""What every castable command shares: its common options, its output, storage options, and error handling."""

from __future__ import annotations

import json
import signal
import sys
import uuid
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from types import FrameType
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

import castable
from castable.errors import CastableError, InvalidInputError

# Printed values (types such as ``timestamp[us, tz=UTC]``, predicates, paths) are never read as
# rich markup, and lines are never hard-wrapped, so piped JSON stays one parseable line. Piped
# output is as wide as its content: a table is never cut to fit a terminal that is not there.
_PIPED_WIDTH = 1_000_000
console = Console(markup=False, highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else _PIPED_WIDTH)
err_console = Console(stderr=True, markup=False, highlight=False, soft_wrap=True)


def commands(**settings: Any) -> typer.Typer:
    """A group of commands, its help in plain text: fast to print (rich's help imports more than
    a command's own work takes), and what it says is printed as written (``timestamp[us]``, no markup)."""
    return typer.Typer(rich_markup_mode=None, **settings)


StorageOption = Annotated[
    list[str] | None,
    typer.Option("--storage-option", "-o", metavar="KEY=VALUE", help="For S3: endpoint_url, region, ... (repeatable)."),
]
CommitId = Annotated[
    str | None, typer.Option(metavar="ID", help="Idempotency key: a repeated id commits nothing twice.")
]
AsJson = Annotated[bool, typer.Option("--json", help="Print one JSON document (for scripts) instead of text.")]
PrimaryKey = Annotated[
    str | None, typer.Option("--primary-key", "-k", metavar="COLUMN", help="The primary key column.")
]
PartitionBy = Annotated[
    list[str] | None,
    typer.Option(
        "--partition-by",
        metavar="FIELD",
        help="Partition by a transform of a column: day(ts), bucket(16, id), truncate(4, name), region (repeatable).",
    ),
]
SortBy = Annotated[
    list[str] | None,
    typer.Option(
        "--sort-by",
        metavar="FIELD",
        help="Sort each file's rows by a column or a transform of one: ts, 'id DESC NULLS LAST' (repeatable).",
    ),
]
Properties = Annotated[
    list[str] | None, typer.Option("--property", "-p", metavar="KEY=VALUE", help="A table property (repeatable).")
]
Count = Annotated[
    bool,
    typer.Option(
        "--count", help="Count the rows a delete or upsert by key removed (reads the versions before and after)."
    ),
]


def dumps(doc: object) -> str:
    """``doc`` as JSON, values JSON has no type for as ``castable scan --output x.jsonl`` writes them."""
    from castable.inputs.sources import json_value

    return json.dumps(doc, default=json_value)


def emit(as_json: bool, text: str, doc: Mapping[str, Any]) -> None:
    """One line for people, or one JSON document for scripts."""
    console.print(dumps(doc) if as_json else text)


def spinner(what: str, quiet: bool = False) -> AbstractContextManager[object]:
    """A spinner on a terminal; nothing when stderr is piped, or ``quiet`` (``--json``)."""
    return err_console.status(what) if err_console.is_terminal and not quiet else nullcontext()


def progress_bar(quiet: bool = False) -> Progress:
    """A progress bar (rows done, of how many when known, and the time taken) on a terminal;
    nothing when stderr is piped, or ``quiet`` (``--json``)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=quiet or not err_console.is_terminal,
    )


def parse_options(pairs: list[str] | None) -> dict[str, str] | None:
    """``KEY=VALUE`` options (storage options, table properties) as a dict; None when there are none."""
    if not pairs:
        return None
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise InvalidInputError(f"storage option {pair!r} is not KEY=VALUE")
        out[key] = value
    return out


class _Interrupted(BaseException):
    """Ctrl-C, raised in place of KeyboardInterrupt, which typer turns into a silent exit 130."""


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise _Interrupted()


@dataclass
class _Commit:
    """The commit this command makes: the table, the id it commits under, its version once known."""

    table: castable.Table
    commit_id: str
    version: int | None = None

    def outcome(self) -> str:
        """What became of it, for a Ctrl-C: committed as version N (from this command, or from
        the table's log), or not in the log, with the id to re-run it with (at most once)."""
        version = self.version
        if version is None:
            try:
                version = self.table.refresh().committed_version(self.commit_id)
            except (Exception, KeyboardInterrupt, _Interrupted):  # the log cannot be read: say so below
                return (
                    f"interrupted; whether it committed is unknown: re-run with --commit-id {self.commit_id}, "
                    "which commits it at most once"
                )
        if version is not None:
            return f"interrupted: committed as version {version} (commit id {self.commit_id})"
        return (
            f"interrupted: not committed (commit id {self.commit_id} is not in the table's log; if Ctrl-C fell "
            f"in its final write it may still land): re-run with --commit-id {self.commit_id}, "
            "which commits it at most once"
        )


class _Commits:
    """The commit of the command running, if it makes one (commands that only read make none)."""

    current: _Commit | None = None


def start_commit(table: castable.Table, commit_id: str | None, as_json: bool) -> str | None:
    """The id this command's write commits under: the one given, or a new one, so that Ctrl-C
    can say what became of it. ``None`` when the id given was committed before: that is
    reported, and the write would commit nothing."""
    if commit_id is not None and (done := table.committed_version(commit_id)) is not None:  # input left unread
        try:
            earlier = castable.WriteResult.of(table.manifest_at(done), retried=True)
        except castable.VersionNotFoundError:  # expired since: what it did is no longer known
            earlier = castable.WriteResult.unknown(done, commit_id, "write")
        report_commit(earlier, as_json)
        return None
    _Commits.current = _Commit(table, commit_id or f"cli-{uuid.uuid4()}")
    return _Commits.current.commit_id


def committed(version: int) -> None:
    """The command's commit landed as ``version``."""
    if _Commits.current is not None:
        _Commits.current.version = version


def run(app: typer.Typer) -> None:
    """Run ``app``, turning castable errors into one line and exit status 1, and Ctrl-C into
    exit status 130 and, for a command that commits, one line saying what became of its commit."""
    signal.signal(signal.SIGINT, _interrupt)
    _Commits.current = None
    try:
        app()
    except CastableError as e:
        err_console.print(Text.assemble(("error:", "red"), f" {e}"))
        raise SystemExit(1) from None
    except (_Interrupted, KeyboardInterrupt):
        if _Commits.current is not None:
            err_console.print(_Commits.current.outcome())
        raise SystemExit(130) from None
    finally:
        _Commits.current = None


def report_commit(result: castable.WriteResult, as_json: bool) -> None:
    """What a write did, in words for people or as a JSON document (``WriteResult.to_dict``)."""
    if result.committed:
        committed(result.version)
    emit(as_json, str(result), result.to_dict())


def open_table(uri: str, options: list[str] | None) -> castable.Table:
    return castable.open_table(uri, storage_options=parse_options(options))
