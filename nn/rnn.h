// nn.GRU and nn.LSTM: multi-layer, optionally bidirectional recurrent layers
// with PyTorch's semantics, parameter names and initialization.
//
//   x (B,T,I) with batch_first, else (T,B,I); lengths i32 (B) or NULL
//   h0 (L*D,B,H) or NULL (zeros); c0 the same for the LSTM
//   -> output (B,T,D*H) (or (T,B,D*H)), *h_n (L*D,B,H), *c_n (L*D,B,H)
//
// L layers, D = 2 directions when bidirectional, else 1; row l*D + d of the
// states is layer l, direction d, as PyTorch stacks them. The output holds
// the last layer's states, forward then backward direction along the last
// dim. Dropout (training only) is applied to every layer's output but the
// last's, one site per layer (nn/module.h).
//
// lengths gives packed-sequence semantics (PyTorch's pack_padded_sequence
// with enforce_sorted=False, then pad_packed_sequence): row b's steps past
// lengths[b] are skipped, its output there is 0, the reverse direction
// starts at position lengths[b]-1, h_n is the state after the row's own last
// step, and what x holds at padded positions never matters.
//
// Parameters, per layer k and direction (suffix "" or "_reverse"), in
// PyTorch's registration order, G = 3 (GRU gates r, z, n) or 4 (LSTM i, f,
// g, o): weight_ih_l{k}{suffix} (G*H, I_k), weight_hh_l{k}{suffix} (G*H, H),
// bias_ih_l{k}{suffix} (G*H), bias_hh_l{k}{suffix} (G*H); I_0 = I, later
// layers D*H. All drawn U(-1/sqrt(H), 1/sqrt(H)) in that order, as
// reset_parameters does; biases are NO_DECAY.
//
// Each layer and direction is one gemm over all B*T input rows (the input
// projection) and one scan (autograd/ops_rnn.h).
#ifndef CT_NN_RNN_H
#define CT_NN_RNN_H

#include "nn/module.h"

typedef enum ct_nn_rnn_kind { CT_NN_RNN_GRU, CT_NN_RNN_LSTM } ct_nn_rnn_kind;

typedef struct ct_nn_rnn_config {
  int64_t input_size, hidden_size;
  int num_layers;      // >= 1
  bool bias;           // b_ih and b_hh (PyTorch's default: true)
  bool batch_first;    // x and output (B,T,.), else (T,B,.)
  bool bidirectional;  // D = 2
  float dropout;       // between layers, in [0, 1)
} ct_nn_rnn_config;

// PyTorch's defaults: one layer, biases, (T,B,.) layout, one direction, no
// dropout.
ct_nn_rnn_config ct_nn_rnn_defaults(int64_t input_size, int64_t hidden_size);

// The weights of one layer and direction.
typedef struct ct_nn_rnn_cell {
  ct_tensor *w_ih, *w_hh;  // (G*H, I_k), (G*H, H)
  ct_tensor *b_ih, *b_hh;  // (G*H), or NULL without biases
} ct_nn_rnn_cell;

typedef struct ct_nn_rnn {
  ct_nn_rnn_kind kind;
  ct_nn_rnn_config cfg;
  ct_nn_rnn_cell *cells;  // [layer * D + direction], malloc'd
} ct_nn_rnn;

typedef ct_nn_rnn ct_nn_gru;
typedef ct_nn_rnn ct_nn_lstm;

ct_status ct_nn_gru_init(ct_nn_gru *m, ct_params *p, const char *prefix,
                         const ct_nn_rnn_config *cfg, ct_rng *init_rng);
ct_status ct_nn_lstm_init(ct_nn_lstm *m, ct_params *p, const char *prefix,
                          const ct_nn_rnn_config *cfg, ct_rng *init_rng);
void ct_nn_rnn_free(ct_nn_rnn *m);

// See the top of this file; h_n and c_n may be NULL when not wanted.
ct_tensor *ct_nn_gru_forward(const ct_nn_gru *m, ct_nn_ctx *ctx, ct_tensor *x,
                             ct_tensor *lengths, ct_tensor *h0,
                             ct_tensor **h_n);
ct_tensor *ct_nn_lstm_forward(const ct_nn_lstm *m, ct_nn_ctx *ctx, ct_tensor *x,
                              ct_tensor *lengths, ct_tensor *h0, ct_tensor *c0,
                              ct_tensor **h_n, ct_tensor **c_n);

#endif
