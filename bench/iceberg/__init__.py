"""Iceberg: what publication costs a commit, Iceberg readers of the published metadata, the REST catalog."""
