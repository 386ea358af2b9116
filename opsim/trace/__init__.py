"""The trace recorder (one columnar event log per simulation) and its exporters."""
