"""spark-submit entry point of the castable ingest job (see castable.spark.ingest for the options).

EMR 7 runs this file with its own Python 3.9 unless the job is given castable's environment, so
it is kept to Python 3.9 syntax (`make lint` checks) and says what is missing instead of failing
on an import.
"""

import sys

MISSING = (
    "castable's Spark jobs run on the Python of castable's EMR environment, not on EMR's own "
    "Python {found}: give the job spark.archives=<EmrEnvironmentArchive>#environment and make "
    "./environment/bin/python its Python, on EMR Serverless with "
    "spark.emr-serverless.driverEnv.PYSPARK_PYTHON and spark.executorEnv.PYSPARK_PYTHON, on EMR "
    "on EC2 (YARN) with spark.yarn.appMasterEnv.PYSPARK_PYTHON and spark.executorEnv.PYSPARK_PYTHON "
    "(the Spark application the stack deploys sets them when castable.json names an "
    "emr_environment; docs/guides/spark.md: Running on EMR)"
)

if __name__ == "__main__":
    if sys.version_info < (3, 11):
        sys.exit(MISSING.format(found=sys.version.split()[0]))
    from castable.spark.ingest import main

    main()
