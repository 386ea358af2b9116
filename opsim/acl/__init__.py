"""Value types every layer shares (aclnn/acl_meta.h, opdev/common_types.h)."""
from opsim.acl.dtypes import (DataType, Format, bf16_to_float32, float32_to_bf16, float32_to_fp16,
                              fp16_to_float32, from_compute, to_compute)
from opsim.acl.status import ACLNN_SUCCESS, AclnnStatus
from opsim.acl.tensor import (MAX_DIM_NUM, BoolArray, FloatArray, Fp16Array, IntArray, Placement, Scalar,
                              ScalarList, Shape, Storage, Tensor, TensorList, host_tensor)

__all__ = [
    "AclnnStatus", "ACLNN_SUCCESS", "DataType", "Format", "Shape", "Storage", "Tensor", "TensorList", "Scalar",
    "ScalarList", "IntArray", "FloatArray", "BoolArray", "Fp16Array", "Placement", "MAX_DIM_NUM", "host_tensor",
    "bf16_to_float32", "float32_to_bf16", "float32_to_fp16", "fp16_to_float32", "to_compute", "from_compute",
]
