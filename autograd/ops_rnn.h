// Differentiable recurrences with PyTorch's GRU and LSTM cells, a whole
// sequence per op (a "scan"): the step loop, the fused gate math and
// backpropagation through time are inside the op, so a sequence costs one
// tape node instead of several per step.
//
//   gx (B,T,G*H)  the input projections x_t W_ih^T + b_ih of every step,
//                 computed beforehand by one ct_linear over all B*T rows
//   h0 (B,H)      the initial state, NULL for zeros (and c0 for the LSTM)
//   w_hh (G*H,H), b_hh (G*H) or NULL
//   -> y (B,T,H)  the state after each step; 0 at padded positions
//
// GRU, G = 3, gates r, z, n in PyTorch's order:
//   r = sigmoid(gx_r + W_hr h + b_hr)   z = sigmoid(gx_z + W_hz h + b_hz)
//   n = tanh(gx_n + r * (W_hn h + b_hn))  h' = (1 - z) * n + z * h
// LSTM, G = 4, gates i, f, g, o:
//   i, f, o = sigmoid(gx + W_h h + b_h), g = tanh(gx_g + W_hg h + b_hg)
//   c' = f * c + i * g                  h' = o * tanh(c')
//
// Lengths (packed-sequence semantics): lengths i32 (B), each in 0..T, or
// NULL for all T. Row b takes only the steps t < lengths[b]: y is 0 beyond,
// its final state is the state after its own last step, and what the
// padding positions of gx hold never changes a result or a gradient.
// reverse runs t = T-1 down to 0 (the second direction of a bidirectional
// layer), so a row starts from h0 at its last real position. The final
// states are side outputs (h_n, c_n below): tensors of their own whose
// gradients the scan's backward picks up.
//
// Work per step: one gemm h W_hh^T (+ b_hh) over the B rows and the gate
// math (vectorized sigmoid and tanh, core/vmath.h), rows split over
// threads. Backward per step: the gate derivatives and one gemm dgates
// W_hh for the previous state; after the loop dW_hh and db_hh as one gemm
// over all T*B rows. Saved for backward: the states (T+1,B,H) (and the
// LSTM's cells) and the gate activations, (T,B,4H) for the GRU (r, z, n and
// W_hn h + b_hn), (T,B,5H) for the LSTM (i, f, g, o and tanh(c')). The
// results are the same bits at any thread count.
#ifndef CT_AUTOGRAD_OPS_RNN_H
#define CT_AUTOGRAD_OPS_RNN_H

#include <stdbool.h>

#include "core/tensor.h"

typedef struct ct_rnn_scan_args {
  ct_tensor *gx;       // (B,T,G*H)
  ct_tensor *h0, *c0;  // (B,H) or NULL (zeros); c0: LSTM only
  ct_tensor *w_hh;     // (G*H,H)
  ct_tensor *b_hh;     // (G*H) or NULL
  ct_tensor *lengths;  // i32 (B) in 0..T, or NULL (every row T steps)
  bool reverse;
} ct_rnn_scan_args;

// y (B,T,H); *h_n (B,H) the final states when h_n is not NULL (and *c_n
// the LSTM's final cells). NULL with an error naming the op and shapes on
// bad arguments (or an earlier NULL input).
ct_tensor *ct_gru_scan(const ct_rnn_scan_args *a, ct_tensor **h_n);
ct_tensor *ct_lstm_scan(const ct_rnn_scan_args *a, ct_tensor **h_n,
                        ct_tensor **c_n);

// One step (the cells, PyTorch's nn.GRUCell / nn.LSTMCell after their
// input projection): gx (B,G*H), h (B,H) (NULL: zeros) -> h' (B,H); the
// LSTM also takes c and gives *c_out. Scans of one step.
ct_tensor *ct_gru_cell(ct_tensor *gx, ct_tensor *h, ct_tensor *w_hh,
                       ct_tensor *b_hh);
ct_tensor *ct_lstm_cell(ct_tensor *gx, ct_tensor *h, ct_tensor *c,
                        ct_tensor *w_hh, ct_tensor *b_hh, ct_tensor **c_out);

#endif
