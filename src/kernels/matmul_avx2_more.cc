#include "kernels/matmul_internal.h"
namespace zl::kern {
RowsKernel avx2_more_rows_kernel(GgmlType) { return nullptr; }
}
