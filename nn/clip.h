// CLIP (Radford et al. 2021): an image tower and a text tower projected to
// a joint width E, trained with a symmetric contrastive loss, laid out as
// open_clip's CLIP module with its parameter names; tests/ref/clip_ref.py
// holds the PyTorch twin.
//
//   image: the classification task's ViT (nn/vit.h: the class token's final
//          LayerNorm output, what feeds its head) or ResNet (nn/resnet.h: the
//          globally pooled features, what feeds fc), under "visual.", then
//          visual.proj (width, E), no bias: f_img = x @ visual.proj
//   text:  x = token_embedding[tokens] + positional_embedding[:T']
//          per block N ("transformer.resblocks.N", pre-LN, causal mask):
//            x = x + attn(ln_1(x)),  x = x + mlp(ln_2(x))
//          mlp = c_proj(GELU(c_fc(.))) (exact GELU, open_clip's default)
//          f_txt = ln_final(x[b, eot[b]]) @ text_projection  (W, E), no bias
//   both outputs L2-normalized per row (x / max(|x|, 1e-12), F.normalize).
//
// Parameter names (W text_width, T context_length, V vocab):
//   logit_scale (1), s: logits = exp(s) I T^T; init ln(1/0.07), NO_DECAY
//   visual.* (the ViT's/ResNet's names; its head/fc is not registered),
//   visual.proj (width, E)
//   token_embedding.weight (V, W), positional_embedding (T, W)
//   transformer.resblocks.N.ln_1.*, .attn.in_proj_weight (3W, W),
//     .attn.in_proj_bias (3W), .attn.out_proj.*, .ln_2.*, .mlp.c_fc.*,
//     .mlp.c_proj.*
//   ln_final.*, text_projection (W, E)
// Init as open_clip's init_parameters: token_embedding N(0, .02),
// positional_embedding N(0, .01); per block attn_std = W^-.5, proj_std =
// W^-.5 (2 layers)^-.5, fc_std = (2W)^-.5: in_proj_weight N(0, attn_std),
// out_proj.weight N(0, proj_std), c_fc.weight N(0, fc_std), c_proj.weight
// N(0, proj_std); attention biases 0 (nn.MultiheadAttention's), MLP biases
// nn.Linear's default; text_projection N(0, W^-.5); visual.proj
// N(0, width^-.5) (open_clip's VisionTransformer scale); LayerNorm 1/0.
// LayerNorm eps: the text tower uses 1e-5 (PyTorch's nn.LayerNorm); the
// ViT keeps timm's 1e-6. logit_scale is 0-dim (open_clip's torch.ones([])).
// Weight decay (CT_PARAM_NO_DECAY, nn/module.h's rule): never on
// logit_scale, biases, norms, token_embedding and positional_embedding;
// visual.proj, text_projection and the blocks' matrices decay.
//
// Loss, with img (Bi, E), txt (Bt, E) normalized, exp(s) the temperature:
//   L = ( CE(exp(s) img txt_all^T, offset + i)          (image -> text)
//       + CE(exp(s) txt img_all^T, offset + i) ) / 2    (text -> image)
// CE the mean over rows of -log softmax at the target. With img_all = img,
// txt_all = txt and offset 0 this is open_clip's ClipLoss on one process.
//
// What this file does not do: attention pooling (CoCa), custom text masks
// beyond causal, QuickGELU (the OpenAI checkpoints' activation).
#ifndef CT_NN_CLIP_H
#define CT_NN_CLIP_H

#include "nn/resnet.h"
#include "nn/vit.h"

typedef enum { CT_NN_CLIP_VIT, CT_NN_CLIP_RESNET } ct_nn_clip_image_arch;

typedef struct ct_nn_clip_config {
  ct_nn_clip_image_arch image_arch;
  ct_nn_vit_config vit;  // image_arch == VIT (its classification head unused)
  ct_nn_resnet_config resnet;  // image_arch == RESNET (fc unused)
  int64_t embed_dim;           // joint width E
  int64_t vocab;               // text vocabulary with specials (0 = padding)
  int64_t context_length;  // T, longest token row (positional_embedding rows)
  int64_t text_width, text_layers, text_heads, text_mlp;  // text tower
} ct_nn_clip_config;

typedef struct ct_nn_clip ct_nn_clip;

// Checks the config (CT_ERR_ARG naming the field) and registers the
// parameters under `prefix` ("" for the bare open_clip names) in p, drawn
// from init_rng. *out is malloc'd; free with ct_nn_clip_free.
ct_status ct_nn_clip_init(ct_nn_clip **out, ct_params *p, const char *prefix,
                          const ct_nn_clip_config *cfg, ct_rng *init_rng);
void ct_nn_clip_free(ct_nn_clip *m);
const ct_nn_clip_config *ct_nn_clip_cfg(const ct_nn_clip *m);

// images (B,C,H,W) -> (B,E), L2-normalized rows (visual.* then visual.proj)
ct_tensor *ct_nn_clip_encode_image(const ct_nn_clip *m, ct_nn_ctx *ctx,
                                   ct_tensor *images);
// tokens (B,T') i32, T' <= context_length, padded with 0; eot[b] the
// position of the end-of-text token of row b -> (B,E), L2-normalized
// (causal mask, features at eot, ln_final, text_projection)
ct_tensor *ct_nn_clip_encode_text(const ct_nn_clip *m, ct_nn_ctx *ctx,
                                  ct_tensor *tokens, const int64_t *eot);
// The 1-element parameter s.
ct_tensor *ct_nn_clip_logit_scale(const ct_nn_clip *m);

// Contrastive loss on normalized features: logits = exp(s) img txt^T (Bi x
// Bt), loss = (CE(rows, targets) + CE(columns, targets)) / 2 where the
// positive of image row i is text column offset + i. Plain 1-process use:
// img_all/txt_all are img/txt, offset 0. MPI: img (local rows) against
// txt_all (the gathered texts) and txt (local) against img_all (open_clip
// local_loss semantics), so each rank sees the global negatives. A scalar
// on the tape; gradients reach img, txt, img_all, txt_all and logit_scale.
ct_tensor *ct_nn_clip_loss(ct_tensor *img, ct_tensor *txt, ct_tensor *img_all,
                           ct_tensor *txt_all, int64_t offset,
                           ct_tensor *logit_scale);

// After every optimizer step: s = clamp(s, 0, ln 100).
void ct_nn_clip_clamp_scale(ct_nn_clip *m);

#endif
