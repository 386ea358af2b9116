"""Ranks together: several simulated NPUs on one clock, their communication groups, collectives and links.

Layer: above `opsim.runtime` (a rank's simulation) and `opsim.device`, below `opsim.scenario`.
"""
