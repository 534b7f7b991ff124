"""The replay/v1 capture contract: Avro schemas, the pydantic models mirroring them, the codec."""
