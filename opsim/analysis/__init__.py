"""opsim.analysis."""
