#!/usr/bin/env bash
# Apache Iceberg's Java reader for the tests (Spark 3.5, as EMR 7 runs it): the runtime jar comes
# from PyPI (snowpark-connect-deps-iceberg, installed in the Spark 3.5 venv), which leaves out
# Iceberg's shaded Jackson; pyspark's own Jackson, relocated with Debian's jarjar, supplies it.
# Usage: tools/iceberg_jars.sh OUT_DIR SPARK35_PYTHON. Writes OUT_DIR/iceberg-jackson.jar and links
# OUT_DIR/iceberg-spark-runtime.jar.
set -euo pipefail
out=$1
python=$2
jarjar=/usr/share/java/jarjar.jar
if [ ! -f "$jarjar" ]; then
  apt-get install -y -q libjarjar-java >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q libjarjar-java >/dev/null; } \
    || { echo "tools/iceberg_jars.sh needs Debian's libjarjar-java (apt-get install libjarjar-java)" >&2; exit 1; }
fi
jars=$("$python" -c "import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), 'jars'))")
runtime=$("$python" -c "import os, snowpark_connect_deps_iceberg as m; print(os.path.join(os.path.dirname(m.__file__), 'jars', 'iceberg-spark-runtime-3.5_2.12-1.10.2.jar'))")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/classes" "$out"
for jar in "$jars"/jackson-core-2*.jar "$jars"/jackson-databind-2*.jar "$jars"/jackson-annotations-2*.jar; do
  (cd "$work/classes" && unzip -qo "$jar" -x 'META-INF/*')
done
(cd "$work/classes" && zip -qr "$work/jackson.jar" .)
echo "rule com.fasterxml.jackson.** org.apache.iceberg.shaded.com.fasterxml.jackson.@1" > "$work/rules"
java -jar "$jarjar" process "$work/rules" "$work/jackson.jar" "$out/iceberg-jackson.jar"
ln -sf "$runtime" "$out/iceberg-spark-runtime.jar"
