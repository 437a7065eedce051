"""The adapter's ops, one module per family (docs/adapter-protocol.md)."""
