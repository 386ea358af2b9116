"""opsim: a discrete-event simulator of CANN opbase's ACLNN operator runtime."""
__version__ = "0.1.0"
