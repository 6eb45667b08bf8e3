"""Concurrency: concurrent writers, commits over a lossy network, one commit point for several tables."""
