// Deformable DETR (nn/deformable_detr.h): the reference's parameter names
// and shapes, its init (class prior, box head, GroupNorm, reference point
// bias), forward shapes and ranges with and without aux heads and box
// refinement, the dropout sites, a focal loss whose gradient reaches every
// parameter, Deformable DETR's sine offset, bad configs, and a tiny model
// against a PyTorch twin of the whole forward.
#include <math.h>
#include <string.h>

#include "autograd/ops.h"
#include "core/threads.h"
#include "grad_util.h"
#include "nn/deformable_detr.h"
#include "optim/optim.h"
#include "tests/parity_util.h"
#include "tests/ref/ddetr_fixtures.h"

enum { K = 2 };

// d_model 32 (GroupNorm's 32 groups), 2 levels from a 2-stage ResNet plus
// one extra, one encoder and two decoder layers, 4 queries.
static ct_nn_ddetr_config tiny(void) {
  return (ct_nn_ddetr_config){.in_channels = 3,
                              .num_classes = K,
                              .backbone_width = 4,
                              .backbone_stages = 2,
                              .backbone_blocks = 1,
                              .d_model = 32,
                              .nhead = 2,
                              .enc_layers = 1,
                              .dec_layers = 2,
                              .dim_feedforward = 32,
                              .dropout = 0.0f,
                              .num_queries = 4,
                              .n_levels = 3,
                              .n_points = 2,
                              .aux_loss = true,
                              .box_refine = false};
}

static const ct_param *find(const ct_params *p, const char *name) {
  const ct_param *q = ct_params_find(p, name);
  CHECK(q != NULL, "no parameter '%s'", name);
  return q;
}

static void check_shape(const ct_params *p, const char *name, int ndim,
                        const int64_t *shape) {
  const ct_param *q = find(p, name);
  if (!q) return;
  bool same = q->tensor->ndim == ndim;
  for (int i = 0; same && i < ndim; i++) same = q->tensor->shape[i] == shape[i];
  CHECK(same, "%s: wrong shape", name);
}

static void test_names_and_init(void) {
  for (int refine = 0; refine < 2; refine++) {
    ct_params p;
    ct_params_init(&p);
    ct_nn_deformable_detr m;
    ct_rng r = ct_rng_make(1, 0);
    ct_nn_ddetr_config c = tiny();
    c.box_refine = refine;
    CHECK(ct_nn_ddetr_init(&m, &p, "", &c, &r) == CT_OK, "init: %s",
          ct_last_error());
    // Two backbone levels (stages 1, 2: 4 and 8 channels), one extra.
    CHECK(m.backbone_levels == 2, "backbone levels %d", m.backbone_levels);
    check_shape(&p, "backbone.0.body.layer2.0.conv1.weight",
                CT_SHAPE(8, 4, 3, 3));
    check_shape(&p, "input_proj.0.0.weight", CT_SHAPE(32, 4, 1, 1));
    check_shape(&p, "input_proj.1.0.weight", CT_SHAPE(32, 8, 1, 1));
    check_shape(&p, "input_proj.2.0.weight", CT_SHAPE(32, 8, 3, 3));
    check_shape(&p, "input_proj.2.1.weight", CT_SHAPE(32));
    check_shape(&p, "transformer.level_embed", CT_SHAPE(3, 32));
    check_shape(&p,
                "transformer.encoder.layers.0.self_attn.sampling_offsets."
                "weight",
                CT_SHAPE(2 * 3 * 2 * 2, 32));
    check_shape(&p,
                "transformer.decoder.layers.1.cross_attn.attention_weights."
                "bias",
                CT_SHAPE(2 * 3 * 2));
    check_shape(&p, "transformer.decoder.layers.1.self_attn.in_proj_weight",
                CT_SHAPE(96, 32));
    check_shape(&p, "transformer.decoder.layers.0.norm3.weight", CT_SHAPE(32));
    check_shape(&p, "transformer.reference_points.weight", CT_SHAPE(2, 32));
    check_shape(&p, "query_embed.weight", CT_SHAPE(4, 64));
    check_shape(&p, "class_embed.0.weight", CT_SHAPE(K, 32));
    check_shape(&p, "bbox_embed.0.layers.2.weight", CT_SHAPE(4, 32));
    CHECK(ct_params_find(&p, "backbone.0.body.fc.weight") == NULL,
          "the backbone keeps an fc");
    CHECK((ct_params_find(&p, "class_embed.1.weight") != NULL) == refine,
          "box_refine %d: one head per layer is %s", refine,
          refine ? "missing" : "present");
    // Init: prior 0.01, zero box layer with -2 on the sides of head 0,
    // GroupNorm 1/0, reference_points bias 0, MSDeformAttn's zero weights.
    const float *cb = ct_f32(find(&p, "class_embed.0.bias")->tensor);
    CHECK(fabs(cb[0] - -log(99.0)) < 1e-6 && cb[1] == cb[0],
          "class bias %g, want %g", (double)cb[0], -log(99.0));
    const float *bb = ct_f32(find(&p, "bbox_embed.0.layers.2.bias")->tensor);
    CHECK(bb[0] == 0 && bb[1] == 0 && bb[2] == -2 && bb[3] == -2,
          "box bias %g %g %g %g", (double)bb[0], (double)bb[1], (double)bb[2],
          (double)bb[3]);
    if (refine) {
      const float *b1 = ct_f32(find(&p, "bbox_embed.1.layers.2.bias")->tensor);
      const ct_tensor *w0 = find(&p, "bbox_embed.0.layers.0.weight")->tensor,
                      *w1 = find(&p, "bbox_embed.1.layers.0.weight")->tensor;
      CHECK(b1[2] == 0 && !memcmp(ct_f32(w0), ct_f32(w1), ct_tensor_bytes(w0)),
            "box_refine: head 1 is not head 0's copy before the -2");
    }
    CHECK(ct_f32(find(&p, "input_proj.1.1.weight")->tensor)[5] == 1.0f &&
              ct_f32(find(&p, "input_proj.1.1.bias")->tensor)[5] == 0.0f,
          "GroupNorm init");
    CHECK(find(&p, "query_embed.weight")->flags & CT_PARAM_NO_DECAY,
          "query_embed decays");
    ct_nn_ddetr_free(&m);
    ct_params_free(&p);
  }
}

static void check_outputs(const char *what, const ct_nn_detr_out *out,
                          int layers, int64_t B, int64_t N) {
  CHECK(out->layers == layers, "%s: %d layers, want %d", what, out->layers,
        layers);
  for (int l = 0; l < out->layers; l++) {
    const ct_tensor *z = out->logits[l], *b = out->boxes[l];
    CHECK(z && z->ndim == 3 && z->shape[0] == B && z->shape[1] == N &&
              z->shape[2] == K,
          "%s: logits %d shape", what, l);
    CHECK(b && b->ndim == 3 && b->shape[2] == 4, "%s: boxes %d", what, l);
    for (int64_t i = 0; b && i < b->numel; i++)
      CHECK(ct_f32(b)[i] > 0 && ct_f32(b)[i] < 1, "%s: box value %g", what,
            (double)ct_f32(b)[i]);
  }
}

// Forward (eval and training), dropout sites, a loss reaching every
// parameter, with and without aux heads and box refinement.
static void test_forward(void) {
  for (int v = 0; v < 3; v++) {
    ct_params p;
    ct_params_init(&p);
    ct_nn_deformable_detr m;
    ct_rng r = ct_rng_make(2, 0);
    ct_nn_ddetr_config c = tiny();
    c.aux_loss = v != 1;
    c.box_refine = v == 2;
    c.dropout = 0.1f;
    CHECK(ct_nn_ddetr_init(&m, &p, "", &c, &r) == CT_OK, "init: %s",
          ct_last_error());
    ct_tensor *x = ct_tensor_randn(&r, 0.0f, 1.0f, CT_SHAPE(2, 3, 16, 12));
    ct_nn_detr_out out;
    ct_nn_ctx ev = ct_nn_eval_ctx();
    CHECK(ct_nn_ddetr_forward(&m, &ev, x, &out) == CT_OK, "forward: %s",
          ct_last_error());
    check_outputs("eval", &out, c.aux_loss ? 2 : 1, 2, 4);
    // At init the box head's last layer is 0 (boxes depend on the
    // reference points only); the logits see the whole pass.
    float eval_logit = ct_f32(out.logits[out.layers - 1])[3];
    ct_nn_ctx tr = ct_nn_train_ctx(7, 3);
    CHECK(ct_nn_ddetr_forward(&m, &tr, x, &out) == CT_OK, "train: %s",
          ct_last_error());
    CHECK(tr.site == 1 * 3 + 2 * 5, "training pass took %u dropout sites",
          tr.site);
    CHECK(ct_f32(out.logits[out.layers - 1])[3] != eval_logit,
          "training and eval agree");
    // The init leaves some gradients 0 by design (the box head's last layer
    // and MSDeformAttn's offset and attention weights are 0, hiding the
    // layers before them and level_embed); off the init, every parameter
    // must get one.
    ct_rng noise = ct_rng_make(5, 1);
    for (int i = 0; i < p.n; i++) {
      ct_tensor *t = p.items[i].tensor;
      for (int64_t j = 0; j < t->numel; j++)
        ct_f32(t)[j] += 0.1f * (float)(ct_rng_next_double(&noise) - 0.5);
    }
    CHECK(ct_nn_ddetr_forward(&m, &tr, x, &out) == CT_OK, "train: %s",
          ct_last_error());
    const int counts[2] = {1, 2};
    const int32_t labels[3] = {0, 1, 1};
    const float boxes[12] = {0.3f, 0.3f, 0.2f, 0.2f, 0.6f, 0.7f,
                             0.3f, 0.2f, 0.2f, 0.8f, 0.2f, 0.3f};
    ct_nn_detr_targets tg = {
        .batch = 2, .counts = counts, .labels = labels, .boxes = boxes};
    ct_nn_detr_loss_opts lo = ct_nn_ddetr_loss_defaults();
    ct_tensor *loss = ct_nn_detr_loss(&out, out.layers, &tg, &lo, NULL);
    CHECK(loss && isfinite(ct_f32(loss)[0]) && ct_backward(loss) == CT_OK,
          "backward: %s", ct_last_error());
    int without = 0;
    for (int i = 0; i < p.n; i++) {
      if (p.items[i].flags & CT_PARAM_FROZEN) continue;
      const ct_tensor *t = p.items[i].tensor;
      double g = 0;
      for (int64_t j = 0; j < t->numel; j++) g += fabs(t->grad[j]);
      if (g == 0.0) {
        without++;
        fprintf(stderr, "  variant %d: no gradient: %s\n", v, p.items[i].name);
      }
    }
    CHECK(without == 0, "variant %d: %d parameters without gradient", v,
          without);
    ct_tensor *gray = ct_tensor_zeros(CT_F32, CT_SHAPE(2, 1, 16, 16));
    CHECK(ct_nn_ddetr_forward(&m, &ev, gray, &out) == CT_ERR_SHAPE,
          "1-channel images: %s", ct_last_error());
    ct_arena_reset();
    ct_nn_ddetr_free(&m);
    ct_params_free(&p);
  }
}

// Deformable DETR's positions: offset -0.5 (ey = (y + 0.5) / (h + eps) 2 pi).
static void test_position_offset(void) {
  ct_tensor *pos = ct_nn_position_sine_offset(3, 2, 8, -0.5);
  const double ey = (1 + 0.5) / (3 + 1e-6) * 2 * acos(-1.0);
  const double ex = (0 + 0.5) / (2 + 1e-6) * 2 * acos(-1.0);
  // Token (y 1, x 0) = row 2; channel 0 sin(ey), 1 cos(ey), 4 sin(ex),
  // 7 cos(ex / 10000^(2/4)).
  const float *row = ct_f32(pos) + 2 * 8;
  CHECK(fabs(row[0] - sin(ey)) < 1e-6 && fabs(row[1] - cos(ey)) < 1e-6 &&
            fabs(row[4] - sin(ex)) < 1e-6 &&
            fabs(row[7] - cos(ex / 100.0)) < 1e-6,
        "sine offset: %g %g %g %g", (double)row[0], (double)row[1],
        (double)row[4], (double)row[7]);
  ct_arena_reset();
}

static void test_bad_configs(void) {
  ct_nn_ddetr_config bad[5];
  const char *needles[5] = {"multiple of 32", "multiple of 32", "n_levels",
                            "n_points", "dec_layers"};
  for (int i = 0; i < 5; i++) bad[i] = tiny();
  bad[0].d_model = 48;
  bad[1].nhead = 3;
  bad[2].n_levels = 9;
  bad[3].n_points = 0;
  bad[4].dec_layers = 0;
  for (int i = 0; i < 5; i++) {
    ct_params p;
    ct_params_init(&p);
    ct_nn_deformable_detr m;
    ct_rng r = ct_rng_make(1, 0);
    CHECK(ct_nn_ddetr_init(&m, &p, "", &bad[i], &r) == CT_ERR_ARG &&
              strstr(ct_last_error(), needles[i]),
          "bad config %d: %s", i, ct_last_error());
    ct_params_free(&p);
  }
}

// The whole eval-mode forward against the PyTorch twin
// (tests/ref/gen_ddetr_fixtures.py) on its perturbed weights: every
// state_dict name loads (and ctrain registers no other), and every decoder
// layer's logits and boxes agree.
static void test_parity(const char *what, const ddetr_fixture *f) {
  const ct_nn_ddetr_config c = {.in_channels = f->C,
                                .num_classes = f->K,
                                .backbone_width = f->width,
                                .backbone_stages = f->stages,
                                .backbone_blocks = f->blocks,
                                .d_model = f->d_model,
                                .nhead = f->heads,
                                .enc_layers = f->enc_layers,
                                .dec_layers = f->dec_layers,
                                .dim_feedforward = f->ff,
                                .dropout = 0.0f,
                                .num_queries = f->queries,
                                .n_levels = f->n_levels,
                                .n_points = f->n_points,
                                .aux_loss = true,
                                .box_refine = f->box_refine};
  ct_params p;
  ct_params_init(&p);
  ct_nn_deformable_detr m;
  ct_rng r = ct_rng_make(3, 0);
  CHECK(ct_nn_ddetr_init(&m, &p, "", &c, &r) == CT_OK, "%s: init: %s", what,
        ct_last_error());
  bool loaded = parity_count(&p, what, f->n_tensors);
  for (int i = 0; i < f->n_tensors && loaded; i++)
    loaded = parity_load(&p, what, f->tensors[i].name, f->tensors[i].numel,
                         f->tensors[i].value);
  if (loaded) {
    ct_tensor *x =
        ct_tensor_from(CT_F32, f->x, CT_SHAPE(f->B, f->C, f->H, f->W));
    ct_nn_detr_out out;
    ct_nn_ctx ev = ct_nn_eval_ctx();
    CHECK(ct_nn_ddetr_forward(&m, &ev, x, &out) == CT_OK, "%s: forward: %s",
          what, ct_last_error());
    for (int l = 0; l < out.layers && l < 2; l++) {
      const double el = parity_rel_err(ct_f32(out.logits[l]), f->logits[l],
                                       out.logits[l]->numel);
      const double eb = parity_rel_err(ct_f32(out.boxes[l]), f->boxes[l],
                                       out.boxes[l]->numel);
      printf("  %s layer %d: logits rel err %.2e, boxes %.2e\n", what, l, el,
             eb);
      CHECK(el < 1e-4 && eb < 1e-4, "%s layer %d: logits %g, boxes %g", what, l,
            el, eb);
    }
  }
  ct_arena_reset();
  ct_nn_ddetr_free(&m);
  ct_params_free(&p);
}

int main(void) {
  ct_threads_from_env();
  test_names_and_init();
  test_forward();
  test_position_offset();
  test_bad_configs();
  test_parity("shared heads", &ddetr_fixture_shared);
  test_parity("box_refine", &ddetr_fixture_refine);
  ct_arena_release();
  return test_summary("deformable_detr");
}
