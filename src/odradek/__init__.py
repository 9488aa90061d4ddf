"""Odradek: a Kafka-compatible, partitioned, replicated commit log."""

__version__ = "0.1.0.dev0"
