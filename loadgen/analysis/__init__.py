"""PySpark analysis of a run's traces into a report people read (`loadgen analyze`).

Optional: needs the `spark` extra (pyspark, matplotlib) and Java 17. Nothing else in loadgen
imports this package (an import-linter contract says so); `loadgen analyze` reaches it by name.

- `session`: the Spark session, with settings for small machines, and the Java check;
- `inputs`: a run directory's tables (any Hadoop-compatible URI), their schema versions;
- `jobs`: the named analyses and what each reads; `delivery`, `throttling`, `balancing`,
  `correctness`: the Spark code of each analysis, one output table or more each;
- `headline`: the headline numbers of `summary.json`; `plots`, `report`: the HTML report;
- `__main__`: the command line.
"""
