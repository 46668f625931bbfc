"""Spark settings of the tests' own sessions and `loadgen analyze` runs."""

from __future__ import annotations

# The tests' JVMs (this session's and those of the `loadgen analyze` subprocesses) compile with
# the client compiler only: a test's jobs are short, over a few hundred rows, and the optimising
# compiler's threads spent more CPU than the jobs themselves. On the shared 2-core machine a
# session's start and a few small queries took 28-35 s of wall time with it against 59-119 s
# without. What the jobs compute is the same; only how the JVM compiles them changes.
SPARK_TEST_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
# Nor do the tests' queries generate Java code: over a few hundred rows, compiling each plan's
# generated classes cost more than running it (an analysis's ~40 small jobs spent a third less
# of the JVM's CPU interpreted, 10-15 s instead of 21-24 s warm, measured beside the suite's
# other work on the shared machine). Interpreted evaluation is Spark's own fallback and its tests
# run both modes; the results are the same, and `loadgen analyze` itself keeps code generation.
SPARK_TEST_INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
SPARK_TEST_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.extraJavaOptions": SPARK_TEST_JAVA_OPTIONS,
    **SPARK_TEST_INTERPRETED,
}
# The same, as `loadgen analyze` arguments.
SPARK_TEST_ARGS = [
    "--master",
    "local[2]",
    *(arg for key, value in SPARK_TEST_CONF.items() for arg in ("--conf", f"{key}={value}")),
]
