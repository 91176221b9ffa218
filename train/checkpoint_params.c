// Parameter stores in checkpoints: encoding a store's values (or a state
// slot) as a params section, and decoding one, with every length checked,
// into named tensors for ct_params_load_named.
#include "train/checkpoint_params.h"
#include "train/record.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { PARAMS_DTYPE_F32 = 0 };

static ct_status put_buffer(ct_ckpt_writer *w, const char *section,
                            const ct_params *p, const float *buf) {
  ct_rec r;
  ct_rec_init(&r);
  ct_rec_u32(&r, (uint32_t)p->n);
  for (int i = 0; i < p->n; i++) {
    const ct_param *it = &p->items[i];
    ct_rec_str(&r, it->name);
    ct_rec_u32(&r, PARAMS_DTYPE_F32);
    ct_rec_u32(&r, (uint32_t)it->tensor->ndim);
    for (int d = 0; d < it->tensor->ndim; d++)
      ct_rec_i64(&r, it->tensor->shape[d]);
    ct_rec_bytes(&r, buf + it->offset,
                 (size_t)it->tensor->numel * sizeof(float));
  }
  ct_status st = ct_ckpt_writer_add_rec(w, section, &r);
  ct_rec_free(&r);
  return st;
}

ct_status ct_ckpt_put_params(ct_ckpt_writer *w, const char *section,
                             const ct_params *p) {
  if (!p) return ct_error(CT_ERR_ARG, "checkpoint: no parameter store");
  return put_buffer(w, section, p, p->data);
}

ct_status ct_ckpt_put_param_state(ct_ckpt_writer *w, const char *section,
                                  const ct_params *p, int slot) {
  if (!p || slot < 0 || slot >= CT_PARAM_STATE_SLOTS)
    return ct_error(CT_ERR_ARG,
                    "checkpoint: need a store and a state slot "
                    "in 0..%d (got %d)",
                    CT_PARAM_STATE_SLOTS - 1, slot);
  if (!p->state[slot])
    return ct_error(CT_ERR_STATE,
                    "checkpoint: optimizer state slot %d was "
                    "never allocated; nothing to save in '%s'",
                    slot, section ? section : "?");
  return put_buffer(w, section, p, p->state[slot]);
}

// Parses a params-layout section into tensors and loads them into buf.
static ct_status get_buffer(const ct_ckpt *c, const char *section,
                            ct_params *dst, float *buf, unsigned flags) {
  char what[1024];
  snprintf(what, sizeof what, "%s section '%s'", c ? ct_ckpt_path(c) : "?",
           section ? section : "?");
  ct_rec_reader r;
  ct_status st = ct_ckpt_section_reader(c, section, &r);
  if (st != CT_OK) return st;
  r.what = what;
  uint32_t count = ct_rec_get_u32(&r);
  // Each tensor takes at least 20 bytes, which bounds the allocation.
  if (r.status == CT_OK && count > (r.len - r.pos) / 20)
    r.status = ct_error(CT_ERR_FORMAT, "%s: claims %u tensors in %zu bytes",
                        what, count, r.len);
  ct_named_tensor *t =
      r.status == CT_OK ? calloc(count ? count : 1, sizeof *t) : NULL;
  if (r.status == CT_OK && !t)
    r.status = ct_error(CT_ERR_NOMEM, "%s: out of memory", what);
  uint32_t got = 0;
  for (; r.status == CT_OK && got < count; got++) {
    ct_named_tensor *e = &t[got];
    e->name = ct_rec_get_str(&r);
    uint32_t dtype = ct_rec_get_u32(&r), ndim = ct_rec_get_u32(&r);
    if (r.status != CT_OK) break;
    if (dtype != PARAMS_DTYPE_F32 || ndim > CT_FILE_MAX_DIMS) {
      r.status = ct_error(CT_ERR_FORMAT,
                          "%s: tensor '%s' has dtype %u and "
                          "%u dims (this build reads f32, up to %d dims)",
                          what, e->name, dtype, ndim, CT_FILE_MAX_DIMS);
      break;
    }
    e->dtype = CT_FILE_F32;
    e->ndim = (int)ndim;
    uint64_t numel = 1;
    bool overflow = false;
    for (uint32_t d = 0; d < ndim; d++) {
      e->shape[d] = ct_rec_get_i64(&r);
      if (e->shape[d] < 0 ||
          (e->shape[d] && numel > UINT64_MAX / 4 / (uint64_t)e->shape[d]))
        overflow = true;
      else
        numel *= (uint64_t)e->shape[d];
    }
    size_t nbytes = 0;
    e->data = ct_rec_get_bytes(&r, &nbytes);
    if (r.status == CT_OK && (overflow || nbytes != numel * 4))
      r.status = ct_error(CT_ERR_FORMAT,
                          "%s: tensor '%s' holds %zu bytes, "
                          "which does not fit its shape",
                          what, e->name, nbytes);
  }
  st = ct_rec_reader_done(&r);
  if (st == CT_OK)
    st = ct_params_load_named(dst, buf, t, (int)count, flags, what);
  for (uint32_t i = 0; t && i < count; i++) free((char *)t[i].name);
  free(t);
  return st;
}

ct_status ct_ckpt_get_params(const ct_ckpt *c, const char *section,
                             ct_params *dst, unsigned flags) {
  if (!c || !dst)
    return ct_error(CT_ERR_ARG,
                    "checkpoint: get_params needs "
                    "a checkpoint and a store");
  return get_buffer(c, section, dst, dst->data, flags);
}

ct_status ct_ckpt_get_param_state(const ct_ckpt *c, const char *section,
                                  ct_params *dst, int slot, unsigned flags) {
  if (!c || !dst)
    return ct_error(CT_ERR_ARG,
                    "checkpoint: get_param_state "
                    "needs a checkpoint and a store");
  if (!ct_ckpt_has(c, section))  // before allocating the slot
    return ct_error(CT_ERR_FORMAT, "%s: no section '%s' in this checkpoint",
                    ct_ckpt_path(c), section ? section : "?");
  float *buf = ct_params_state(dst, slot);
  return buf ? get_buffer(c, section, dst, buf, flags) : ct_last_status();
}
