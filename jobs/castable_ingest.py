"""spark-submit entry point of the castable ingest job (see castable.spark.ingest for the options)."""

from castable.spark.ingest import main

if __name__ == "__main__":
    main()
