"""castable against Delta Lake, Iceberg and plain pyarrow Parquet, side by side: ``cd bench && python -m compare``."""
