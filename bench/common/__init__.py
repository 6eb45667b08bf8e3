"""What the benchmarks of every theme share: the synthetic event table, timing, the reports,
and S3 with its latency (moto behind a shaping proxy)."""
