"""The opbase semantics: op_args, executor, planner, op-exec cache, launchers, AI CPU tasks, DirectInvoke, DFX."""
