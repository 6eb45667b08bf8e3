"""Parquet files with an intact footer and a page that does not decode, one per way pages break
(issue: files the world writes)."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

DAMAGES = {
    "snappy page": "Corrupt snappy compressed data",
    "zstd page": "ZSTD decompression failed",
    "gzip page": "GZipCodec failed",
    "page header": "Couldn't deserialize thrift",
    "dictionary index": "Index not in dictionary bounds",
    "page checksum": "CRC checksum verification failed",
}
"""Each kind of damage, and what pyarrow says reading the 10,000-row files of ``rows``."""


def damaged(rows: pa.Table, kind: str) -> bytes:
    """``rows`` as a Parquet file whose second column's first chunk is damaged as ``kind`` says."""
    codec = kind.split()[0] if kind.endswith(" page") else "none"
    out = io.BytesIO()
    pq.write_table(
        rows,
        out,
        compression=codec,
        use_dictionary=kind == "dictionary index",
        write_page_checksum=kind == "page checksum",
    )
    data = bytearray(out.getvalue())
    chunk = pq.read_metadata(pa.BufferReader(bytes(data))).row_group(0).column(1)
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    end = start + chunk.total_compressed_size
    if kind == "page header":
        data[start : start + 4] = b"\xff" * 4
    elif kind == "dictionary index":  # the data page's run of indices, past the dictionary
        data[end - 200 : end - 100] = b"\xff" * 100
    elif kind == "page checksum":  # one bit of a value: it decodes, but not to what was written
        data[(start + end) // 2] ^= 1
    else:
        middle = start + chunk.total_compressed_size // 2
        data[middle : middle + 16] = bytes(16)
    return bytes(data)
