"""opsim.ops."""
