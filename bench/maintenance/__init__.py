"""Maintenance: scans before and after compaction, and what gc costs."""
