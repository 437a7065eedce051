"""The Megatron adapter as a package (docs/adapter-protocol.md, "Package layout"); adapter.py starts it."""
