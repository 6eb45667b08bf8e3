"""Run in the Spark 3.5 side venv (.venv-spark35): Spark with Apache Iceberg 1.10.2's Spark
runtime and SQL extensions, its catalog ``rest`` an Iceberg REST catalog, running SQL statements.

Usage: python spark_catalog.py <jars dir> <catalog uri>
Reads one statement a line from stdin (each a JSON string) and prints one JSON line for each,
as soon as it has run: {"rows": [[...], ...]} or {"error": "<exception>: <message>"}; one JVM for
them all. The catalog class is castable.rest.JdkRESTCatalog (tests/helpers/java, built into
<jars dir>/castable-iceberg-rest.jar by tools/iceberg_jars.sh): Iceberg's RESTCatalog talking HTTP
through the JDK, since the PyPI runtime jar leaves out the shaded Apache HttpClient 5 (EMR's has
it). Files go through Spark's default HadoopFileIO. No authorization, or with
``CASTABLE_CATALOG_CREDENTIAL=id:secret`` set, OAuth2 client credentials as Iceberg's docs
configure them (``credential`` and ``oauth2-server-uri``).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from pyspark.sql import SparkSession


def main() -> None:
    jars, uri = sys.argv[1:]
    names = ["iceberg-spark-runtime", "iceberg-spark-extensions", "iceberg-jackson", "iceberg-httpcore5"]
    catalog = "spark.sql.catalog.rest"
    credential = os.environ.get("CASTABLE_CATALOG_CREDENTIAL")
    auth = {f"{catalog}.rest.auth.type": "none"}
    if credential:
        auth = {
            f"{catalog}.rest.auth.type": "oauth2",
            f"{catalog}.credential": credential,
            f"{catalog}.oauth2-server-uri": f"{uri}/v1/oauth/tokens",
        }
    builder = SparkSession.builder.master("local[2]")
    for key, value in auth.items():
        builder = builder.config(key, value)
    spark = (
        builder.config("spark.jars", ",".join(f"{jars}/{name}.jar" for name in [*names, "castable-iceberg-rest"]))
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config(catalog, "org.apache.iceberg.spark.SparkCatalog")
        .config(f"{catalog}.catalog-impl", "castable.rest.JdkRESTCatalog")
        .config(f"{catalog}.uri", uri)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    for line in sys.stdin:
        answer: dict[str, Any]
        try:
            answer = {"rows": [list(row) for row in spark.sql(json.loads(line)).collect()]}
        except Exception as e:  # any failure is the statement's answer (a Java one: its first lines)
            answer = {"error": f"{type(e).__name__}: " + "\n".join(str(e).strip().splitlines()[:5])}
        print(json.dumps(answer, default=str), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
