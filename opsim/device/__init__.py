"""SimPy models of the device: streams, AI Core / AI CPU unit pools, HBM, cost model, SoC presets."""
