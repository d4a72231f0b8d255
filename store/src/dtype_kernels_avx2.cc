// The generic dtype kernels compiled for avx2 (flags set per file in store/CMakeLists.txt).
#define EMBSTORE_KERNEL_NS avx2
#include "dtype_kernels_impl.h"

namespace embstore::store::kernels {

const DTypeKernels& Avx2Kernels() {
  static const DTypeKernels k = {"avx2", avx2::F16ToF32, avx2::Bf16ToF32, avx2::F32ToF16,
                                 avx2::F32ToBf16, avx2::F32ToF16Checked,
                                 avx2::F32ToBf16Checked, avx2::Checksum64};
  return k;
}

}  // namespace embstore::store::kernels
