// Transformer layers and stacks as PyTorch's nn.TransformerEncoderLayer,
// nn.TransformerDecoderLayer, nn.TransformerEncoder/Decoder and
// nn.Transformer (batch_first layout), with their parameter names:
//
//   encoder layer: self_attn.{in_proj_weight,in_proj_bias,out_proj.*},
//                  linear1.*, linear2.*, norm1.*, norm2.*
//   decoder layer: the same plus multihead_attn.* (cross-attention), norm3.*
//   stacks:        layers.N.*, and norm.* for the optional final norm
//   transformer:   encoder.*, decoder.* (both with final norms)
//
// Post-norm (norm_first = false: the paper's and PyTorch's default), per
// sublayer f:  x = norm(x + dropout(f(x))).
// Pre-norm (norm_first = true):  x = x + dropout(f(norm(x))).
// The feed-forward f is linear2(dropout(activation(linear1(x)))).
// Dropout sites per pass, in order: encoder layer: attention weights,
// dropout1, feed-forward, dropout2; the decoder layer adds the cross
// attention's weights and dropout2 before the feed-forward (its dropout3).
#ifndef CT_NN_TRANSFORMER_H
#define CT_NN_TRANSFORMER_H

#include "nn/multihead_attention.h"
#include "nn/norm.h"

typedef struct ct_nn_transformer_config {
  int64_t d_model, nhead, dim_feedforward;
  float dropout;  // every dropout of the layer
  ct_nn_activation activation;
  float layer_norm_eps;
  bool norm_first;
} ct_nn_transformer_config;

// PyTorch's defaults: dim_feedforward 2048, dropout 0.1, relu, eps 1e-5,
// post-norm.
ct_nn_transformer_config ct_nn_transformer_defaults(int64_t d_model,
                                                    int64_t nhead);

typedef struct ct_nn_encoder_layer {
  ct_nn_mha self_attn;
  ct_nn_linear linear1, linear2;  // d_model -> ff -> d_model
  ct_nn_layernorm norm1, norm2;
  ct_nn_transformer_config cfg;
} ct_nn_encoder_layer;

typedef struct ct_nn_decoder_layer {
  ct_nn_mha self_attn, multihead_attn;
  ct_nn_linear linear1, linear2;
  ct_nn_layernorm norm1, norm2, norm3;
  ct_nn_transformer_config cfg;
} ct_nn_decoder_layer;

ct_status ct_nn_encoder_layer_init(ct_nn_encoder_layer *l, ct_params *p,
                                   const char *prefix,
                                   const ct_nn_transformer_config *cfg,
                                   ct_rng *init_rng);
ct_status ct_nn_decoder_layer_init(ct_nn_decoder_layer *l, ct_params *p,
                                   const char *prefix,
                                   const ct_nn_transformer_config *cfg,
                                   ct_rng *init_rng);

// src (B,T,E) -> (B,T,E); src_masks for self-attention (NULL = none).
ct_tensor *ct_nn_encoder_layer_forward(const ct_nn_encoder_layer *l,
                                       ct_nn_ctx *ctx, ct_tensor *src,
                                       const ct_nn_attn_masks *src_masks);
// tgt (B,Tq,E), memory (B,Tk,E) -> (B,Tq,E); tgt_masks for self-attention
// (tgt_mask, tgt_key_padding_mask, causal), memory_masks for the
// cross-attention (memory_mask, memory_key_padding_mask).
ct_tensor *ct_nn_decoder_layer_forward(const ct_nn_decoder_layer *l,
                                       ct_nn_ctx *ctx, ct_tensor *tgt,
                                       ct_tensor *memory,
                                       const ct_nn_attn_masks *tgt_masks,
                                       const ct_nn_attn_masks *memory_masks);

typedef struct ct_nn_encoder {
  ct_nn_encoder_layer *layers;  // "prefix.layers.N.*"
  int num_layers;
  bool has_norm;
  ct_nn_layernorm norm;  // "prefix.norm.*" when has_norm
} ct_nn_encoder;

typedef struct ct_nn_decoder {
  ct_nn_decoder_layer *layers;
  int num_layers;
  bool has_norm;
  ct_nn_layernorm norm;
} ct_nn_decoder;

// final_norm: a LayerNorm after the last layer (nn.TransformerEncoder's
// `norm`; nn.Transformer always has one). _free releases the layer array.
ct_status ct_nn_encoder_init(ct_nn_encoder *e, ct_params *p, const char *prefix,
                             const ct_nn_transformer_config *cfg,
                             int num_layers, bool final_norm, ct_rng *init_rng);
void ct_nn_encoder_free(ct_nn_encoder *e);
ct_status ct_nn_decoder_init(ct_nn_decoder *d, ct_params *p, const char *prefix,
                             const ct_nn_transformer_config *cfg,
                             int num_layers, bool final_norm, ct_rng *init_rng);
void ct_nn_decoder_free(ct_nn_decoder *d);

// src (B,T,E) -> (B,T,E)
ct_tensor *ct_nn_encoder_forward(const ct_nn_encoder *e, ct_nn_ctx *ctx,
                                 ct_tensor *src,
                                 const ct_nn_attn_masks *src_masks);
// tgt (B,Tq,E), memory (B,Tk,E) -> (B,Tq,E)
ct_tensor *ct_nn_decoder_forward(const ct_nn_decoder *d, ct_nn_ctx *ctx,
                                 ct_tensor *tgt, ct_tensor *memory,
                                 const ct_nn_attn_masks *tgt_masks,
                                 const ct_nn_attn_masks *memory_masks);

// nn.Transformer: an encoder and a decoder, both with final norms. Like
// PyTorch's _reset_parameters, init redraws every parameter of 2 or more
// dims under `prefix` xavier_uniform, walking the store's registry.
typedef struct ct_nn_transformer {
  ct_nn_encoder encoder;  // "prefix.encoder.*"
  ct_nn_decoder decoder;  // "prefix.decoder.*"
} ct_nn_transformer;

ct_status ct_nn_transformer_init(ct_nn_transformer *t, ct_params *p,
                                 const char *prefix,
                                 const ct_nn_transformer_config *cfg,
                                 int num_encoder_layers, int num_decoder_layers,
                                 ct_rng *init_rng);
void ct_nn_transformer_free(ct_nn_transformer *t);

// src (B,Tk,E), tgt (B,Tq,E) -> (B,Tq,E). memory_masks apply to the decoder's
// cross-attention (memory_key_padding_mask is usually src's padding).
ct_tensor *ct_nn_transformer_forward(const ct_nn_transformer *t, ct_nn_ctx *ctx,
                                     ct_tensor *src, ct_tensor *tgt,
                                     const ct_nn_attn_masks *src_masks,
                                     const ct_nn_attn_masks *tgt_masks,
                                     const ct_nn_attn_masks *memory_masks);

#endif
