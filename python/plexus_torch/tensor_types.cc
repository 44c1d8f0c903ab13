#include "python/plexus_torch/tensor_types.h"

#include <c10/util/Exception.h>

namespace plexus::torch_backend {

plexus_dtype_t plexus_dtype(const at::Tensor& tensor) {
  switch (tensor.scalar_type()) {
    case at::kDouble:
      return PLEXUS_FLOAT64;
    case at::kFloat:
      return PLEXUS_FLOAT32;
    case at::kHalf:
      return PLEXUS_FLOAT16;
    case at::kBFloat16:
      return PLEXUS_BFLOAT16;
    case at::kChar:
      return PLEXUS_INT8;
    case at::kByte:
      return PLEXUS_UINT8;
    case at::kBool:
      return PLEXUS_UINT8;
    case at::kInt:
      return PLEXUS_INT32;
    case at::kLong:
      return PLEXUS_INT64;
    default:
      TORCH_CHECK(false, "ProcessGroupPlexus: tensors of type ", tensor.scalar_type(),
                  " are not supported (float64/32/16, bfloat16, int8, uint8, int32, int64 and "
                  "bool are)");
  }
}

plexus_redop_t plexus_redop(const c10d::ReduceOp& op, at::ScalarType type) {
  const bool boolean = type == at::kBool;
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return boolean ? PLEXUS_MAX : PLEXUS_SUM;
    case c10d::ReduceOp::PRODUCT:
      return boolean ? PLEXUS_MIN : PLEXUS_PROD;
    case c10d::ReduceOp::MIN:
      return PLEXUS_MIN;
    case c10d::ReduceOp::MAX:
      return PLEXUS_MAX;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!boolean, "ProcessGroupPlexus: ReduceOp.AVG is not defined on bool tensors");
      return PLEXUS_AVG;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(false,
                  "ProcessGroupPlexus: the bitwise reductions (BAND, BOR, BXOR) are not "
                  "supported; use SUM, PRODUCT, MIN, MAX or AVG");
    default:
      TORCH_CHECK(false, "ProcessGroupPlexus: reduce op ", static_cast<int>(op.op_),
                  " (PREMUL_SUM or unknown) is not supported; use SUM, PRODUCT, MIN, MAX or AVG");
  }
}

void check_cpu(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().is_cpu(), "ProcessGroupPlexus: ", what, " got a tensor on ", t.device(),
              "; plexus_torch takes CPU tensors only so far");
  plexus_dtype(t);
}

void check_single(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "ProcessGroupPlexus: ", what,
              " takes one tensor per process, got ", tensors.size());
  check_cpu(tensors[0], what);
}

}  // namespace plexus::torch_backend
