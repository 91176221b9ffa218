// The CIFAR-style ResNet (see resnet.h).
#include "nn/resnet.h"

#include "autograd/ops_conv.h"
#include "autograd/ops.h"
#include "nn/init.h"

#include <math.h>
#include <stdlib.h>

// torchvision: nn.init.kaiming_normal_(w, mode='fan_out',
// nonlinearity='relu'): N(0, gain^2 / fan_out), gain sqrt(2).
static ct_status init_kaiming_normal_fan_out(ct_tensor *w, ct_rng *rng) {
  int64_t fan_in, fan_out;
  ct_status st = ct_nn_init_fans(w, &fan_in, &fan_out);
  if (st != CT_OK) return st;
  return ct_nn_init_normal(w, rng, 0.0f, (float)sqrt(2.0 / (double)fan_out));
}

// A conv without bias followed by its BatchNorm2d, named "prefix.<conv>" and
// "prefix.<bn>".
static ct_status conv_bn_init(ct_nn_conv2d *conv, ct_nn_batchnorm2d *bn,
                              ct_params *p, const char *prefix,
                              const char *conv_leaf, const char *bn_leaf,
                              int64_t in, int64_t out, int kernel, int stride,
                              ct_rng *rng) {
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "%s", conv_leaf);
  if (st == CT_OK)
    st = ct_nn_conv2d_init(conv, p, name, in, out, kernel, stride, kernel / 2,
                           false, rng);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "%s", bn_leaf);
  if (st == CT_OK) st = ct_nn_batchnorm2d_init(bn, p, name, out);
  return st;
}

static ct_status basic_block_init(ct_nn_basic_block *b, ct_params *p,
                                  const char *prefix, int64_t in, int64_t out,
                                  int stride, ct_rng *rng) {
  *b = (ct_nn_basic_block){.has_downsample = stride != 1 || in != out};
  ct_status st = conv_bn_init(&b->conv1, &b->bn1, p, prefix, "conv1", "bn1", in,
                              out, 3, stride, rng);
  if (st == CT_OK)
    st = conv_bn_init(&b->conv2, &b->bn2, p, prefix, "conv2", "bn2", out, out,
                      3, 1, rng);
  if (st == CT_OK && b->has_downsample)
    st = conv_bn_init(&b->down_conv, &b->down_bn, p, prefix, "downsample.0",
                      "downsample.1", in, out, 1, stride, rng);
  return st;
}

// x (N,in,H,W) -> (N,out,Ho,Wo)
static ct_tensor *basic_block_forward(const ct_nn_basic_block *b,
                                      ct_nn_ctx *ctx, ct_tensor *x) {
  ct_tensor *h = ct_relu(ct_nn_batchnorm2d_forward(
      &b->bn1, ctx, ct_nn_conv2d_forward(&b->conv1, x)));
  h = ct_nn_batchnorm2d_forward(&b->bn2, ctx,
                                ct_nn_conv2d_forward(&b->conv2, h));
  ct_tensor *identity =
      b->has_downsample
          ? ct_nn_batchnorm2d_forward(&b->down_bn, ctx,
                                      ct_nn_conv2d_forward(&b->down_conv, x))
          : x;
  return ct_relu(ct_add(h, identity));
}

ct_status ct_nn_resnet_init(ct_nn_resnet *m, ct_params *p, const char *prefix,
                            const ct_nn_resnet_config *cfg, ct_rng *init_rng) {
  *m = (ct_nn_resnet){.cfg = *cfg};
  if (cfg->in_channels < 1 || cfg->num_classes < 0 || cfg->width < 1 ||
      cfg->stages < 1 || cfg->stages > 16 || cfg->blocks < 1)
    return ct_error(CT_ERR_ARG,
                    "resnet '%s': in_channels %lld, width %lld, blocks %d must "
                    "be >= 1, num_classes %lld >= 0 and stages %d in 1..16",
                    prefix, (long long)cfg->in_channels, (long long)cfg->width,
                    cfg->blocks, (long long)cfg->num_classes, cfg->stages);
  m->num_blocks = cfg->stages * cfg->blocks;
  m->blocks = calloc((size_t)m->num_blocks, sizeof *m->blocks);
  if (!m->blocks)
    return ct_error(CT_ERR_NOMEM, "resnet '%s': out of memory", prefix);
  const int first = p->n;  // the registry entries this model adds

  ct_status st = conv_bn_init(&m->conv1, &m->bn1, p, prefix, "conv1", "bn1",
                              cfg->in_channels, cfg->width, 3, 1, init_rng);
  int64_t channels = cfg->width;
  char name[CT_NN_NAME_MAX];
  for (int s = 0; s < cfg->stages && st == CT_OK; s++) {
    const int64_t out = cfg->width << s;
    for (int j = 0; j < cfg->blocks && st == CT_OK; j++) {
      st = ct_nn_name(name, prefix, "layer%d.%d", s + 1, j);
      if (st == CT_OK)
        st = basic_block_init(&m->blocks[s * cfg->blocks + j], p, name,
                              channels, out, s > 0 && j == 0 ? 2 : 1, init_rng);
      channels = out;
    }
  }
  m->feature_channels = channels;
  if (st == CT_OK && cfg->num_classes > 0) st = ct_nn_name(name, prefix, "fc");
  if (st == CT_OK && cfg->num_classes > 0)
    st = ct_nn_linear_init(&m->fc, p, name, channels, cfg->num_classes, true,
                           init_rng);
  // torchvision's ResNet.__init__ loop over self.modules(): every Conv2d
  // weight (the 4-D parameters) redrawn kaiming_normal fan_out.
  for (int i = first; i < p->n && st == CT_OK; i++)
    if (p->items[i].tensor->ndim == 4)
      st = init_kaiming_normal_fan_out(p->items[i].tensor, init_rng);
  if (st != CT_OK) ct_nn_resnet_free(m);
  return st;
}

void ct_nn_resnet_free(ct_nn_resnet *m) {
  free(m->blocks);
  *m = (ct_nn_resnet){0};
}

// x (N,Cin,H,W) -> (N, feature_channels, h, w)
ct_tensor *ct_nn_resnet_features(const ct_nn_resnet *m, ct_nn_ctx *ctx,
                                 ct_tensor *x) {
  ct_tensor *h = ct_relu(ct_nn_batchnorm2d_forward(
      &m->bn1, ctx, ct_nn_conv2d_forward(&m->conv1, x)));
  for (int i = 0; i < m->num_blocks; i++)
    h = basic_block_forward(&m->blocks[i], ctx, h);
  return h;
}

ct_status ct_nn_resnet_stage_features(const ct_nn_resnet *m, ct_nn_ctx *ctx,
                                      ct_tensor *x, ct_tensor **stages) {
  ct_tensor *h = ct_relu(ct_nn_batchnorm2d_forward(
      &m->bn1, ctx, ct_nn_conv2d_forward(&m->conv1, x)));
  for (int i = 0; i < m->num_blocks; i++) {
    h = basic_block_forward(&m->blocks[i], ctx, h);
    if ((i + 1) % m->cfg.blocks == 0) stages[i / m->cfg.blocks] = h;
  }
  if (h) return CT_OK;
  return ct_last_status() != CT_OK
             ? ct_last_status()
             : ct_error(CT_ERR_STATE, "resnet: stage features failed");
}

// x (N,Cin,H,W) -> (N,K)
ct_tensor *ct_nn_resnet_forward(const ct_nn_resnet *m, ct_nn_ctx *ctx,
                                ct_tensor *x) {
  if (!m->fc.weight) {
    ct_error(CT_ERR_STATE,
             "resnet: built with num_classes 0 (no fc): use its features");
    return NULL;
  }
  return ct_nn_linear_forward(
      &m->fc, ct_global_avg_pool2d(ct_nn_resnet_features(m, ctx, x)));
}
