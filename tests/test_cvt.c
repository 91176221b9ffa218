// CvT (nn/cvt.c) against the PyTorch twin of tests/ref/gen_cvt_fixtures.py,
// written after the reference code (microsoft/CvT): a two-stage classifier
// (a stage without and one with the class token), in the paper's dw_bn
// projection and in the linear ablation. Within 1e-5 relative: the logits
// of a training-mode pass (BatchNorm on batch statistics), the gradients of
// the images and of every parameter, the BatchNorm running statistics after
// the pass, and the logits of an eval-mode pass after it. The tensors are
// registered in the reference's state_dict order under its names. Also: the
// same bits at 1 and 2 threads, weight-decay flags, and config errors.
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/threads.h"
#include "nn/cvt.h"
#include "tests/parity_util.h"
#include "tests/ref/cvt_fixtures.h"

#include <stdlib.h>

static ct_nn_cvt_config fixture_config(const cvt_fixture *f) {
  ct_nn_cvt_config c = {
      .image_h = f->image,
      .image_w = f->image,
      .in_channels = f->in_channels,
      .stages = 2,
      .mlp_ratio = (float)f->mlp_ratio,
      .cls_token = f->cls_token,
      .projection = f->linear ? CT_NN_CVT_LINEAR : CT_NN_CVT_DW_BN,
      .stride_q = 1,
      .stride_kv = 2,
      .qkv_bias = f->qkv_bias,
      .act = f->quick_gelu ? CT_NN_QUICK_GELU : CT_NN_GELU,
      .scale = f->head_scale ? CT_NN_CVT_SCALE_HEAD : CT_NN_CVT_SCALE_DIM,
      .num_classes = f->classes};
  for (int i = 0; i < 2; i++) {
    c.embed_kernel[i] = f->kernel[i];
    c.embed_stride[i] = f->stride[i];
    c.embed_padding[i] = f->padding[i];
    c.dims[i] = f->dims[i];
    c.depths[i] = f->depths[i];
    c.heads[i] = f->heads[i];
  }
  return c;
}

// Builds the model with the fixture's tensors and runs a training-mode
// forward and backward at the current thread count. Returns the logits
// (arena) or NULL; *x_out the images.
static ct_tensor *run(const cvt_fixture *f, ct_params *p, ct_nn_cvt *m,
                      ct_tensor **x_out) {
  ct_params_init(p);
  ct_rng rng = ct_rng_make(1, 0);
  ct_nn_cvt_config c = fixture_config(f);
  ct_status st = ct_nn_cvt_init(m, p, "", &c, &rng);
  CHECK(st == CT_OK, "init: %s", ct_last_error());
  if (st != CT_OK || !parity_count(p, "cvt", f->n_tensors)) return NULL;
  for (int i = 0; i < f->n_tensors; i++)
    if (!parity_load(p, "cvt", f->tensors[i].name, f->tensors[i].numel,
                     f->tensors[i].value))
      return NULL;
  ct_tensor *x = ct_requires_grad(ct_tensor_from(
      CT_F32, f->x, CT_SHAPE(f->B, f->in_channels, f->image, f->image)));
  ct_nn_ctx ctx = ct_nn_train_ctx(5, 0);  // no dropout in the config
  ct_tensor *out = ct_nn_cvt_forward(m, &ctx, x);
  ct_tensor *loss = parity_contract(out, f->r);
  CHECK(loss != NULL, "forward: %s", ct_last_error());
  if (!loss) return NULL;
  ct_params_zero_grad(p);
  st = ct_backward(loss);
  CHECK(st == CT_OK, "backward: %s", ct_last_error());
  *x_out = x;
  return st == CT_OK ? out : NULL;
}

// The largest |gradient| of the fixture's tensors.
static double grad_scale(const cvt_fixture *f) {
  double s = 0.0;
  for (int i = 0; i < f->n_tensors; i++)
    for (int64_t j = 0; j < f->tensors[i].numel; j++)
      s = fmax(s, fabs(f->tensors[i].grad[j]));
  return s;
}

// The relative error of a gradient. The gradients of k's biases (proj_k's
// and conv_proj_k.bn's) are 0 up to rounding: adding a constant to every
// key adds a per-query constant to the scores, which softmax ignores. Where
// the reference's gradient is that small (below 1e-9 of the model's
// largest), the error is measured against the model's largest gradient.
static double grad_err(const float *got, const double *want, int64_t n,
                       double scale) {
  double diff = 0.0, own = 0.0;
  for (int64_t i = 0; i < n; i++) {
    diff = fmax(diff, fabs((double)got[i] - want[i]));
    own = fmax(own, fabs(want[i]));
  }
  return diff / fmax(own > 1e-9 * scale ? own : scale, 1e-30);
}

static void test_parity(const char *what, const cvt_fixture *f) {
  ct_params p;
  ct_nn_cvt m;
  ct_tensor *x = NULL;
  ct_tensor *out = run(f, &p, &m, &x);
  if (out) {
    CHECK(
        out->ndim == 2 && out->shape[0] == f->B && out->shape[1] == f->classes,
        "%s: logits shape", what);
    double e_out = parity_rel_err(ct_f32(out), f->out, out->numel);
    double e_x = parity_rel_err(x->grad, f->grad_x, x->numel);
    CHECK(e_out <= 1e-5, "%s logits: rel err %.2e", what, e_out);
    CHECK(e_x <= 1e-5, "%s image grad: rel err %.2e", what, e_x);
    const double scale = grad_scale(f);
    double worst_grad = 0.0, worst_after = 0.0;
    const char *worst_name = "";
    int bad_order = -1;
    for (int i = 0; i < f->n_tensors; i++) {
      const cvt_fixture_tensor *ft = &f->tensors[i];
      if (bad_order < 0 && strcmp(p.items[i].name, ft->name)) bad_order = i;
      const ct_tensor *t = ct_params_find(&p, ft->name)->tensor;
      double eg = grad_err(t->grad, ft->grad, t->numel, scale);
      double ea = parity_rel_err(ct_f32(t), ft->after, t->numel);
      CHECK(eg <= 1e-5, "%s %s grad: rel err %.2e", what, ft->name, eg);
      CHECK(ea <= 1e-5, "%s %s after the pass: rel err %.2e", what, ft->name,
            ea);
      if (eg >= worst_grad) {
        worst_grad = eg;
        worst_name = ft->name;
      }
      if (ea > worst_after) worst_after = ea;
    }
    CHECK(bad_order < 0, "%s: tensor %d is '%s', the reference has '%s'", what,
          bad_order, bad_order < 0 ? "" : p.items[bad_order].name,
          bad_order < 0 ? "" : f->tensors[bad_order].name);
    // Eval mode on the updated running statistics.
    ct_tensor *xe = ct_tensor_from(
        CT_F32, f->x, CT_SHAPE(f->B, f->in_channels, f->image, f->image));
    ct_tensor *eval = ct_nn_cvt_forward(&m, NULL, xe);
    CHECK(eval != NULL, "%s eval: %s", what, ct_last_error());
    double e_eval =
        eval ? parity_rel_err(ct_f32(eval), f->eval_out, eval->numel) : 1.0;
    CHECK(e_eval <= 1e-5, "%s eval logits: rel err %.2e", what, e_eval);
    printf(
        "  cvt %s: logits %.1e  grad x %.1e  param %.1e (%s)  running "
        "stats %.1e  eval %.1e\n",
        what, e_out, e_x, worst_grad, worst_name, worst_after, e_eval);
  }
  ct_nn_cvt_free(&m);
  ct_params_free(&p);
  ct_arena_reset();
}

// Logits, the images' gradient, and every tensor and gradient of the store
// (running statistics included) bit-identical at 1 and 2 threads.
static void test_threads(void) {
  const int saved = ct_get_threads();
  float *base[2] = {NULL, NULL};
  int64_t n[2] = {0, 0};
  for (int t = 1; t <= 2; t++) {
    ct_set_threads(t);
    ct_params p;
    ct_nn_cvt m;
    ct_tensor *x = NULL;
    ct_tensor *out = run(&cvt_fixture_dw_bn, &p, &m, &x);
    if (out) {
      const int64_t total =
          out->numel + x->numel + 2 * (int64_t)ct_params_numel(&p);
      float *buf = malloc((size_t)total * sizeof(float));
      int64_t k = 0;
      for (int64_t i = 0; i < out->numel; i++) buf[k++] = ct_f32(out)[i];
      for (int64_t i = 0; i < x->numel; i++) buf[k++] = x->grad[i];
      for (int i = 0; i < p.n; i++)
        for (int64_t j = 0; j < p.items[i].tensor->numel; j++) {
          buf[k++] = p.items[i].tensor->grad[j];
          buf[k++] = ct_f32(p.items[i].tensor)[j];
        }
      base[t - 1] = buf;
      n[t - 1] = k;
    }
    ct_nn_cvt_free(&m);
    ct_params_free(&p);
    ct_arena_reset();
  }
  CHECK(base[0] && base[1] && n[0] == n[1] &&
            !memcmp(base[0], base[1], (size_t)n[0] * sizeof(float)),
        "1 and 2 threads give different bits");
  free(base[0]);
  free(base[1]);
  ct_set_threads(saved);
}

static unsigned flags_of(const ct_params *p, const char *name) {
  const ct_param *t = ct_params_find(p, name);
  CHECK(t != NULL, "no parameter '%s'", name);
  return t ? t->flags : ~0u;
}

static void test_flags_and_errors(void) {
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(2, 0);
  ct_nn_cvt m;
  ct_nn_cvt_config c = fixture_config(&cvt_fixture_dw_bn);
  CHECK(ct_nn_cvt_init(&m, &p, "", &c, &rng) == CT_OK, "init: %s",
        ct_last_error());
  CHECK(flags_of(&p, "stage1.cls_token") == CT_PARAM_NO_DECAY,
        "cls_token: no decay");
  CHECK(flags_of(&p, "stage0.blocks.0.attn.conv_proj_k.bn.running_var") ==
            (CT_PARAM_FROZEN | CT_PARAM_NO_DECAY),
        "running_var: frozen");
  CHECK(flags_of(&p, "stage0.blocks.0.attn.proj_q.weight") == 0,
        "proj_q.weight decays");
  CHECK(flags_of(&p, "stage0.blocks.0.attn.proj_q.bias") == CT_PARAM_NO_DECAY,
        "proj_q.bias: no decay");
  // The depthwise kernels: PyTorch's Conv2d init with fan_in 9.
  parity_check_range(
      ct_params_find(&p, "stage0.blocks.0.attn.conv_proj_q.conv.weight")
          ->tensor,
      -1.0 / 3.0, 1.0 / 3.0);
  CHECK(m.stages[0].h == 6 && m.stages[1].h == 3 && m.stages[1].w == 3,
        "maps %lldx%lld, %lldx%lld", (long long)m.stages[0].h,
        (long long)m.stages[0].w, (long long)m.stages[1].h,
        (long long)m.stages[1].w);
  CHECK(fabsf(m.stages[1].blocks[0].scale - 1.0f / sqrtf(12.0f)) < 1e-7f,
        "the reference's scale: dim ** -0.5");
  // A shape the model does not take.
  ct_tensor *bad = ct_tensor_zeros(CT_F32, CT_SHAPE(2, 3, 12, 11));
  CHECK(ct_nn_cvt_forward(&m, NULL, bad) == NULL &&
            strstr(ct_last_error(), "expected images"),
        "wrong image size: %s", ct_last_error());
  ct_nn_cvt_free(&m);
  ct_params_free(&p);

  const char *const what[3] = {"heads", "map", "stages"};
  const char *const needle[3] = {"multiple of the heads", "does not fit",
                                 "stages"};
  for (int i = 0; i < 3; i++) {
    ct_nn_cvt_config e = fixture_config(&cvt_fixture_dw_bn);
    if (i == 0) e.heads[1] = 5;         // 12 % 5
    if (i == 1) e.embed_kernel[1] = 9;  // 6 + 2 < 9
    if (i == 2) e.stages = 0;
    ct_params_init(&p);
    ct_status st = ct_nn_cvt_init(&m, &p, "", &e, &rng);
    CHECK(st == CT_ERR_ARG && strstr(ct_last_error(), needle[i]), "%s: %s",
          what[i], ct_last_error());
    ct_nn_cvt_free(&m);
    ct_params_free(&p);
  }
  ct_arena_reset();
}

int main(void) {
  test_parity("dw_bn", &cvt_fixture_dw_bn);
  test_parity("linear", &cvt_fixture_linear);
  test_threads();
  test_flags_and_errors();
  ct_arena_release();
  return test_summary("cvt");
}
