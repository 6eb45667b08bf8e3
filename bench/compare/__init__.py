"""castable against Delta Lake, Iceberg and plain pyarrow Parquet, side by side: ``python -m bench.compare``."""
