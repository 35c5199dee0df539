// kimi/ops.h: every operator of kimi.cpp. One header per family under kimi/ops/; each declaration
// carries its math, shapes and layouts. Operators run on the backend of their tensors' device and
// throw kimi::Error (naming the argument, expected vs actual) on bad input before touching memory.
// This one include is enough to call any operator: it also brings kimi::Tensor / TensorView (tensor.h),
// kimi::Error (error.h) and kimi::Context (context.h).
#pragma once

#include "kimi/context.h"
#include "kimi/error.h"
#include "kimi/tensor.h"
#include "kimi/ops/attn_res.h"
#include "kimi/ops/conv.h"
#include "kimi/ops/gather.h"
#include "kimi/ops/kda.h"
#include "kimi/ops/kda_decode.h"
#include "kimi/ops/linear.h"
#include "kimi/ops/mla.h"
#include "kimi/ops/moe.h"
#include "kimi/ops/mxfp4.h"
#include "kimi/ops/norm.h"
#include "kimi/ops/random.h"
#include "kimi/ops/sample.h"
