"""The Spark data path: Spark Kafka source -> Python writer on confluent-kafka -> offset-syncs."""
