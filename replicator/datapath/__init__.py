"""The Spark data path: one streaming query per enabled flow, three ways to read.

* Spark's real-time mode (``realtime.py``, ``rtrunner.py``; the default once a flow has caught up,
  ``--data-path auto``): one long-lived task per partition hands each record at once
  to the JVM writer (``replicator/jvm/sparkmirror/MirrorForeachWriter.java``, built by
  ``jvmwriter.py``);
* micro-batches over the direct source (``source.py``, ``microbatch.py``; a backlog, and flows that
  cannot run in real time): Spark plans and checkpoints offset ranges; each task
  reads its ranges with confluent-kafka and produces them with the Python writer
  (``writer.py``), so record bytes never pass through the JVM;
* micro-batches over Spark's Kafka source (``--source kafka``, and exactly-once flows
  through ``eos_writer.py``): the rows reach the Python writer through Arrow.

Every path writes MM2's offset-syncs from the delivery reports (on micro-batches
``offsetsyncs_writer.py`` turns a batch's runs into them). One flow's query:

* ``flow.py``: ``FlowReplicator``, a small state machine that starts, supervises,
  restarts and stops the runner its data path calls for;
* ``pathpolicy.py``: which path a flow runs on, and when it may switch (pure);
* ``runner.py``: what a runner is and is given; ``microbatch.py`` and ``rtrunner.py``:
  the runners of the micro-batch paths and of the real-time path;
* ``checkpoint_layout.py``: where the checkpoints live on disk and where a flow resumes.

``app.py`` runs the Spark session all flows share; ``replicator.service`` starts and
stops them.
"""
