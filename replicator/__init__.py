"""sparkmirror replicator: MirrorMaker 2 semantics with the data path on Apache Spark."""

__version__ = "0.1.0"
