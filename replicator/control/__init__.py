"""Driver-side control plane: topics, configs, ACLs, heartbeats, checkpoints, group offsets."""
