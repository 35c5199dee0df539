// cuda::register_ops (src/core/registry.h): the CUDA backend's device memory and its operators. An operator
// without a kernel here is refused on CUDA tensors with "not implemented on the cuda:N backend yet"
// (moe_quantile_balance: a host-side statistic). Host code only; compiled with the backend (KIMI_CUDA=ON).
#include "core/registry.h"
#include "cuda/attn_res/attn_res.h"
#include "cuda/conv/conv.h"
#include "cuda/gather/gather.h"
#include "cuda/linear/linear.h"
#include "cuda/mla/mla.h"
#include "cuda/model/add_into.h"
#include "cuda/moe/moe.h"
#include "cuda/norm/norm.h"
#include "cuda/random/random.h"
#include "cuda/register.h"
#include "cuda/runtime.h"
#include "cuda/sample/sample.h"

namespace kimi::cuda {

void register_ops(Registry& r) {
  constexpr Backend b = Backend::cuda;
  DeviceRuntime rt;
  rt.device_count = device_count;
  rt.alloc = alloc;
  rt.free = free;
  rt.zero = zero_bytes;
  rt.copy = copy_bytes;
  rt.synchronize = synchronize;
  rt.pool_stats = pool_stats;
  rt.reset_pool_peak = reset_pool_peak;
  rt.available = available_bytes;
  rt.stream_create = stream_create;
  rt.stream_destroy = stream_destroy;
  rt.copy_async = copy_bytes_async;
  rt.capture_begin = capture_begin;
  rt.capture_end = capture_end;
  rt.graph_launch = graph_launch;
  rt.graph_destroy = graph_destroy;
  rt.event_create = event_create;
  rt.event_destroy = event_destroy;
  rt.event_record = event_record;
  rt.event_elapsed_ms = event_elapsed_ms;
  rt.host_register = host_register;
  rt.host_unregister = host_unregister;
  r.link(b, rt);

  r.rms_norm.set(b, rms_norm);
  r.add_rms_norm.set(b, add_rms_norm);
  r.gated_rms_norm.set(b, gated_rms_norm);
  r.l2_norm.set(b, l2_norm);
  r.linear.set(b, linear);
  r.linear_many.set(b, linear_many);
  r.mxfp4_dequant.set(b, mxfp4_dequant);
  r.mxfp4_quant.set(b, mxfp4_quant);
  r.short_conv_fwd.set(b, short_conv_fwd);
  r.short_conv_update.set(b, short_conv_update);
  register_kda_ops(r);
  r.mla_prefill.set(b, mla_prefill);
  r.mla_cache_write.set(b, mla_cache_write);
  r.mla_decode.set(b, mla_decode);
  r.moe_router.set(b, moe_router);
  r.glu.set(b, glu);
  r.mlp.set(b, mlp);
  r.latent_moe.set(b, latent_moe);
  r.attn_res.set(b, attn_res);
  r.gather_rows.set(b, gather_rows);
  r.sample_tokens.set(b, sample_tokens);
  r.fill_random.set(b, fill_random);
  r.add_into.set(b, add_into);
}

}  // namespace kimi::cuda
