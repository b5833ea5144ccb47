"""The benchmark workloads by letter (``python -m bench.run --workloads a,d``); BENCHMARKS.md
(``bench.report``) shows the workloads listed here, whatever else results.json holds."""

WORKLOADS = {
    "a": {"name": "catchup-2m-1kb-12p", "kind": "catchup", "records": 2_000_000, "value_bytes": 1024, "partitions": 12},
    "b": {"name": "catchup-2m-100b-12p", "kind": "catchup", "records": 2_000_000, "value_bytes": 100, "partitions": 12},
    "c": {"name": "catchup-2m-1kb-48p", "kind": "catchup", "records": 2_000_000, "value_bytes": 1024, "partitions": 48},
    "d": {"name": "steady-1kb-12p", "kind": "steady", "value_bytes": 1024, "partitions": 12, "seconds": 180,
          "warm_up": 60.0, "load": 0.5},
    # the steady workload at several loads, each a share of this run's raw rate (workload a): the
    # latency a system shows where most DR flows run, far below the machine's ceiling
    "e": {"name": "steady-curve-1kb-12p", "kind": "curve", "value_bytes": 1024, "partitions": 12, "seconds": 90,
          "warm_up": 60.0, "loads": (0.10, 0.25, 0.50)},
}
