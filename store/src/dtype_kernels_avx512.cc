// The generic dtype kernels compiled for avx512 (flags set per file in store/CMakeLists.txt).
#define EMBSTORE_KERNEL_NS avx512
#include "dtype_kernels_impl.h"

namespace embstore::store::kernels {

const DTypeKernels& Avx512Kernels() {
  static const DTypeKernels k = {"avx512", avx512::F16ToF32, avx512::Bf16ToF32, avx512::F32ToF16,
                                 avx512::F32ToBf16, avx512::F32ToF16Checked,
                                 avx512::F32ToBf16Checked, avx512::Checksum64};
  return k;
}

}  // namespace embstore::store::kernels
