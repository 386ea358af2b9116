"""Regenerate the synthetic format fixtures of this directory (python tests/data/formats/make_formats.py).

Every value here is invented; the files only follow the documented column sets and event layouts (see README.md).
"""
from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent
T0 = 1704161511000000  # an epoch start in microseconds, as the profilers write it
PY, CANN, DEV0, DEV1, HCCL, OVERLAP = 3100, 310002, 800, 801, 900, 3101100
THREADS = (3100, 3150)  # two issuing Python threads (tid = OS thread id, shared by the CANN rows)
#: (thread, api, device op type, core, stream, block dim, mix block dim, start offset us, kernel dur us)
CALLS = [
    (3100, "aclnnAdd", "Add", "AI_VECTOR_CORE", 3, 8, 0, 100, 4.5),
    (3100, "aclnnMatmul", "MatMulV2", "AI_CORE", 3, 20, 0, 200, 30.0),
    (3150, "aclnnFlashAttentionScore", "FlashAttentionScore", "MIX_AIC", 5, 20, 40, 150, 55.0),
    (3150, "aclnnNonzero", "NonZero", "AI_CPU", 5, 1, 0, 300, 80.0),
    (3100, "aclnnAdd", "Add", "AI_VECTOR_CORE", 3, 8, 0, 1100, 4.4),
    (3100, "aclnnMatmul", "MatMulV2", "AI_CORE", 3, 20, 0, 1200, 31.0),
    (3150, "aclnnFlashAttentionScore", "FlashAttentionScore", "MIX_AIV", 5, 40, 20, 1150, 54.0),
    (3150, "aclnnNonzero", "NonZero", "AI_CPU", 5, 1, 0, 1300, 81.0),
]
SHAPES = {"Add": ('"4096,1024;4096,1024"', "FLOAT16;FLOAT16", '"4096,1024"', "FLOAT16"),
          "MatMulV2": ('"1024,4096;4096,1024"', "DT_BF16;DT_BF16", '"1024,1024"', "DT_BF16"),
          "FlashAttentionScore": ('"1,8,2048,128;1,8,2048,128;1,8,2048,128"', "BF16;BF16;BF16",
                                  '"1,8,2048,128"', "BF16"),
          "NonZero": ('"65536"', "INT64", '"65536,1"', "INT64")}


def _x(name, pid, tid, ts, dur, cat=None, args=None):
    e = {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": f"{T0 + ts:.3f}", "dur": dur}
    if cat:
        e["cat"] = cat
    if args is not None:
        e["args"] = args
    return e


def _meta(pid, name, tid=None, thread=None):
    out = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}]
    if tid is not None:
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": thread}})
    return out


def trace_events(queue: bool) -> list[dict]:
    ev = _meta(PY, "Python", THREADS[0], f"Thread {THREADS[0]}")
    ev += [{"ph": "M", "name": "thread_name", "pid": PY, "tid": THREADS[1], "args": {"name": f"Thread {THREADS[1]}"}}]
    ev += _meta(CANN, "CANN")
    for dev in (DEV0, DEV1):
        ev += _meta(dev, "Ascend Hardware", 3, "Stream 3")
        ev += [{"ph": "M", "name": "thread_name", "pid": dev, "tid": 5, "args": {"name": "Stream 5"}}]
    ev += _meta(HCCL, "HCCL", 0, "Group hccl_world_group Communication")
    ev += _meta(OVERLAP, "Overlap Analysis", 0, "Computing")
    ev += [_x("ProfilerStep#1", PY, THREADS[0], 50, 900, "cpu_op"), _x("ProfilerStep#2", PY, THREADS[0], 1050, 900,
                                                                      "cpu_op")]
    ev += [_x("GC", PY, THREADS[0], 60, 3.0, "python_gc"), _x("mark_step", PY, THREADS[1], 70, 0, "mstx")]
    consumer = 3199
    if queue:
        ev += [{"ph": "M", "name": "thread_name", "pid": PY, "tid": consumer, "args": {"name": "Thread 3199"}}]
    for i, (tid, api, op, core, stream, bd, _mbd, off, kdur) in enumerate(CALLS):
        corr = 500 + i
        ev.append(_x(f"aten::{op.lower()}", PY, tid, off - 20, 60, "cpu_op"))
        ev.append(_x(f"AscendCL@{api}GetWorkspaceSize", CANN, tid, off - 15, 4.0, None,
                     {"Thread Id": tid, "Mode": "ACL_NN", "level": "acl"}))
        host_tid, p2_start = tid, off - 8
        if queue:
            ev.append(_x("Enqueue", PY, tid, off - 10, 2.0, "enqueue", {"correlation_id": corr}))
            ev.append(_x(f"Dequeue@{api[5:]}", PY, consumer, off - 6, 14.0, "dequeue", {"correlation_id": corr}))
            host_tid, p2_start = consumer, off - 5
        ev.append(_x(f"AscendCL@{api}", CANN, host_tid, p2_start, 9.0, None,
                     {"Thread Id": host_tid, "Mode": "ACL_NN", "level": "acl"}))
        k_ts = off + 5
        dev = DEV0 if i % 4 != 3 else DEV1
        ev.append(_x(f"{api}_{op}", dev, stream, k_ts, kdur, None,
                     {"Task Type": core, "Stream Id": stream, "Task Id": 10 + i}))
        fid = str(38654705000 + i)
        ev.append({"ph": "s", "name": f"HostToDevice{fid}", "cat": "HostToDevice", "id": fid, "pid": CANN,
                   "tid": host_tid, "ts": f"{T0 + p2_start + 2:.3f}"})
        ev.append({"ph": "f", "bp": "e", "name": f"HostToDevice{fid}", "cat": "HostToDevice", "id": fid,
                   "pid": dev, "tid": stream, "ts": f"{T0 + k_ts:.3f}"})
        ev.append({"ph": "s", "bp": "e", "name": "torch_to_npu", "cat": "async_npu", "id": 9000 + i, "pid": PY,
                   "tid": tid, "ts": f"{T0 + off - 20:.3f}"})
        ev.append({"ph": "f", "bp": "e", "name": "torch_to_npu", "cat": "async_npu", "id": 9000 + i, "pid": dev,
                   "tid": stream, "ts": f"{T0 + k_ts:.3f}"})
    ev.append(_x("hcom_allReduce__123_0_1", HCCL, 0, 600, 120.0, None, {"data_size": 4194304}))
    ev.append(_x("Computing", OVERLAP, 0, 105, 4.5))
    ev.append(_x("AscendCL@aclrtSynchronizeStream", CANN, THREADS[0], 800, 40.0, None, {"Mode": "ACL_RTS"}))
    return ev


KD_HEADER = ["Device_id", "Step Id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State",
             "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Dim", "Mix Block Dim",
             "HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes",
             "Output Data Types", "Output Formats", "Context ID", "aicore_time(us)", "aic_total_cycles",
             "aiv_time(us)", "aiv_total_cycles"]


def kernel_rows() -> list[list[str]]:
    rows = []
    for i, (_tid, api, op, core, stream, bd, mbd, off, kdur) in enumerate(CALLS):
        ins, idt, outs, odt = SHAPES[op]
        pmu = ["N/A"] * 4 if core == "AI_CPU" else [f"{kdur * 0.9:.3f}", "1000", f"{kdur * 0.8:.3f}", "900"]
        rows.append(["0", "1" if off < 1000 else "2", "4294967295", str(10 + i), str(stream), f"{api}_{op}", op,
                     "dynamic", core, f"{T0 + off + 5:.3f}\t", f"{kdur}", "0", str(bd), str(mbd), "NO", ins, idt,
                     "ND;ND" if ";" in idt else "ND", outs, odt, "ND", "N/A", *pmu])
    rows.append(["0", "1", "4294967295", "0", "9", "hcom_allReduce__123_0_1", "hcom_allReduce_", "N/A", "HCCL",
                 f"{T0 + 600:.3f}\t", "120.0", "0", "0", "0", "N/A", "N/A", "N/A", "N/A", "N/A", "N/A", "N/A",
                 "N/A", "N/A", "N/A", "N/A", "N/A"])
    return rows


def _csv(header: list[str], rows: list[list[str]], nl: str = "\n") -> str:
    def cell(c: str) -> str:
        return f'"{c}"' if ("," in c and not c.startswith('"')) else c
    return nl.join(",".join(cell(c) for c in r) for r in [header, *rows]) + nl


def main() -> None:
    for name, queue in (("trace_view_no_queue_multi_device.json", False), ("trace_view_queue_two_threads.json", True)):
        events = trace_events(queue)
        data = {"traceEvents": events, "displayTimeUnit": "ns"} if not queue else events
        (HERE / name).write_text(json.dumps(data, indent=1) + "\n")
    rows = kernel_rows()
    (HERE / "kernel_details_pmu_multistep_crlf.csv").write_text(_csv(KD_HEADER, rows, "\r\n"), newline="")
    # kernel_details without PMU columns and without Step Id, columns in another order
    keep = ["Name", "Type", "Accelerator Core", "Duration(us)", "Start Time(us)", "Stream ID", "Task ID",
            "Block Dim", "Mix Block Dim", "Output Shapes", "Output Data Types", "Output Formats", "Input Shapes",
            "Input Data Types", "Input Formats", "Wait Time(us)"]
    idx = [KD_HEADER.index(k) for k in keep]
    (HERE / "kernel_details_no_pmu_no_step_reordered.csv").write_text(
        _csv(keep, [[r[i] for i in idx] for r in rows]))
    # profiler_level Level0: the tensor columns (shapes, dtypes, formats) and the PMU columns are not collected
    level0 = ["Step Id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "Accelerator Core", "Start Time(us)",
              "Duration(us)", "Wait Time(us)", "Block Dim", "Mix Block Dim"]
    idx = [KD_HEADER.index(k) for k in level0]
    (HERE / "kernel_details_level0_no_tensors.csv").write_text(_csv(level0, [[r[i] for i in idx] for r in rows]))
    # msprof op_summary: older spellings (Op Name, OP Type, Task Type, Task ...(us)), a BOM, an Infer ID column
    ren = {"Name": "Op Name", "Type": "OP Type", "Accelerator Core": "Task Type", "Start Time(us)":
           "Task Start Time(us)", "Duration(us)": "Task Duration(us)", "Wait Time(us)": "Task Wait Time(us)"}
    hdr = [ren.get(h, h) for h in KD_HEADER if h != "Step Id"]
    hdr.insert(4, "Infer ID")
    srows = []
    for r in rows:
        r = [c for h, c in zip(KD_HEADER, r) if h != "Step Id"]
        r.insert(4, "0")
        srows.append(r)
    (HERE / "op_summary_0_1_1.csv").write_text("\ufeff" + _csv(hdr, srows), encoding="utf-8")


if __name__ == "__main__":
    main()
