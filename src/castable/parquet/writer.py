"""Writing data files: stream Arrow batches into Parquet files of a target size (docs/format.md section 5).

Row groups are cut at ``write.row-group-size-bytes`` of Arrow data and files at
``write.target-file-size-bytes`` of Parquet bytes, so memory stays bounded by about one row
group whatever the input size. A finished file is published (fsync and rename locally, upload
on S3) on a background thread while the next one is encoded: at most two files are staged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from functools import partial

import pyarrow as pa
import pyarrow.parquet as pq

from castable.format.evolution import parquet_schema, to_stored
from castable.format.layout import new_data_key
from castable.format.manifest import DataFile
from castable.format.partitioning import UNPARTITIONED, PartitionSpec, split
from castable.format.properties import TableProperties
from castable.format.sorting import UNSORTED, SortOrder
from castable.format.stats import file_rows, file_stats, stats_to_json
from castable.store import ObjectInfo, ObjectStore, StagedObject
from castable.store.uploads import Deferred


def data_file_from_metadata(
    info: ObjectInfo, metadata: pq.FileMetaData, schema: pa.Schema, where: Mapping[str, str | None] | None = None
) -> DataFile:
    """The manifest entry of an uploaded Parquet file, with statistics from its footer (its
    columns found by ``where``, as :func:`castable.format.evolution.resolve` gives, or by name)."""
    return DataFile(
        path=info.key,
        size=info.size,
        etag=info.etag,
        rows=file_rows(metadata),
        row_groups=metadata.num_row_groups,
        stats=stats_to_json(file_stats(metadata, schema, where)),
    )


def _row_groups(batches: Iterable[pa.RecordBatch], target_bytes: int) -> Iterator[pa.Table]:
    """Regroup a stream of batches into tables of about ``target_bytes`` each."""
    pending: list[pa.RecordBatch] = []
    pending_bytes = 0
    for batch in batches:
        while batch.num_rows:
            room = target_bytes - pending_bytes
            if batch.nbytes <= room:
                take = batch
            else:
                per_row = max(batch.nbytes / batch.num_rows, 1)
                take = batch.slice(0, max(1, int(room / per_row)))
            pending.append(take)
            pending_bytes += take.nbytes
            batch = batch.slice(take.num_rows)
            if pending_bytes >= target_bytes or batch.num_rows:
                yield pa.Table.from_batches(pending)
                pending, pending_bytes = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


def write_data_files(
    store: ObjectStore,
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema,
    props: TableProperties,
    *,
    on_rows: Callable[[int], None] | None = None,
    int96: bool = False,
    uploads: Deferred | None = None,
    spec: PartitionSpec = UNPARTITIONED,
    order: SortOrder = UNSORTED,
    folder: str = "",
) -> list[DataFile]:
    """Write ``batches`` (already conforming to ``schema``) as new data files; return their entries.
    If ``batches`` raise (a page that does not decode, a value that does not convert), the files
    already written are deleted again: nothing refers to them.

    ``int96`` stores timestamps as INT96, for the rewrite of a file that stored them so (Spark's
    and Impala's default): Spark reads no nanosecond INT64 timestamps, and reads INT64 ones
    without a zone as timestamps without a time zone, so another layout would change what it reads.

    With a write's ``uploads`` the last file uploads while the write goes on to commit. With a
    partition ``spec`` (one with fields), the rows are cut by partition, each partition's rows go
    to files of their own, and each entry records the spec and its partition values. With a sort
    ``order`` (one with fields), each file's rows are written in that order, and each entry records it.
    The files of a partition lie in its path under ``data/`` (``PartitionSpec.path``); without a
    spec, in ``folder`` (the partition path of the file that rows rewritten in place come from)."""
    w = _Writing(store, schema, props, [], on_rows, int96)
    try:
        if not spec.fields and not order.fields:
            _write(w, _row_groups(batches, props.row_group_size), uploads, folder)
        else:
            _write_laid_out(w, batches, uploads, spec, order, folder)
    except BaseException:
        with contextlib.suppress(Exception):  # what cannot be deleted now is an orphan gc removes
            store.delete_many([f.path for f in w.files])
        raise
    return w.files


@dataclass(frozen=True)
class _Writing:
    """What the files of one write share: the store, the rows' schema and the table's settings,
    the entries written so far, who hears of rows written, and whether timestamps are INT96."""

    store: ObjectStore
    schema: pa.Schema
    props: TableProperties
    files: list[DataFile]
    on_rows: Callable[[int], None] | None
    int96: bool


def _write(w: _Writing, groups: Iterator[pa.Table], uploads: Deferred | None, folder: str) -> None:
    """Write ``groups`` as files of about ``props.target_file_size``, each published (and added
    to ``w.files``) while the next one is written; the last one through ``uploads``, if given.
    The files' keys lie in ``folder`` under ``data/`` (a partition's path)."""
    store, schema, props, files, on_rows, int96 = w.store, w.schema, w.props, w.files, w.on_rows, w.int96
    group = next(groups, None)
    stored = parquet_schema(schema)
    publishing: Future[None] | None = None
    with ThreadPoolExecutor(1, thread_name_prefix="castable-publish") as pool:
        try:
            while group is not None:
                stage = store.staged_write(new_data_key(folder=folder))
                staged = stage.__enter__()
                try:
                    writer = pq.ParquetWriter(
                        staged.path,
                        stored,
                        compression=props.compression,
                        compression_level=props.compression_level,
                        use_deprecated_int96_timestamps=int96,
                        write_page_index=True,
                        bloom_filter_options=_bloom_filters(props, schema, group.num_rows),
                    )
                    with writer:
                        while group is not None:
                            writer.write_table(to_stored(group, stored), row_group_size=max(group.num_rows, 1))
                            if on_rows:
                                on_rows(group.num_rows)
                            group = next(groups, None)
                            if staged.path.stat().st_size >= props.target_file_size:
                                break
                    if publishing is not None:
                        publishing.result()  # the previous file is out before this one is handed over
                except BaseException as e:
                    stage.__exit__(type(e), e, e.__traceback__)
                    raise
                if group is None and uploads is not None:  # the last file
                    staged.put = partial(uploads.put, store)
                publishing = pool.submit(_publish, stage, staged, writer.writer.metadata, schema, files)
        finally:
            if publishing is not None:
                publishing.result()


def _write_laid_out(
    w: _Writing,
    batches: Iterable[pa.RecordBatch],
    uploads: Deferred | None,
    spec: PartitionSpec,
    order: SortOrder,
    folder: str,
) -> None:
    """:func:`_write` of each partition's rows in turn, sorted by ``order``, each new entry given
    the spec, the partition's values and the order. The rows are cut and sorted a chunk at a time,
    a chunk being about ``write.target-file-size-bytes`` of Arrow data, so memory stays bounded
    whatever the input: a write larger than that has a file per partition per chunk, each sorted."""
    files = w.files
    chunks = _chunks(batches, w.props.target_file_size)
    chunk = next(chunks, None)
    while chunk is not None:
        following = next(chunks, None)  # read ahead: the last file of the last chunk goes through ``uploads``
        groups = split(pa.Table.from_batches(chunk), spec, w.schema)
        for i, (values, rows) in enumerate(groups):
            start = len(files)
            last = uploads if following is None and i == len(groups) - 1 else None
            sorted_rows = order.sort(rows, w.schema).to_batches()
            inside = spec.path(values) if spec.fields else folder
            _write(w, _row_groups(sorted_rows, w.props.row_group_size), last, inside)
            files[start:] = [
                replace(f, spec_id=spec.spec_id, partition=values, sort_order_id=order.order_id) for f in files[start:]
            ]
        chunk = following


def _chunks(batches: Iterable[pa.RecordBatch], limit: int) -> Iterator[list[pa.RecordBatch]]:
    """``batches`` in runs of about ``limit`` bytes of Arrow data (each run at least one batch)."""
    run: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        run.append(batch)
        size += batch.nbytes
        if size >= limit:
            yield run
            run, size = [], 0
    if run:
        yield run


def _bloom_filters(props: TableProperties, schema: pa.Schema, rows: int) -> dict[str, dict[str, int]] | None:
    """The bloom filters ``write.parquet.bloom-filter-columns`` asks for, sized for row groups
    like the first (their distinct values at most its rows: a 1% false-positive rate or so)."""
    wanted = [c for c in props.bloom_filter_columns if c in schema.names]
    return {c: {"ndv": max(rows, 1)} for c in wanted} or None


def _publish(
    stage: AbstractContextManager[StagedObject],
    staged: StagedObject,
    metadata: pq.FileMetaData,
    schema: pa.Schema,
    files: list[DataFile],
) -> None:
    """Publish one finished file (leaving its staged block) and record its manifest entry."""
    stage.__exit__(None, None, None)
    assert staged.info is not None
    files.append(data_file_from_metadata(staged.info, metadata, schema))
