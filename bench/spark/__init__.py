"""Spark: the ingest job, the data source and read planning, in local mode."""
