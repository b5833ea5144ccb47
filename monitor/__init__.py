"""sparkmirror monitor: end-to-end replication lag for sparkmirror and Apache MM2."""
