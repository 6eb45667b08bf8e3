"""Keeping a table healthy and lawful: compaction, expiry, garbage collection, erasure by
row-group splicing, damage checks and the version history."""
