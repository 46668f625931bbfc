"""Spark settings of the tests' own sessions and `loadgen analyze` runs."""

from __future__ import annotations

# The tests' JVMs (this session's and those of the `loadgen analyze` subprocesses) compile with
# the client compiler only: a test's jobs are short, over a few hundred rows, and the optimising
# compiler's threads spent more CPU than the jobs themselves. On the shared 2-core machine a
# session's start and a few small queries took 28-35 s of wall time with it against 59-119 s
# without. What the jobs compute is the same; only how the JVM compiles them changes.
SPARK_TEST_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
SPARK_TEST_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.extraJavaOptions": SPARK_TEST_JAVA_OPTIONS,
}
# The same, as `loadgen analyze` arguments.
SPARK_TEST_ARGS = [
    "--master",
    "local[2]",
    *(arg for key, value in SPARK_TEST_CONF.items() for arg in ("--conf", f"{key}={value}")),
]
