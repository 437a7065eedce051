"""Persistent gloo worlds of worker processes that run Megatron's checkpoint code on CPU."""
