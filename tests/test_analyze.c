// The mean attention distance of `ctrain analyze` (train/analyze.h):
// - a hand-computed tiny attention map (a class token without a place,
//   two heads, two windows with their own places);
// - constructed models whose attention is uniform (zero q and k
//   projections, zero relative position bias): the first layer's distance
//   must equal the mean distance between token centres, computed here
//   independently (a Swin window of a map; a ViT's whole patch grid);
// - bad records are refused with a message.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/tape.h"
#include "core/arena.h"
#include "harness.h"
#include "nn/swin.h"
#include "nn/vit.h"
#include "train/analyze.h"

static ct_tensor *tensor_of(const float *v, int64_t a, int64_t b, int64_t c,
                            int64_t d) {
  ct_tensor *t = ct_tensor_empty(CT_F32, CT_SHAPE(a, b, c, d));
  memcpy(ct_f32(t), v, (size_t)t->numel * sizeof(float));
  return t;
}

static ct_tensor *places_of(const float *v, int64_t groups, int64_t n) {
  ct_tensor *t = ct_tensor_empty(CT_F32, CT_SHAPE(groups, n, 2));
  memcpy(ct_f32(t), v, (size_t)t->numel * sizeof(float));
  return t;
}

static void hand_computed(void) {
  // One image, 2 heads, 3 tokens: a class token (no place) and two patches
  // 3 pixels apart.
  const float w[2 * 3 * 3] = {
      // head 0: queries 0 (class, skipped), 1, 2
      0.3f, 0.3f, 0.4f, 0.2f, 0.4f, 0.4f, 0.5f, 0.1f, 0.4f,
      // head 1
      1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 1.0f, 0.0f, 1.0f, 0.0f};
  const float yx[3 * 2] = {NAN, NAN, 0.5f, 0.5f, 0.5f, 3.5f};
  ct_nn_attention_layer l = {.weights = tensor_of(w, 1, 2, 3, 3),
                             .groups = 1,
                             .query_yx = places_of(yx, 1, 3),
                             .key_yx = places_of(yx, 1, 3)};
  double sum[2] = {0, 0};
  int64_t queries = 0;
  CHECK(ct_analyze_layer_distance(&l, sum, &queries) == CT_OK, "%s",
        ct_last_error());
  // head 0: query 1 (0.4*0 + 0.4*3) / 0.8 = 1.5; query 2 (0.1*3 + 0.4*0) /
  // 0.5 = 0.6. head 1: 3 and 3.
  CHECK(queries == 2, "queries %lld, want 2", (long long)queries);
  CHECK_CLOSE(sum[0], 2.1, 1e-6, "head 0 sum");
  CHECK_CLOSE(sum[1], 6.0, 1e-6, "head 1 sum");
  printf("hand-computed: head 0 mean %.6f (want 1.05), head 1 %.6f (want 3)\n",
         sum[0] / (double)queries, sum[1] / (double)queries);

  // Two images of two windows (groups) each, one head, 2 tokens per
  // window: window 0's tokens 1 px apart, window 1's 4 px (3-4-5).
  const float w2[4 * 2 * 2] = {0.5f, 0.5f, 0.5f,  0.5f,  0.0f,  1.0f,
                               1.0f, 0.0f, 0.25f, 0.75f, 0.75f, 0.25f,
                               1.0f, 0.0f, 0.0f,  1.0f};
  const float yx2[2 * 2 * 2] = {0, 0, 0, 1, 0, 0, 3, 4};
  ct_nn_attention_layer l2 = {.weights = tensor_of(w2, 4, 1, 2, 2),
                              .groups = 2,
                              .query_yx = places_of(yx2, 2, 2),
                              .key_yx = places_of(yx2, 2, 2)};
  double s2 = 0.0;
  int64_t q2 = 0;
  CHECK(ct_analyze_layer_distance(&l2, &s2, &q2) == CT_OK, "%s",
        ct_last_error());
  // image 0: window 0 0.5 + 0.5, window 1 5 + 5; image 1: window 0 0.75 +
  // 0.75, window 1 0 + 0.
  CHECK(q2 == 8, "queries %lld, want 8", (long long)q2);
  CHECK_CLOSE(s2, 12.5, 1e-6, "windowed sum");

  // Bad records.
  ct_nn_attention_layer bad = l2;
  bad.groups = 3;
  CHECK(ct_analyze_layer_distance(&bad, &s2, &q2) == CT_ERR_SHAPE,
        "3 groups of 4 rows accepted");
  bad = l2;
  bad.key_yx = NULL;
  CHECK(ct_analyze_layer_distance(&bad, &s2, &q2) == CT_ERR_ARG,
        "a layer without key places accepted");
  CHECK(strstr(ct_last_error(), "places") != NULL, "message: %s",
        ct_last_error());
}

// The mean over queries of the mean distance to all keys, for tokens on an
// n x n grid of cells `cell` pixels wide.
static double grid_mean_distance(int64_t n, double cell) {
  double sum = 0.0;
  for (int64_t i = 0; i < n * n; i++)
    for (int64_t j = 0; j < n * n; j++)
      sum += cell * hypot((double)(i / n - j / n), (double)(i % n - j % n));
  return sum / (double)(n * n * n * n);
}

// Zeroes every parameter whose name contains `part`.
static void zero_params(ct_params *p, const char *part) {
  for (int i = 0; i < p->n; i++)
    if (strstr(p->items[i].name, part))
      memset(ct_f32(p->items[i].tensor), 0,
             (size_t)p->items[i].tensor->numel * sizeof(float));
}

// The first layer's mean distance of a model with uniform first-layer
// attention, run on random images.
static double first_layer_distance(bool swin, const void *model,
                                   int64_t *heads) {
  ct_rng r = ct_rng_make(3, 0);
  ct_tensor *x = ct_tensor_empty(CT_F32, CT_SHAPE(2, 1, 16, 16));
  for (int64_t i = 0; i < x->numel; i++)
    ct_f32(x)[i] = (float)ct_rng_next_double(&r) * 2.0f - 1.0f;
  ct_nn_attention_log log = {0};
  ct_nn_ctx ctx = ct_nn_eval_ctx();
  ctx.attention = &log;
  ct_tensor *logits = swin ? ct_nn_swin_forward(model, &ctx, x)
                           : ct_nn_vit_forward(model, &ctx, x, NULL, NULL);
  CHECK(logits != NULL, "forward: %s", ct_last_error());
  if (!logits || log.count < 1) return NAN;
  *heads = log.layers[0].weights->shape[1];
  double sum[8] = {0};
  int64_t queries = 0;
  CHECK(ct_analyze_layer_distance(&log.layers[0], sum, &queries) == CT_OK, "%s",
        ct_last_error());
  for (int64_t h = 1; h < *heads; h++)
    CHECK_CLOSE(sum[h], sum[0], 1e-9, "uniform heads agree");
  return sum[0] / (double)queries;
}

static void uniform_models(void) {
  bool was = ct_grad_set_enabled(false);
  // Swin: 16x16 images, patch 2 -> an 8x8 map of 2-pixel tokens, window 4:
  // uniform attention within 4x4 windows.
  ct_params p;
  ct_params_init(&p);
  ct_rng init = ct_rng_make(1, 0);
  ct_nn_swin swin;
  ct_nn_swin_config sc = {.image_h = 16,
                          .image_w = 16,
                          .in_channels = 1,
                          .patch = 2,
                          .embed_dim = 8,
                          .stages = 2,
                          .depths = {2, 2},
                          .heads = {2, 4},
                          .window = 4,
                          .mlp_ratio = 2.0f,
                          .num_classes = 3};
  CHECK(ct_nn_swin_init(&swin, &p, "", &sc, &init) == CT_OK, "%s",
        ct_last_error());
  zero_params(&p, "attn.qkv");
  zero_params(&p, "relative_position_bias_table");
  int64_t heads = 0;
  double got = first_layer_distance(true, &swin, &heads);
  double want = grid_mean_distance(4, 2.0);
  printf(
      "swin, uniform 4x4 windows of 2 px tokens: %.6f px (analytic "
      "%.6f)\n",
      got, want);
  CHECK(heads == 2, "swin first layer heads %lld", (long long)heads);
  CHECK_CLOSE(got, want, 1e-5, "swin first layer, uniform attention");
  ct_nn_swin_free(&swin);
  ct_params_free(&p);

  // ViT: 16x16 images, patch 4 -> 4x4 patches of 4 pixels plus a class
  // token, whose weight is left out.
  ct_params_init(&p);
  ct_nn_vit vit;
  ct_nn_vit_config vc = {.image_h = 16,
                         .image_w = 16,
                         .in_channels = 1,
                         .patch = 4,
                         .dim = 8,
                         .depth = 2,
                         .heads = 2,
                         .mlp_dim = 16,
                         .num_classes = 3};
  CHECK(ct_nn_vit_init(&vit, &p, "", &vc, &init) == CT_OK, "%s",
        ct_last_error());
  zero_params(&p, "attn.qkv");
  got = first_layer_distance(false, &vit, &heads);
  want = grid_mean_distance(4, 4.0);
  printf("vit, uniform over 4x4 patches of 4 px: %.6f px (analytic %.6f)\n",
         got, want);
  CHECK_CLOSE(got, want, 1e-5, "vit first layer, uniform attention");
  ct_nn_vit_free(&vit);
  ct_params_free(&p);
  ct_grad_set_enabled(was);
}

int main(void) {
  hand_computed();
  uniform_models();
  ct_arena_release();
  return test_summary("analyze");
}
