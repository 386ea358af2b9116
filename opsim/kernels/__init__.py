"""Numba kernels only: the AI CPU key hash, operator numerics, hot planner loops (no SimPy, no Python objects)."""
