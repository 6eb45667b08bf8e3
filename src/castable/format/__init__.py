"""The on-storage format: manifests, segments, file lists, entries, tombstones, Parquet footers,
schemas and their evolution, statistics, layout and table properties (docs/format.md)."""
