// The session's work counters (core/flops.h).
#include "core/flops.h"

#include <stdatomic.h>

#include "core/session_internal.h"

void ct_flops_add_to(ct_session *s, ct_gemm_precision precision, uint64_t n) {
  atomic_fetch_add_explicit(&s->flops[precision == CT_GEMM_BF16], n,
                            memory_order_relaxed);
}

void ct_flops_add(ct_gemm_precision precision, uint64_t n) {
  ct_flops_add_to(ct_session_current(), precision, n);
}

ct_flops ct_flops_get(void) {
  ct_session *s = ct_session_current();
  return (ct_flops){atomic_load_explicit(&s->flops[0], memory_order_relaxed),
                    atomic_load_explicit(&s->flops[1], memory_order_relaxed)};
}

void ct_flops_reset(void) {
  ct_session *s = ct_session_current();
  atomic_store_explicit(&s->flops[0], 0, memory_order_relaxed);
  atomic_store_explicit(&s->flops[1], 0, memory_order_relaxed);
}
