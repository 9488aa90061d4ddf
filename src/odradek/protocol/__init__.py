"""The Kafka wire protocol: primitives, generated messages, record batches, framing."""
