"""Parquet at the byte level: the footer's Thrift encoding, reading and rebuilding footers, the
float ordering of statistics, and the writer that streams Arrow batches into data files."""
