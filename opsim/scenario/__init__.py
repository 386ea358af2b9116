"""opsim.scenario."""
