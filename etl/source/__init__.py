"""Kafka in: metadata, and one partition's offset range read as RawChunks."""
