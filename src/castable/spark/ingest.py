"""The Spark ingest job: read a source, write castable data files on the executors, commit once.

Runs on Spark 3.5 (EMR 7.x) and 4.x: it uses ``DataFrame.mapInArrow`` only, not the Python
Data Source API. Executors write Parquet files of the table's target sizes under ``data/``
and return their manifest entries (path, size, ETag, rows, statistics); the driver commits
them in one commit, through the commit Lambda (the entries left as one file list object under
the table's ``data/_file_lists/``, so a job of any number of files commits, checked by listing
their directories) or (``--direct``) the library. The ``commit_id``
makes a re-run commit nothing twice; files of a failed run are orphans that ``gc`` collects.

``--mode`` says what the rows do, as ``Table.add_files``: ``append`` (the default), ``upsert``
(replace the live rows with their primary keys) or ``overwrite`` (replace the whole table, or
with ``--replace-where`` exactly the rows matching that predicate; every new row must match it).

    spark-submit jobs/castable_ingest.py --source s3://landing/2026/11/22/ --format parquet \\
        --table s3://tables/events --commit-id events-2026-11-22 --commit-function castable-commit \\
        --mode overwrite --replace-where "day = DATE '2026-11-22'"
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

import castable
from castable.commit.handle import SchemaMode
from castable.errors import InvalidInputError, SchemaMismatchError
from castable.format.manifest import DataFile
from castable.ops.register import write_file_list
from castable.ops.writes import ADD_MODES, AddMode
from castable.spark.files import TableTarget, WriteMode, added_columns
from castable.spark.remote import invoke_add_columns, invoke_commit
from castable.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("castable.spark.ingest")
FUNCTION_ENV = "CASTABLE_COMMIT_FUNCTION"


@dataclass(frozen=True)
class IngestResult:
    """What a run committed (or found already committed under its ``commit_id``)."""

    table: str
    commit_id: str
    mode: str
    """``append``, ``upsert`` or ``overwrite``: the operation of ``version``."""
    version: int
    files: int
    rows: int
    bytes: int
    already_committed: bool


def write_files(df: DataFrame, target: TableTarget) -> list[DataFile]:
    """Write ``df`` as data files from the executors; return their entries, nothing committed."""
    extra = sorted(set(df.columns) - set(target.schema.names))
    missing = [] if target.fill else [n for n in target.schema.names if n not in df.columns]
    if extra or missing:
        raise SchemaMismatchError(f"the source does not match the table schema: missing {missing}, unknown {extra}")

    def write_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        entries = [json.dumps(f.to_json()) for f in target.write(batches)]
        yield pa.RecordBatch.from_pydict({"file": entries}, schema=pa.schema([("file", pa.string())]))

    columns = [n for n in target.schema.names if n in df.columns]
    rows = df.select(*columns).mapInArrow(write_partition, "file string").collect()
    return [DataFile.from_json(json.loads(r["file"])) for r in rows]


def ingest(
    df: DataFrame,
    table_uri: str,
    commit_id: str,
    *,
    mode: AddMode = "append",
    where: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    commit_function: str | None = None,
    lambda_client: Any = None,
    schema_mode: SchemaMode = "strict",
) -> IngestResult:
    """Append, upsert or overwrite (``where``: the rows matching it) ``df`` in one commit, as
    ``Table.add_files``: through ``commit_function`` if given, else directly.

    With ``schema_mode="merge"`` (Spark's ``mergeSchema``) the columns ``df`` brings are added
    to the table first, in a commit of their own (``<commit_id>-columns``), and the table's
    nullable columns ``df`` lacks are written as NULLs; ``"strict"`` refuses both."""
    if schema_mode not in ("strict", "merge"):
        raise InvalidInputError(f"schema_mode must be 'strict' or 'merge', not {schema_mode!r}")
    table = castable.open_table(table_uri, storage_options=storage_options)
    write = WriteMode(mode, where)
    write.check(table)
    done = table.manifest.recent_commits.get(commit_id)
    if done is not None:
        log.info("commit_id %s is already version %d: nothing to do", commit_id, done)
        commit = table.manifest_at(done).commit
        summary = commit.summary
        return IngestResult(
            table.uri,
            commit_id,
            commit.operation,
            done,
            int(summary.get("files_added", 0)),
            int(summary.get("rows_added", 0)),
            int(summary.get("bytes_added", 0)),
            True,
        )
    options = storage_options or {}
    region = options.get("region") or options.get("region_name")
    if schema_mode == "merge":
        table = _merged(df, table, f"{commit_id}-columns", commit_function, lambda_client, region)
    files = write_files(df, TableTarget.of(table, storage_options, fill=schema_mode == "merge"))
    rows, size = sum(f.rows for f in files), sum(f.size for f in files)
    if not files:
        raise castable.EmptyWriteError("the source has no rows; nothing was committed")
    log.info("wrote %d files, %d rows, %d bytes; committing %s as %s", len(files), rows, size, commit_id, mode)
    if commit_function:  # the entries travel as an object: any number, statistics from the executors
        listed = write_file_list(table.store, commit_id, files, table.schema)
        response = invoke_commit(
            commit_function,
            table.uri,
            None,
            commit_id,
            file_list=listed,
            mode=mode,
            where=where,
            client=lambda_client,
            region=region,
        )
        version = int(response["version"])
    else:
        version = write.commit(table, files, commit_id).version
    ours = {f.path for f in files}
    added = {f.path for f in table.manifest_at(version).data_files if f.added_version == version}
    return IngestResult(table.uri, commit_id, mode, version, len(files), rows, size, added != ours)


def _merged(
    df: DataFrame, table: Table, commit_id: str, commit_function: str | None, client: Any, region: str | None
) -> Table:
    """The table with the columns ``df`` brings (``mergeSchema``), added in one commit of their own."""
    new = added_columns(df.schema, table.schema)
    if new and commit_function is not None:
        invoke_add_columns(commit_function, table.uri, new, commit_id, client=client, region=region)
    elif new:
        table.add_columns(new, commit_id=commit_id)
    return table.refresh()


def _pairs(values: Sequence[str], what: str) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise InvalidInputError(f"{what} must look like key=value, not {value!r}")
        out[key] = val
    return out


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="castable_ingest", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--source", required=True, help="input path(s) Spark can read, comma separated")
    parser.add_argument("--format", default="parquet", help="Spark reader format (parquet, csv, json, orc)")
    parser.add_argument("--read-option", action="append", default=[], metavar="K=V", help="Spark reader option")
    parser.add_argument("--table", required=True, help="castable table URI (s3://bucket/prefix)")
    parser.add_argument("--commit-id", required=True, help="idempotency key: a re-run with it commits nothing")
    parser.add_argument("--mode", choices=ADD_MODES, default="append", help="what the rows do (default: append)")
    parser.add_argument(
        "--replace-where", metavar="PREDICATE", help="with --mode overwrite: replace only the rows matching it"
    )
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--commit-function", help=f"commit Lambda name or ARN (default: ${FUNCTION_ENV})")
    how.add_argument("--direct", action="store_true", help="commit with the library instead of the Lambda")
    parser.add_argument("--storage-option", action="append", default=[], metavar="K=V", help="castable option")
    parser.add_argument("--partitions", type=int, help="repartition the input first (fewer, larger files)")
    parser.add_argument(
        "--schema-mode",
        choices=["strict", "merge"],
        default="strict",
        help="merge: add the columns the source brings (mergeSchema); strict (default): refuse them",
    )
    args = parser.parse_args(argv)
    if args.replace_where is not None and args.mode != "overwrite":
        parser.error("--replace-where applies to --mode overwrite only")
    if not args.direct:
        args.commit_function = args.commit_function or os.environ.get(FUNCTION_ENV)
        if not args.commit_function:
            parser.error(f"give --commit-function, set ${FUNCTION_ENV}, or commit with --direct")
    return args


def main(argv: Sequence[str] | None = None, spark: SparkSession | None = None) -> IngestResult:
    """The job's entry point: parse arguments, ingest, print the result as one JSON line."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.appName(f"castable-ingest-{args.commit_id}").getOrCreate()
    reader = spark.read.format(args.format).options(**_pairs(args.read_option, "--read-option"))
    df = reader.load(args.source.split(","))
    if args.partitions:
        df = df.repartition(args.partitions)
    result = ingest(
        df,
        args.table,
        args.commit_id,
        mode=args.mode,
        where=args.replace_where,
        storage_options=_pairs(args.storage_option, "--storage-option") or None,
        commit_function=None if args.direct else args.commit_function,
        schema_mode=args.schema_mode,
    )
    print(json.dumps(asdict(result)), flush=True)
    return result
