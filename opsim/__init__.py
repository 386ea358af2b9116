"""opsim: a discrete-event simulator of CANN opbase's ACLNN operator runtime."""
__version__ = "0.1.0"

_LAZY = {"run": "opsim.api", "load_result": "opsim.api", "Result": "opsim.api", "sweep": "opsim.sweeps",
         "what_if": "opsim.analysis.what_if"}


def __getattr__(name: str):
    """`opsim.run`, `opsim.load_result`, `opsim.Result`, `opsim.sweep` and `opsim.what_if`, imported on first use so `import opsim` stays cheap."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'opsim' has no attribute {name!r}")
    import importlib  # lazy: module __getattr__ (PEP 562): loaded when the name is first used
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
