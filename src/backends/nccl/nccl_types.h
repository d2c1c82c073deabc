#pragma once
// hcoll element types and reduction operators as NCCL's, for the operations NCCL supports.

#include <nccl.h>

#include "common/status.h"
#include "common/types.h"

namespace hcoll::backends::nccl {

// bool travels as uint8 and reduces with MAX (OR: SUM, MAX) or MIN (AND: MIN, PRODUCT); AVERAGE
// is a SUM (the executor scales by 1/N). 16-bit integers have no NCCL type: kUnsupported, which
// every rank returns alike, so no rank is left waiting.
Status toNccl(DataType dtype, ReduceOp op, ncclDataType_t* type, ncclRedOp_t* redOp);

}  // namespace hcoll::backends::nccl
