"""Reads and writes: deletes, scans and appends, reads on shaped S3, many small appends, erasure,
add_files and the change feed."""
