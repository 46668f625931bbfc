"""The Spark session: small-machine defaults, overridable, and a one-line answer without Java."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "LOCAL_CONF",
    "SMALL_MACHINE_CONF",
    "AnalysisEnvironmentError",
    "find_java",
    "open_session",
]

SMALL_MACHINE_CONF: Final[Mapping[str, str]] = {
    # The analyses' tables are small after the first aggregation: a few shuffle partitions
    # beat Spark's 200 by far on a laptop (each partition is a task with its own overhead).
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    # Enough for the exact percentiles of ~10 million deliveries; a cluster's own settings win
    # through --conf.
    "spark.driver.memory": "2g",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
}
"""Settings for a laptop or a small CI machine; `--conf k=v` overrides any of them."""


LOCAL_CONF: Final[Mapping[str, str]] = {
    # A local Spark talks to itself only: on loopback, whatever the host name resolves to.
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


class AnalysisEnvironmentError(Exception):
    """Spark cannot run here (no pyspark, no Java); the message is one line saying what to do."""


def find_java(environ: Mapping[str, str] | None = None) -> str | None:
    """The `java` Spark would start: `$JAVA_HOME/bin/java`, else `java` on the PATH."""
    environ = os.environ if environ is None else environ
    home = environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        return candidate if os.access(candidate, os.X_OK) else None
    return shutil.which("java", path=environ.get("PATH"))


def open_session(master: str, conf: Mapping[str, str], app_name: str = "loadgen-analyze") -> Any:
    """A SparkSession on `master` with `SMALL_MACHINE_CONF` overridden by `conf`.

    Raises:
        AnalysisEnvironmentError: pyspark is not installed, or Java is missing (the driver
            runs a JVM here even for a cluster's master).
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise AnalysisEnvironmentError(
            "pyspark is not installed: install the spark extra (pip install 'emubroker[spark]')"
        ) from None
    if find_java() is None:  # the driver's JVM runs here, whatever the master
        raise AnalysisEnvironmentError(
            "Java was not found (no java on the PATH, or JAVA_HOME without bin/java): Spark "
            "needs Java 17, e.g. Debian's openjdk-17-jre-headless"
        )
    local = LOCAL_CONF if master.startswith("local") else {}
    if local:
        # Read by the JVM before any setting: without it Spark picks the host's address.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**SMALL_MACHINE_CONF, **local, **conf}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
