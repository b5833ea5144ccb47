"""sparkmirror's replicate process: MirrorMaker 2 semantics with the data path on Apache Spark.

``command`` declares its options, ``service`` coordinates a run, ``datapath`` copies records
on Spark, ``control`` runs the driver-side loops (heartbeats, topics, configs, checkpoints).
It builds on the shared ``sparkmirror`` package and never imports the monitor.
"""
