// The generic dtype kernels compiled for aarch64's Advanced SIMD (the baseline there, so no extra
// flags; -O3 in store/CMakeLists.txt), with the half-precision conversions done by FCVTL/FCVTN.
#define EMBSTORE_KERNEL_NS neon
#define EMBSTORE_KERNEL_NEON 1
#include "dtype_kernels_impl.h"

namespace embstore::store::kernels {

const DTypeKernels& NeonKernels() {
  static const DTypeKernels k = {"neon", neon::F16ToF32, neon::Bf16ToF32, neon::F32ToF16,
                                 neon::F32ToBf16, neon::F32ToF16Checked,
                                 neon::F32ToBf16Checked, neon::Checksum64};
  return k;
}

}  // namespace embstore::store::kernels
