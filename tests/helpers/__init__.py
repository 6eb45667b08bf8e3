"""Helpers the tests share that are not fixtures (those are in conftest.py); ROOT is the repository."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HELPERS = ROOT / "tests" / "helpers"

SHORT_JVM = {"JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
"""How every JVM the tests start runs (Spark 3.5 and 4, Java Iceberg): the client compiler alone
and the serial collector, which spend less CPU on two cores than the server defaults, whose
optimising compiler and parallel collector pay off only on jobs far longer than a test's. Neither
changes what a program computes. The integration tier sets it in its environment; a test that
gives a process a bare environment passes it on."""
