"""opsim.runtime."""
