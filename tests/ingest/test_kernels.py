"""kernel_details.csv / op_summary reader: real files and messy or broken synthetic ones."""
from __future__ import annotations

from pathlib import Path

import pytest

from opsim.errors import InvalidArgumentError, ProfileFormatError
from opsim.ingest import canonical_core, canonical_dtype, read_kernels

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
HEADER = ("Step Id,Task ID,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),"
          "Block Dim,Mix Block Dim,Input Shapes,Input Data Types,Input Formats,Output Shapes,Output Data Types,"
          "Output Formats")


def _write(tmp_path: Path, *rows: str, header: str = HEADER) -> Path:
    p = tmp_path / "kernel_details.csv"
    p.write_text("\n".join((header,) + rows) + "\n", encoding="utf-8")
    return p


def test_real_training_file_counts_and_first_row():
    t = read_kernels(REAL / "kernel_details_910b_training.csv")
    assert len(t.raw_rows) == 591
    assert t.skipped == {"HCCL (communication)": 19, "no shapes": 25}
    assert len(t.rows) == 547
    r = t.rows[0]
    assert (r.row, r.op_type, r.core, r.block_dim) == (2, "ZerosLike", "AI_VECTOR_CORE", 48)
    assert r.input_shapes == ((544404480,),) and r.input_dtypes == ("float16",)
    assert r.bytes_moved == 2 * 544404480 * 2
    assert r.duration_us == 607.98 and r.start_ns == 1699529622790614800


def test_real_scalar_entry_and_memset_without_tensors():
    t = read_kernels(REAL / "kernel_details_910b_training.csv")
    less = next(r for r in t.rows if r.op_type == "Less" and r.input_shapes[0] == (1, 1, 1024, 1024))
    assert less.input_shapes == ((1, 1, 1024, 1024), ())  # "1,1,1024,1024;" : the second input is a scalar
    assert less.input_dtypes == ("float", "float") and less.output_dtypes == ("bool",)
    memset = next(r for r in t.rows if r.op_type == "MemSet")
    assert memset.input_shapes == () and memset.input_dtypes == () and memset.bytes_moved == 0


def test_real_matmul_file_bf16_and_trailing_tab():
    t = read_kernels(REAL / "kernel_details_910b_matmul.csv")
    assert not t.skipped and len(t.rows) == 29
    r = t.rows[0]
    assert r.input_dtypes == ("bf16", "bf16") and r.core == "AI_CORE"
    assert r.start_ns == 1736413971558972912  # exact despite the tab and 19 significant digits
    assert r.input_formats == ("ND", "ND")


def test_raw_rows_reproduce_the_file(tmp_path):
    src = REAL / "kernel_details_910b_matmul.csv"
    t = read_kernels(src)
    text = t.newline.join([t.raw_header] + t.raw_rows) + (t.newline if t.final_newline else "")
    assert text == src.read_text(encoding="utf-8-sig")


@pytest.mark.parametrize("spelling, name", [
    ("DT_BF16", "bf16"), ("BF16", "bf16"), ("FLOAT16", "float16"), ("DT_FLOAT", "float"), ("FLOAT", "float"),
    ("INT64", "int64"), ("DT_INT32", "int32"), ("BOOL", "bool"), ("UNDEFINED", "undefined"), (" float32 ", "float"),
])
def test_dtype_spellings(spelling, name):
    assert canonical_dtype(spelling) == name


def test_unknown_dtype_rejected():
    with pytest.raises(InvalidArgumentError):
        canonical_dtype("FLOAT128")


@pytest.mark.parametrize("text, core", [("AI_CORE", "AI_CORE"), ("AI_VECTOR_CORE", "AI_VECTOR_CORE"),
                                        ("MIX_AIC", "MIX_AIC"), ("mix_aiv", "MIX_AIV"), ("AI_CPU", "AI_CPU"),
                                        ("AICPU", "AI_CPU"), ("HCCL", "HCCL"), ("DSA_SQE", "DSA_SQE")])
def test_core_names(text, core):
    assert canonical_core(text) == core


def test_messy_cells(tmp_path):
    p = _write(tmp_path,
               '1,5,2,Add1,Add,AI_VECTOR_CORE,"10.5\t",3.2,N/A,8,N/A,"""4,8;""",DT_FLOAT16;FLOAT16,ND;ND,'
               '"""4,8""",FLOAT16,ND',
               '1,6,2,Mm,MatMul, ai_core ,11.0,N/A,0,"",0,"""2,3;3,4""",BF16,ND,"""2,4""",BF16,ND',
               "1,N/A,N/A,hcom1,hcom_allReduce_,HCCL,12,4,0,0,N/A,N/A,N/A,N/A,N/A,N/A,N/A",
               "1,7,2,X,MemSet,AI_VECTOR_CORE,13,1,0,4,0,N/A,N/A,N/A,N/A,N/A,N/A")
    t = read_kernels(p)
    assert t.skipped == {"HCCL (communication)": 1, "no shapes": 1}
    add, mm = t.rows
    assert add.input_shapes == ((4, 8), ()) and add.start_us == 10.5 and add.wait_us is None
    assert add.mix_block_dim == 0 and add.bytes_moved == 4 * 8 * 2 + 2 + 4 * 8 * 2
    assert mm.core == "AI_CORE" and mm.duration_us is None and mm.block_dim == 0
    assert mm.input_dtypes == ("bf16",) and mm.input_bytes == (6 + 12) * 2  # one dtype for every tensor
    assert add.row == 2 and mm.row == 3


def test_op_summary_columns(tmp_path):
    header = ("Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,Task Type,Task Start Time(us),"
              "Task Duration(us),Task Wait Time(us),Block Dim,Mix Block Dim,Input Shapes,Input Data Types,"
              "Input Formats,Output Shapes,Output Data Types,Output Formats")
    p = tmp_path / "op_summary_0_1_1.csv"
    p.write_text(header + '\n0,1,3,2,Cast1,Cast,AI_VECTOR_CORE,100.25\t,2.5,0,4,0,"8,8",INT64,ND,"8,8",INT32,ND\n')
    (r,) = read_kernels(p).rows
    assert (r.op_type, r.name, r.duration_us, r.input_dtypes, r.output_dtypes) == \
        ("Cast", "Cast1", 2.5, ("int64",), ("int32",))


def test_missing_column_names_file_and_column(tmp_path):
    p = _write(tmp_path, "1,2", header="Name,Type")
    with pytest.raises(ProfileFormatError, match=r"kernel_details\.csv: row 1: missing column\(s\) 'Accelerator Core'"):
        read_kernels(p)


@pytest.mark.parametrize("cells, column", [
    ('1,5,2,A,Add,AI_CORE,1,1,0,eight,0,"""4""",FLOAT,ND,"""4""",FLOAT,ND', "Block Dim"),
    ('1,5,2,A,Add,AI_CORE,1,1,0,8,0,"""4,x""",FLOAT,ND,"""4""",FLOAT,ND', "Input Shapes"),
    ('1,5,2,A,Add,AI_CORE,1,slow,0,8,0,"""4""",FLOAT,ND,"""4""",FLOAT,ND', "Duration(us)"),
    ('1,5,2,A,Add,AI_CORE,1,NaN,0,8,0,"""4""",FLOAT,ND,"""4""",FLOAT,ND', "Duration(us)"),
    ('1,5,2,A,Add,AI_CORE,1,1e400,0,8,0,"""4""",FLOAT,ND,"""4""",FLOAT,ND', "Duration(us)"),
    ('1,5,2,A,Add,AI_CORE,inf,1,0,8,0,"""4""",FLOAT,ND,"""4""",FLOAT,ND', "Start Time(us)"),
    ('1,5,2,A,Add,AI_CORE,1,1,0,-Infinity,0,"""4""",FLOAT,ND,"""4""",FLOAT,ND', "Block Dim"),
    ('1,5,2,A,Add,AI_CORE,1,1,0,8,0,"""4,4000000000,4000000000,4000000000""",FLOAT,ND,"""4""",FLOAT,ND',
     "Input Shapes"),
])
def test_unreadable_cell_names_file_row_and_column(tmp_path, cells, column):
    p = _write(tmp_path, '1,4,2,A,Add,AI_CORE,1,1,0,8,0,"""4""",FLOAT,ND,"""4""",FLOAT,ND', cells)
    with pytest.raises(ProfileFormatError) as info:
        read_kernels(p)
    msg = str(info.value)
    assert str(p) in msg and "row 3" in msg and repr(column) in msg


def test_unknown_dtype_skips_the_row_and_counts_it(tmp_path):
    """A dtype a newer CANN adds must not make the whole table unreadable."""
    p = _write(tmp_path, '1,4,2,A,Add,AI_CORE,1,1,0,8,0,"""4""",FLOAT,ND,"""4""",FLOAT,ND',
               '1,5,2,A,Add,AI_CORE,1,1,0,8,0,"""4""",FLOAT,ND,"""4""",FLOATX,ND')
    table = read_kernels(p)
    assert [r.row for r in table.rows] == [2]
    assert table.skipped == {"unknown data type 'FLOATX'": 1}


def test_missing_and_empty_file(tmp_path):
    with pytest.raises(ProfileFormatError, match="no such file"):
        read_kernels(tmp_path / "nope.csv")
    (tmp_path / "e.csv").write_text("")
    with pytest.raises(ProfileFormatError, match="empty file"):
        read_kernels(tmp_path / "e.csv")
