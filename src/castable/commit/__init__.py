"""The commit protocol: the pointer and its compare-and-swap, fair turns, conflict checks, the
database log, and the handle operations commit through (docs/format.md section 7)."""
