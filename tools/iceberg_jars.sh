#!/usr/bin/env bash
# Apache Iceberg's Java library for the tests (Spark 3.5, as EMR 7 runs it): the runtime jar comes
# from PyPI (snowpark-connect-deps-iceberg, installed in the Spark 3.5 venv), which leaves out
# Iceberg's shaded Jackson and Apache HttpComponents 5. pyspark's own Jackson and Debian's
# libhttpcore5-java, relocated with Debian's jarjar, supply Jackson and HttpCore 5 (which
# rest.Endpoint and HTTPRequest.requestUri use). HttpClient 5 stays missing: the tests' REST
# catalog class (tests/helpers/java, compiled here) talks HTTP through the JDK instead.
# Usage: tools/iceberg_jars.sh OUT_DIR SPARK35_PYTHON. Writes OUT_DIR/iceberg-jackson.jar,
# OUT_DIR/iceberg-httpcore5.jar and OUT_DIR/castable-iceberg-rest.jar, and links
# OUT_DIR/iceberg-spark-runtime.jar and OUT_DIR/iceberg-spark-extensions.jar. A jar newer than this
# script (and, for the compiled one, its sources and the runtime jar) is kept as it is.
set -euo pipefail
out=$1
python=$2
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
sources=$(dirname "$self")/../tests/helpers/java
jarjar=/usr/share/java/jarjar.jar
fresh() { # fresh JAR INPUT...: JAR exists and no INPUT (nor this script) is newer than it
  local jar=$1
  shift
  [ -f "$jar" ] && [ -z "$(find -L "$self" "$@" -newer "$jar" -print -quit)" ]
}
mkdir -p "$out"
jars=$("$python" -c "import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), 'jars'))")
iceberg=$("$python" -c "import os, snowpark_connect_deps_iceberg as m; print(os.path.join(os.path.dirname(m.__file__), 'jars'))")
ln -sfn "$iceberg/iceberg-spark-runtime-3.5_2.12-1.10.2.jar" "$out/iceberg-spark-runtime.jar"
ln -sfn "$iceberg/iceberg-spark-extensions-3.5_2.12-1.10.2.jar" "$out/iceberg-spark-extensions.jar"
if fresh "$out/iceberg-jackson.jar" && fresh "$out/iceberg-httpcore5.jar" \
  && fresh "$out/castable-iceberg-rest.jar" "$sources" "$out/iceberg-spark-runtime.jar"; then
  touch "$out/iceberg-jackson.jar" "$out/iceberg-httpcore5.jar" "$out/castable-iceberg-rest.jar"
  exit 0
fi
if [ ! -f "$jarjar" ]; then
  apt-get install -y -q libjarjar-java >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q libjarjar-java >/dev/null; } \
    || { echo "tools/iceberg_jars.sh needs Debian's libjarjar-java (apt-get install libjarjar-java)" >&2; exit 1; }
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! fresh "$out/iceberg-jackson.jar"; then
  mkdir -p "$work/jackson"
  for jar in "$jars"/jackson-core-2*.jar "$jars"/jackson-databind-2*.jar "$jars"/jackson-annotations-2*.jar; do
    (cd "$work/jackson" && unzip -qo "$jar" -x 'META-INF/*')
  done
  (cd "$work/jackson" && zip -qr "$work/jackson.jar" .)
  echo "rule com.fasterxml.jackson.** org.apache.iceberg.shaded.com.fasterxml.jackson.@1" > "$work/jackson.rules"
  java -jar "$jarjar" process "$work/jackson.rules" "$work/jackson.jar" "$out/iceberg-jackson.jar"
fi

# Debian bookworm's libhttpcore5-java (5.2.1), downloaded, not installed.
if ! fresh "$out/iceberg-httpcore5.jar"; then
  (cd "$work" && { apt-get download -q libhttpcore5-java >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get download -q libhttpcore5-java >/dev/null; }; } \
    && dpkg-deb -x libhttpcore5-java_*.deb httpcore5) \
    || { echo "tools/iceberg_jars.sh could not download Debian's libhttpcore5-java" >&2; exit 1; }
  echo "rule org.apache.hc.** org.apache.iceberg.shaded.org.apache.hc.@1" > "$work/httpcore5.rules"
  java -jar "$jarjar" process "$work/httpcore5.rules" "$work/httpcore5/usr/share/java/httpcore5.jar" "$out/iceberg-httpcore5.jar"
fi

if ! fresh "$out/castable-iceberg-rest.jar" "$sources" "$out/iceberg-spark-runtime.jar"; then
  mkdir -p "$work/rest"
  find "$sources" -name '*.java' > "$work/sources.txt"
  javac --release 11 -nowarn -cp "$out/iceberg-spark-runtime.jar:$out/iceberg-jackson.jar" -d "$work/rest" "@$work/sources.txt"
  jar cf "$out/castable-iceberg-rest.jar" -C "$work/rest" .
fi
touch "$out/iceberg-jackson.jar" "$out/iceberg-httpcore5.jar" "$out/castable-iceberg-rest.jar"
