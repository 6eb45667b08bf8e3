"""Reading a version: snapshots, scans, predicates and expressions, bloom filters, page indexes
and the changes between two versions."""
