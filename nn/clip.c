// CLIP (see clip.h): placeholder bodies so the task code can build against
// the API; the towers and the loss follow.
#include "nn/clip.h"

#include <stdlib.h>

struct ct_nn_clip {
  ct_nn_clip_config cfg;
  ct_tensor *logit_scale;
};

ct_status ct_nn_clip_init(ct_nn_clip **out, ct_params *p, const char *prefix,
                          const ct_nn_clip_config *cfg, ct_rng *init_rng) {
  (void)p, (void)prefix, (void)cfg, (void)init_rng;
  *out = NULL;
  return ct_error(CT_ERR_STATE, "clip: not implemented yet");
}

void ct_nn_clip_free(ct_nn_clip *m) { free(m); }

const ct_nn_clip_config *ct_nn_clip_cfg(const ct_nn_clip *m) { return &m->cfg; }

ct_tensor *ct_nn_clip_encode_image(const ct_nn_clip *m, ct_nn_ctx *ctx,
                                   ct_tensor *images) {
  (void)m, (void)ctx, (void)images;
  ct_error(CT_ERR_STATE, "clip: not implemented yet");
  return NULL;
}

ct_tensor *ct_nn_clip_encode_text(const ct_nn_clip *m, ct_nn_ctx *ctx,
                                  ct_tensor *tokens, const int64_t *eot) {
  (void)m, (void)ctx, (void)tokens, (void)eot;
  ct_error(CT_ERR_STATE, "clip: not implemented yet");
  return NULL;
}

ct_tensor *ct_nn_clip_logit_scale(const ct_nn_clip *m) {
  return m->logit_scale;
}

ct_tensor *ct_nn_clip_loss(ct_tensor *img, ct_tensor *txt, ct_tensor *img_all,
                           ct_tensor *txt_all, int64_t offset,
                           ct_tensor *logit_scale) {
  (void)img, (void)txt, (void)img_all, (void)txt_all, (void)offset;
  (void)logit_scale;
  ct_error(CT_ERR_STATE, "clip: not implemented yet");
  return NULL;
}

void ct_nn_clip_clamp_scale(ct_nn_clip *m) { (void)m; }
