// ctrain: a small deep-learning training framework in C.
//
// A worked example: fit y = 2x + 1 with one linear layer.
//
//   #include <ctrain.h>
//
//   ct_params p;
//   ct_params_init(&p);
//   ct_tensor *w = ct_params_add(&p, "fc.weight", CT_SHAPE(1, 1), 0);
//   ct_tensor *b = ct_params_add(&p, "fc.bias", CT_SHAPE(1), CT_PARAM_NO_DECAY);
//   const float xs[4] = {0, 1, 2, 3}, ys[4] = {1, 3, 5, 7};
//   for (int step = 0; step < 200; step++) {
//     ct_tensor *x = ct_tensor_from(CT_F32, xs, CT_SHAPE(4, 1));   // arena
//     ct_tensor *y = ct_tensor_from(CT_F32, ys, CT_SHAPE(4, 1));
//     ct_tensor *loss = ct_mse(ct_linear(x, w, b), y);  // records the tape
//     if (!loss) { fprintf(stderr, "%s\n", ct_last_error()); break; }
//     ct_params_zero_grad(&p);
//     ct_backward(loss);                      // grads land in p.grad
//     for (size_t i = 0; i < p.count; i++)    // SGD: one loop, one buffer
//       p.data[i] -= 0.05f * p.grad[i];
//     ct_arena_reset();                       // frees activations and tape
//   }
//   ct_params_free(&p);
//
// The arena, the tape and the gemm settings used above belong to the calling
// thread's session (core/session.h); a program with one thread never names
// one, and each thread of a program with several binds its own.
//
// The pieces, one header each:
//   core/error.h            status codes and ct_last_error()
//   core/tensor.h           f32/i32 tensors up to 5 dims, views, creation
//   core/session.h          a session per thread: arena, tape, gemm settings
//   core/arena.h            the per-step bump allocator
//   core/params.h           parameters, grads, optimizer state in flat buffers
//   core/rng.h              Philox4x32-10 keyed random numbers
//   core/threads.h          thread count (results never depend on it)
//   core/gemm.h             matrix multiply kernels
//   core/gemm_bf16.h        matrix multiply with bf16 inputs (AMX, AVX512-BF16)
//   core/attention_kernel.h fused attention kernels
//   autograd/tape.h         recording, backward, no-grad scopes
//   autograd/ops.h          the differentiable ops
//   autograd/ops_attention.h  the differentiable fused attention
//   autograd/ops_conv.h     conv2d, batch norm, pooling (NCHW)
//   autograd/ops_box.h      box conversions, GIoU, row gather (detection)
//   autograd/ops_window.h   roll, windows, patch merging, bias gather (Swin)
//   autograd/ops_deform_attn.h  multi-scale deformable attention (Deformable DETR)
//   autograd/gradcheck.h    finite-difference gradient checks
//   optim/optim.h           SGD, Adam, AdamW over a whole parameter store
//   optim/schedule.h        learning-rate schedules (pure functions of step)
//   optim/grads.h           gradient norm, clipping, the non-finite check
//   optim/grad_accum.h      accumulation in a fixed summation tree
//   nn/module.h             the module convention, forward context, dropout
//   nn/init.h               initializers (xavier, kaiming, trunc_normal, ...)
//   nn/linear.h nn/embedding.h nn/norm.h nn/mlp.h   basic modules
//   nn/multihead_attention.h  MultiheadAttention with PyTorch semantics
//   nn/transformer.h        encoder/decoder layers and stacks, nn.Transformer
//   nn/position.h           sinusoidal and learned positional encodings
//   nn/conv.h               Conv2d and BatchNorm2d modules
//   nn/resnet.h             a CIFAR-style ResNet with torchvision's names
//   nn/timm.h               timm's Linear init, drop path, patch embedding
//   nn/vit.h                ViT and DeiT (timm names), attention rollout
//   nn/swin.h               Swin: shifted-window blocks, patch merging
//   nn/cvt.h                CvT: convolutional token embedding and projections
//   nn/distill.h            soft-target CE and DeiT's distillation losses
//   nn/hungarian.h          linear sum assignment, DETR's Hungarian matcher
//   nn/detr.h               DETR: backbone, transformer, heads, the set loss
//   nn/deform_attn.h        MSDeformAttn, Deformable DETR's attention module
//   data/text.h             parallel corpora (two files or TSV, gzip or plain)
//   data/tokenizer.h        UTF-8 word/punctuation tokenizer and detokenizer
//   data/vocab.h            vocabularies with <pad> <unk> <bos> <eos>
//   data/bpe.h              byte-pair encoding: learn, apply, merges.txt
//   data/text_tokenizer.h   word, bpe or char tokens behind one API
//   data/batch.h            length-bucketed, padded, resumable text batches
//   data/stride.h           strided reading for data-parallel ranks
//   data/toy_translation.h  built-in toy corpora (copy, reverse, grammar)
//   data/image.h            image datasets, normalized/augmented batches
//   data/idx.h data/cifar.h data/png_folder.h   image file formats
//   data/detection.h        detection sets: boxes, generated shapes, COCO
//   data/json.h             a strict JSON reader (and its string writer)
#ifndef CTRAIN_H
#define CTRAIN_H

#include "core/error.h"
#include "core/tensor.h"
#include "core/session.h"
#include "core/arena.h"
#include "core/params.h"
#include "core/rng.h"
#include "core/threads.h"
#include "core/gemm.h"
#include "core/gemm_bf16.h"
#include "core/attention_kernel.h"
#include "core/flops.h"
#include "core/profile.h"
#include "autograd/tape.h"
#include "autograd/ops.h"
#include "autograd/ops_attention.h"
#include "autograd/ops_conv.h"
#include "autograd/gradcheck.h"
#include "autograd/ops_box.h"
#include "autograd/ops_window.h"
#include "autograd/ops_deform_attn.h"
#include "nn/module.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/embedding.h"
#include "nn/norm.h"
#include "nn/mlp.h"
#include "nn/multihead_attention.h"
#include "nn/transformer.h"
#include "nn/position.h"
#include "nn/conv.h"
#include "nn/resnet.h"
#include "nn/timm.h"
#include "nn/vit.h"
#include "nn/swin.h"
#include "nn/cvt.h"
#include "nn/distill.h"
#include "nn/hungarian.h"
#include "nn/detr.h"
#include "nn/deform_attn.h"
#include "optim/optim.h"
#include "optim/schedule.h"
#include "optim/grads.h"
#include "optim/grad_accum.h"
#include "data/strings.h"
#include "data/text.h"
#include "data/tokenizer.h"
#include "data/vocab.h"
#include "data/bpe.h"
#include "data/text_tokenizer.h"
#include "data/batch.h"
#include "data/stride.h"
#include "data/toy_translation.h"
#include "data/image.h"
#include "data/image_augment.h"
#include "data/idx.h"
#include "data/cifar.h"
#include "data/png_folder.h"
#include "data/toy_images.h"
#include "data/json.h"
#include "data/detection.h"

#endif
