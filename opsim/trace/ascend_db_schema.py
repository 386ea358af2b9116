"""The tables and columns of torch_npu's ``ascend_pytorch_profiler_<rank>.db``, and msprof's enumerations.

The table and column sets are those of a real torch_npu export (the AlexNet 910B profile under
``../shared/real-profiles``; its CREATE statements are in ``tests/data/real_profile_schema``, which
``tests/profiler/test_real_schema.py`` diffs against these). Differences, each deliberate:

- ``COMPUTE_TASK_INFO`` also has ``opState`` and ``hf32Eligible`` (newer CANN exports carry them and
  msprof-analyze's advisor reads ``opState`` when present);
- ``CANN_API.connectionId`` is not a primary key (a call's CANN spans share its id) and ``PYTORCH_API``'s times
  are INTEGER (the real file stores their digits as TEXT), so the tools compare them as numbers;
- ``TASK.globalTaskId`` and ``STEP_TIME.id`` are primary keys, ``connectionCats`` columns are typed.

The ``ENUM_*`` contents are msprof's fixed enumerations, copied from the same export (format constants, not
measurements).
"""
from __future__ import annotations

__all__ = ["PROFILER_DB_TABLES", "ENUM_TABLES", "ENUM_API_TYPE", "META_DATA"]

PROFILER_DB_TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "STRING_IDS": (("id", "INTEGER PRIMARY KEY"), ("value", "TEXT")),
    "ENUM_API_TYPE": (("id", "INTEGER PRIMARY KEY"), ("name", "TEXT")),
    "TASK": (("startNs", "INTEGER"), ("endNs", "INTEGER"), ("deviceId", "INTEGER"), ("connectionId", "INTEGER"),
        ("globalTaskId", "INTEGER PRIMARY KEY"), ("globalPid", "INTEGER"), ("taskType", "INTEGER"),
        ("contextId", "INTEGER"), ("streamId", "INTEGER"), ("taskId", "INTEGER"), ("modelId", "INTEGER"),
        ("depth", "INTEGER")),
    "COMPUTE_TASK_INFO": (("name", "INTEGER"), ("globalTaskId", "INTEGER PRIMARY KEY"), ("blockDim", "INTEGER"),
        ("mixBlockDim", "INTEGER"), ("taskType", "INTEGER"), ("opType", "INTEGER"), ("inputFormats", "INTEGER"),
        ("inputDataTypes", "INTEGER"), ("inputShapes", "INTEGER"), ("outputFormats", "INTEGER"),
        ("outputDataTypes", "INTEGER"), ("outputShapes", "INTEGER"), ("attrInfo", "INTEGER"), ("waitNs", "INTEGER"),
        ("opState", "INTEGER"), ("hf32Eligible", "INTEGER")),
    "TASK_PMU_INFO": (("globalTaskId", "INTEGER"), ("name", "INTEGER"), ("value", "NUMERIC")),
    "CANN_API": (("startNs", "INTEGER"), ("endNs", "INTEGER"), ("type", "INTEGER"), ("globalTid", "INTEGER"),
        ("connectionId", "INTEGER"), ("name", "INTEGER"), ("depth", "INTEGER")),
    "PYTORCH_API": (("startNs", "INTEGER"), ("endNs", "INTEGER"), ("globalTid", "INTEGER"),
        ("connectionId", "INTEGER"), ("name", "INTEGER"), ("sequenceNumber", "INTEGER"), ("fwdThreadId", "INTEGER"),
        ("inputDtypes", "INTEGER"), ("inputShapes", "INTEGER"), ("callchainId", "INTEGER"), ("type", "INTEGER"),
        ("depth", "INTEGER")),
    "PYTORCH_CALLCHAINS": (("id", "INTEGER"), ("stack", "INTEGER"), ("stackDepth", "INTEGER")),
    "CONNECTION_IDS": (("id", "INTEGER"), ("connectionId", "INTEGER")),
    "STEP_TIME": (("id", "INTEGER PRIMARY KEY"), ("startNs", "INTEGER"), ("endNs", "INTEGER")),
    "RANK_DEVICE_MAP": (("rankId", "INTEGER"), ("deviceId", "INTEGER")),
    "NPU_INFO": (("id", "INTEGER"), ("name", "TEXT")),
    "META_DATA": (("name", "TEXT"), ("value", "TEXT")),
    "SESSION_TIME_INFO": (("startTimeNs", "INTEGER"), ("endTimeNs", "INTEGER")),
    "HOST_INFO": (("hostUid", "TEXT"), ("hostName", "TEXT")),
    "AICORE_FREQ": (("deviceId", "INTEGER"), ("timestampNs", "NUMERIC"), ("freq", "INTEGER")),
    "MEMORY_RECORD": (("component", "INTEGER"), ("timestamp", "INTEGER"), ("totalAllocated", "INTEGER"),
        ("totalReserved", "INTEGER"), ("totalActive", "INTEGER"), ("streamPtr", "INTEGER"), ("deviceId", "INTEGER")),
    "OP_MEMORY": (("name", "INTEGER"), ("size", "INTEGER"), ("allocationTime", "INTEGER"),
        ("releaseTime", "INTEGER"), ("activeReleaseTime", "INTEGER"), ("duration", "INTEGER"),
        ("activeDuration", "INTEGER"), ("allocationTotalAllocated", "INTEGER"),
        ("allocationTotalReserved", "INTEGER"), ("allocationTotalActive", "INTEGER"),
        ("releaseTotalAllocated", "INTEGER"), ("releaseTotalReserved", "INTEGER"), ("releaseTotalActive", "INTEGER"),
        ("streamPtr", "INTEGER"), ("deviceId", "INTEGER")),
    "NPU_MEM": (("type", "INTEGER"), ("ddr", "NUMERIC"), ("hbm", "NUMERIC"), ("timestampNs", "INTEGER"),
        ("deviceId", "INTEGER")),
    "NPU_MODULE_MEM": (("moduleId", "INTEGER"), ("timestampNs", "INTEGER"), ("totalReserved", "NUMERIC"),
        ("deviceId", "INTEGER")),
    "NPU_OP_MEM": (("operatorName", "INTEGER"), ("addr", "INTEGER"), ("type", "INTEGER"), ("size", "INTEGER"),
        ("timestampNs", "INTEGER"), ("globalTid", "INTEGER"), ("totalAllocate", "NUMERIC"),
        ("totalReserve", "NUMERIC"), ("component", "INTEGER"), ("deviceId", "INTEGER")),
    "ENUM_MODULE": (("id", "INTEGER PRIMARY KEY"), ("name", "TEXT")),
    "ENUM_MSTX_EVENT_TYPE": (("id", "INTEGER PRIMARY KEY"), ("name", "TEXT")),
    "ENUM_HCCL_DATA_TYPE": (("id", "INTEGER PRIMARY KEY"), ("name", "TEXT")),
    "ENUM_HCCL_LINK_TYPE": (("id", "INTEGER PRIMARY KEY"), ("name", "TEXT")),
    "ENUM_HCCL_RDMA_TYPE": (("id", "INTEGER PRIMARY KEY"), ("name", "TEXT")),
    "ENUM_HCCL_TRANSPORT_TYPE": (("id", "INTEGER PRIMARY KEY"), ("name", "TEXT")),
    "COMMUNICATION_OP": (("opName", "INTEGER"), ("startNs", "INTEGER"), ("endNs", "INTEGER"),
        ("connectionId", "INTEGER"), ("groupName", "INTEGER"), ("opId", "INTEGER PRIMARY KEY"), ("relay", "INTEGER"),
        ("retry", "INTEGER"), ("dataType", "INTEGER"), ("algType", "INTEGER"), ("count", "NUMERIC"),
        ("opType", "INTEGER"), ("waitNs", "INTEGER")),
    "COMMUNICATION_TASK_INFO": (("name", "INTEGER"), ("globalTaskId", "INTEGER"), ("taskType", "INTEGER"),
        ("planeId", "INTEGER"), ("groupName", "INTEGER"), ("notifyId", "INTEGER"), ("rdmaType", "INTEGER"),
        ("srcRank", "INTEGER"), ("dstRank", "INTEGER"), ("transportType", "INTEGER"), ("size", "INTEGER"),
        ("dataType", "INTEGER"), ("linkType", "INTEGER"), ("opId", "INTEGER")),
    "HBM": (("deviceId", "INTEGER"), ("timestampNs", "INTEGER"), ("bandwidth", "NUMERIC"), ("hbmId", "INTEGER"),
        ("type", "INTEGER")),
    "LLC": (("deviceId", "INTEGER"), ("llcId", "INTEGER"), ("timestampNs", "INTEGER"), ("hitRate", "REAL"),
        ("throughput", "INTEGER"), ("mode", "INTEGER")),
    "ACC_PMU": (("accId", "INTEGER"), ("readBwLevel", "INTEGER"), ("writeBwLevel", "INTEGER"),
        ("readOstLevel", "INTEGER"), ("writeOstLevel", "INTEGER"), ("timestampNs", "NUMERIC"),
        ("deviceId", "INTEGER")),
    "SOC_BANDWIDTH_LEVEL": (("l2BufferBwLevel", "INTEGER"), ("mataBwLevel", "INTEGER"), ("timestampNs", "NUMERIC"),
        ("deviceId", "INTEGER")),
    "OVERLAP_ANALYSIS": (("id", "INTEGER PRIMARY KEY AUTOINCREMENT"), ("deviceId", "INTEGER"),
        ("startNs", "INTEGER"), ("endNs", "INTEGER"), ("type", "INTEGER")),
    "status_info": (("id", "INTEGER PRIMARY KEY AUTOINCREMENT"), ("key", "TEXT"), ("value", "TEXT")),
    "connectionCats": (("connectionId", "INTEGER"), ("cat", "TEXT")),
}
"""Table -> (column, SQL type) in column order."""

ENUM_API_TYPE = {
    5000: "runtime", 5500: "hccl", 10000: "node", 15000: "model", 20000: "acl", 50001: "op", 50002: "queue",
    50003: "trace", 50004: "mstx"
}
"""msprof's API type enumeration (CANN_API.type, PYTORCH_API.type)."""

ENUM_TABLES: dict[str, dict[int, str]] = {
    "ENUM_MODULE": {
        0: "SLOG", 1: "IDEDD", 2: "IDEDH", 3: "HCCL", 4: "FMK", 5: "HIAIENGINE", 6: "DVPP", 7: "RUNTIME", 8: "CCE",
        9: "HDC", 10: "DRV", 11: "MDCFUSION", 12: "MDCLOCATION", 13: "MDCPERCEPTION", 14: "MDCFSM", 15: "MDCCOMMON",
        16: "MDCMONITOR", 17: "MDCBSWP", 18: "MDCDEFAULT", 19: "MDCSC", 20: "MDCPNC", 21: "MLL", 22: "DEVMM",
        23: "KERNEL", 24: "LIBMEDIA", 25: "CCECPU", 26: "ASCENDDK", 27: "ROS", 28: "HCCP", 29: "ROCE", 30: "TEFUSION",
        31: "PROFILING", 32: "DP", 33: "APP", 34: "TS", 35: "TSDUMP", 36: "AICPU", 37: "LP", 38: "TDT", 39: "FE",
        40: "MD", 41: "MB", 42: "ME", 43: "IMU", 44: "IMP", 45: "GE", 46: "MDCFUSA", 47: "CAMERA", 48: "ASCENDCL",
        49: "TEEOS", 50: "ISP", 51: "SIS", 52: "HSM", 53: "DSS", 54: "PROCMGR", 55: "BBOX", 56: "AIVECTOR", 57: "TBE",
        58: "FV", 59: "MDCMAP", 60: "TUNE", 61: "HSS", 62: "FFTS", 63: "OP", 64: "UDF", 65: "HICAID", 66: "TSYNC",
        67: "AUDIO", 68: "TPRT", 69: "ASCENDCKERNEL", 70: "ASYS", 71: "ATRACE", 72: "RTC", 73: "SYSMONITOR", 74: "AMP",
        75: "ADETECT", 76: "MBUFF", 77: "CUSTOM"
    },
    "ENUM_MSTX_EVENT_TYPE": {
        0: "marker", 1: "push/pop", 2: "start/end", 3: "marker_ex"
    },
    "ENUM_HCCL_DATA_TYPE": {
        0: "INT8", 1: "INT16", 2: "INT32", 3: "FP16", 4: "FP32", 5: "INT64", 6: "UINT64", 7: "UINT8", 8: "UINT16",
        9: "UINT32", 10: "FP64", 11: "BFP16", 12: "INT128", 65534: "N/A", 65535: "INVALID_TYPE"
    },
    "ENUM_HCCL_LINK_TYPE": {
        0: "ON_CHIP", 1: "HCCS", 2: "PCIE", 3: "ROCE", 4: "SIO", 5: "HCCS_SW", 6: "STANDARD_ROCE", 7: "RESERVED",
        65534: "N/A", 65535: "INVALID_TYPE"
    },
    "ENUM_HCCL_RDMA_TYPE": {
        0: "RDMA_SEND_NOTIFY", 1: "RDMA_SEND_PAYLOAD", 2: "RDMA_PAYLOAD_PREPARE", 3: "RDMA_PAYLOAD_CHECK",
        4: "RDMA_PAYLOAD_ACK", 5: "RDMA_SEND_OP", 65534: "N/A", 65535: "INVALID_TYPE"
    },
    "ENUM_HCCL_TRANSPORT_TYPE": {
        0: "SDMA", 1: "RDMA", 2: "LOCAL", 65534: "N/A", 65535: "INVALID_TYPE"
    },
    "ENUM_API_TYPE": ENUM_API_TYPE,
}
"""Every ENUM_* table's rows (id -> name)."""

META_DATA = (("SCHEMA_VERSION_MICRO", "0"), ("SCHEMA_VERSION_MINOR", "0"), ("SCHEMA_VERSION_MAJOR", "1"),
             ("SCHEMA_VERSION", "1.0.0"))
"""The schema version rows of META_DATA (the real export's; its ENV_VARIABLES row, the host process's
environment, has no simulated counterpart and is left out)."""
