// Image augmentation (see image_augment.h): per-image crop, flip and
// RandAugment on u8 (C,H,W); per-batch mixup/cutmix on f32 (B,C,H,W).
#include "data/image_augment.h"

#include <math.h>
#include <string.h>

static inline uint8_t clip_u8(float v) {
  v = floorf(v + 0.5f);
  return v <= 0.f ? 0 : v >= 255.f ? 255 : (uint8_t)v;
}

// ITU-R 601-2 luma as PIL's convert("L") computes it (16-bit fixed point).
static inline uint8_t luma(uint8_t r, uint8_t g, uint8_t b) {
  return (uint8_t)((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
}

// The gray value of pixel p: its luma for RGB, the channel itself otherwise.
static inline uint8_t gray_at(const uint8_t *img, int C, int64_t plane,
                              int64_t p) {
  if (C == 3) return luma(img[p], img[plane + p], img[2 * plane + p]);
  return img[p];
}

// dst = blend(degenerate, src, f) = deg + f * (src - deg), PIL's
// ImageEnhance; deg_image NULL: the constant deg_value.
static void blend(const uint8_t *src, uint8_t *dst, int64_t n, float f,
                  const uint8_t *deg_image, float deg_value) {
  for (int64_t i = 0; i < n; i++) {
    float d = deg_image ? deg_image[i] : deg_value;
    dst[i] = clip_u8(d + f * ((float)src[i] - d));
  }
}

// Nearest-pixel affine warp, PIL's Image.transform(AFFINE) convention:
// output pixel (x, y) samples input (a x' + b y' + c, d x' + e y' + f) at
// pixel centres x' = x + 0.5, y' = y + 0.5; outside the input: fill.
static void affine_nearest(const uint8_t *src, uint8_t *dst, int C, int H,
                           int W, const float m[6], const uint8_t *fill) {
  int64_t plane = (int64_t)H * W;
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) {
      float xf = (float)x + 0.5f, yf = (float)y + 0.5f;
      float sx = floorf(m[0] * xf + m[1] * yf + m[2]);
      float sy = floorf(m[3] * xf + m[4] * yf + m[5]);
      bool in = sx >= 0 && sx < (float)W && sy >= 0 && sy < (float)H;
      int64_t p = (int64_t)y * W + x,
              q = in ? (int64_t)sy * W + (int64_t)sx : 0;
      for (int c = 0; c < C; c++)
        dst[c * plane + p] = in ? src[c * plane + q] : fill[c];
    }
}

void ct_randaug_apply(ct_randaug_op op, float m, int sign, const uint8_t *src,
                      uint8_t *dst, int C, int H, int W, const uint8_t *fill) {
  int64_t plane = (int64_t)H * W, n = plane * C;
  float level = m / 10.f;                           // timm's level / 10
  float factor = 1.f + (float)sign * level * 0.9f;  // enhance: [0.1, 1.9]
  switch (op) {
  case CT_RANDAUG_AUTOCONTRAST:
    // Per channel, stretch [lo, hi] to [0, 255] (PIL ImageOps.autocontrast).
    for (int c = 0; c < C; c++) {
      const uint8_t *s = src + c * plane;
      uint8_t *d = dst + c * plane, lo = 255, hi = 0;
      for (int64_t i = 0; i < plane; i++) {
        lo = s[i] < lo ? s[i] : lo;
        hi = s[i] > hi ? s[i] : hi;
      }
      if (hi <= lo) {
        memcpy(d, s, (size_t)plane);
        continue;
      }
      float scale = 255.f / (float)(hi - lo), offset = -(float)lo * scale;
      for (int64_t i = 0; i < plane; i++) {
        float v = (float)s[i] * scale + offset;
        d[i] = v <= 0.f ? 0 : v >= 255.f ? 255 : (uint8_t)v;
      }
    }
    return;
  case CT_RANDAUG_BRIGHTNESS: blend(src, dst, n, factor, NULL, 0.f); return;
  case CT_RANDAUG_CONTRAST: {
    // Degenerate: the mean gray level, rounded (PIL ImageEnhance.Contrast).
    uint64_t sum = 0;
    for (int64_t p = 0; p < plane; p++) sum += gray_at(src, C, plane, p);
    float mean = floorf((float)((double)sum / (double)plane) + 0.5f);
    blend(src, dst, n, factor, NULL, mean);
    return;
  }
  case CT_RANDAUG_COLOR:
    // Degenerate: the gray image (saturation); nothing to do in gray.
    if (C != 3) break;
    for (int64_t p = 0; p < plane; p++) {
      float g = gray_at(src, C, plane, p);
      for (int c = 0; c < 3; c++)
        dst[c * plane + p] =
            clip_u8(g + factor * ((float)src[c * plane + p] - g));
    }
    return;
  case CT_RANDAUG_SOLARIZE: {
    int thresh = 256 - (int)(level * 256.f);  // timm solarize_increasing
    for (int64_t i = 0; i < n; i++)
      dst[i] = src[i] >= thresh ? (uint8_t)(255 - src[i]) : src[i];
    return;
  }
  case CT_RANDAUG_POSTERIZE: {
    int bits = 8 - (int)(level * 4.f);  // keep 8 .. 4 bits
    uint8_t mask = (uint8_t)(0xFFu << (8 - bits));
    for (int64_t i = 0; i < n; i++) dst[i] = src[i] & mask;
    return;
  }
  case CT_RANDAUG_TRANSLATE_X:
  case CT_RANDAUG_TRANSLATE_Y: {
    // timm translate_rel: up to 0.45 of the image size.
    bool x = op == CT_RANDAUG_TRANSLATE_X;
    float t = (float)sign * level * 0.45f * (float)(x ? W : H);
    float mat[6] = {1, 0, x ? t : 0, 0, 1, x ? 0 : t};
    affine_nearest(src, dst, C, H, W, mat, fill);
    return;
  }
  case CT_RANDAUG_SHEAR_X:
  case CT_RANDAUG_SHEAR_Y: {
    float s = (float)sign * level * 0.3f;  // timm: shear up to 0.3
    bool x = op == CT_RANDAUG_SHEAR_X;
    float mat[6] = {1, x ? s : 0, 0, x ? 0 : s, 1, 0};
    affine_nearest(src, dst, C, H, W, mat, fill);
    return;
  }
  case CT_RANDAUG_IDENTITY:
  case CT_RANDAUG_OP_COUNT: break;
  }
  memcpy(dst, src, (size_t)n);
}

// A standard normal draw (Box-Muller, two doubles).
static double draw_normal(ct_rng *rng) {
  double u1 = 1.0 - ct_rng_next_double(rng);  // (0, 1]
  double u2 = ct_rng_next_double(rng);
  return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}

void ct_image_augment(const ct_image_aug *a, ct_rng *rng, const uint8_t *src,
                      uint8_t *dst, uint8_t *tmp, int C, int H, int W,
                      const uint8_t *fill) {
  int64_t plane = (int64_t)H * W;
  int pad = a->crop_padding > 0 ? a->crop_padding : 0;
  int dy = 0, dx = 0;
  bool flip = false;
  if (pad) {
    dy = (int)ct_rng_next_below(rng, (uint64_t)(2 * pad + 1)) - pad;
    dx = (int)ct_rng_next_below(rng, (uint64_t)(2 * pad + 1)) - pad;
  }
  if (a->hflip) flip = ct_rng_next_u32(rng) >> 31;
  // Crop then flip: out(y, x) = padded(y + dy, x' + dx), x' = W-1-x if flip.
  for (int c = 0; c < C; c++)
    for (int y = 0; y < H; y++) {
      int sy = y + dy;
      uint8_t *d = dst + c * plane + (int64_t)y * W;
      if (sy < 0 || sy >= H) {
        memset(d, fill[c], (size_t)W);
        continue;
      }
      const uint8_t *s = src + c * plane + (int64_t)sy * W;
      for (int x = 0; x < W; x++) {
        int sx = (flip ? W - 1 - x : x) + dx;
        d[x] = sx >= 0 && sx < W ? s[sx] : fill[c];
      }
    }
  uint8_t *cur = dst, *other = tmp;
  for (int k = 0; k < a->randaug_ops; k++) {
    ct_randaug_op op =
        (ct_randaug_op)ct_rng_next_below(rng, CT_RANDAUG_OP_COUNT);
    float m = a->randaug_magnitude;
    if (a->randaug_magnitude_std > 0)
      m += a->randaug_magnitude_std * (float)draw_normal(rng);
    m = m < 0.f ? 0.f : m > 10.f ? 10.f : m;
    int sign = (ct_rng_next_u32(rng) >> 31) ? -1 : 1;
    ct_randaug_apply(op, m, sign, cur, other, C, H, W, fill);
    uint8_t *t = cur;
    cur = other;
    other = t;
  }
  if (cur != dst) memcpy(dst, cur, (size_t)(plane * C));
}

// Gamma(alpha, 1), alpha > 0: Marsaglia & Tsang (2000), boosted by
// U^(1/alpha) when alpha < 1.
static double draw_gamma(ct_rng *rng, double alpha) {
  double boost = 1.0;
  if (alpha < 1.0) {
    boost = pow(1.0 - ct_rng_next_double(rng), 1.0 / alpha);
    alpha += 1.0;
  }
  double d = alpha - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
  for (;;) {
    double x = draw_normal(rng), v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    double u = 1.0 - ct_rng_next_double(rng);
    if (u < 1.0 - 0.0331 * x * x * x * x ||
        log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
      return d * v * boost;
  }
}

// Beta(alpha, alpha) = X / (X + Y) with X, Y ~ Gamma(alpha).
static double draw_beta(ct_rng *rng, double alpha) {
  double x = draw_gamma(rng, alpha), y = draw_gamma(rng, alpha);
  return x + y > 0 ? x / (x + y) : 0.5;
}

float ct_image_mix_batch(const ct_image_aug *a, ct_rng *rng, float *images,
                         const int32_t *labels, float *targets, int64_t B,
                         int C, int H, int W, int K, bool *cutmix) {
  double lam = 1.0;
  bool use_cutmix = false;
  bool mixup_on = a->mixup_alpha > 0, cutmix_on = a->cutmix_alpha > 0;
  if ((mixup_on || cutmix_on) && ct_rng_next_double(rng) < a->mix_prob) {
    use_cutmix =
        cutmix_on && (!mixup_on || ct_rng_next_double(rng) < a->switch_prob);
    lam = draw_beta(rng, use_cutmix ? a->cutmix_alpha : a->mixup_alpha);
  }
  int64_t plane = (int64_t)H * W, img = plane * C;
  if (lam < 1.0 && !use_cutmix) {
    // x_i' = lam x_i + (1 - lam) x_{B-1-i}: pairs updated together.
    float l = (float)lam, r = (float)(1.0 - lam);
    for (int64_t i = 0; i < B / 2; i++) {
      float *xa = images + i * img, *xb = images + (B - 1 - i) * img;
      for (int64_t e = 0; e < img; e++) {
        float va = xa[e], vb = xb[e];
        xa[e] = va * l + vb * r;
        xb[e] = vb * l + va * r;
      }
    }
  } else if (lam < 1.0) {
    // timm rand_bbox: a box of side ratio sqrt(1 - lam) centred uniformly,
    // clipped to the image; lam becomes the area kept.
    double cut = sqrt(1.0 - lam);
    int ch = (int)(H * cut), cw = (int)(W * cut);
    int cy = (int)ct_rng_next_below(rng, (uint64_t)H);
    int cx = (int)ct_rng_next_below(rng, (uint64_t)W);
    int y0 = cy - ch / 2 < 0 ? 0 : cy - ch / 2;
    int y1 = cy + ch / 2 > H ? H : cy + ch / 2;
    int x0 = cx - cw / 2 < 0 ? 0 : cx - cw / 2;
    int x1 = cx + cw / 2 > W ? W : cx + cw / 2;
    for (int64_t i = 0; i < B / 2; i++) {
      float *xa = images + i * img, *xb = images + (B - 1 - i) * img;
      for (int c = 0; c < C; c++)
        for (int y = y0; y < y1; y++)
          for (int x = x0; x < x1; x++) {
            int64_t e = c * plane + (int64_t)y * W + x;
            float t = xa[e];
            xa[e] = xb[e];
            xb[e] = t;
          }
    }
    lam = 1.0 - (double)(y1 - y0) * (x1 - x0) / (double)plane;
  }
  float off = a->label_smoothing / (float)K;
  float on = 1.f - a->label_smoothing + off;
  float l = (float)lam, r = (float)(1.0 - lam);
  for (int64_t i = 0; i < B; i++) {
    float *t = targets + i * K;
    for (int k = 0; k < K; k++) t[k] = off;
    t[labels[i]] += l * (on - off);
    t[labels[B - 1 - i]] += r * (on - off);
  }
  if (cutmix) *cutmix = use_cutmix && lam < 1.0;
  return l;
}

double ct_aug_strength(const ct_aug_schedule *s, double run_epochs,
                       double progress) {
  double share = 1.0, ramp = 1.0;
  if (s->full_epochs > 0) {
    share = (run_epochs - s->off_epochs) / (s->full_epochs - s->off_epochs);
    share = share < 0.0 ? 0.0 : share > 1.0 ? 1.0 : share;
  }
  if (s->ramp > 0 && progress < s->ramp)
    ramp = progress <= 0.0 ? 0.0 : progress / s->ramp;
  return share * ramp;
}

ct_image_aug ct_image_aug_at_strength(const ct_image_aug *a, double s) {
  ct_image_aug out = *a;
  if (!(s < 1.0)) return out;
  if (!(s > 0.0)) s = 0.0;
  out.randaug_ops = s > 0.0 ? a->randaug_ops : 0;
  out.randaug_magnitude = (float)(s * a->randaug_magnitude);
  out.randaug_magnitude_std = (float)(s * a->randaug_magnitude_std);
  out.mix_prob = (float)(s * a->mix_prob);
  return out;
}
