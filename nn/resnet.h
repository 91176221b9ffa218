// A small CIFAR-style ResNet (He et al. 2016, BasicBlock) with torchvision's
// parameter names, for image classification (a DeiT teacher) and as a
// feature extractor (a DETR backbone).
//
//   conv1 3x3 stride 1 (no bias) -> bn1 -> relu          stem, no max pool
//   layer1 .. layerS, each `blocks` BasicBlocks; stage I has width
//     width * 2^(I-1) and stage I > 1 starts with stride 2
//   global average pool -> fc (Linear to num_classes)
//
// BasicBlock "layerI.J": relu(bn2(conv2(relu(bn1(conv1(x))))) + identity),
// conv1 3x3 stride s, conv2 3x3 stride 1, both without bias; identity is x,
// or "layerI.J.downsample.0" (1x1 conv stride s, no bias) followed by
// "layerI.J.downsample.1" (BatchNorm2d) when the shape changes.
//
// Init as torchvision's ResNet: conv weights kaiming_normal(mode='fan_out',
// nonlinearity='relu'), i.e. N(0, 2 / (O k k)), redrawn after every module
// has taken its default draws; BN weight 1, bias 0; fc nn.Linear's default.
// Unlike torchvision's ImageNet stem (7x7 stride 2 and a max pool) the stem
// keeps the resolution, as for CIFAR-sized inputs.
#ifndef CT_NN_RESNET_H
#define CT_NN_RESNET_H

#include "nn/conv.h"
#include "nn/linear.h"

typedef struct ct_nn_resnet_config {
  int64_t in_channels;  // 3 for RGB, 1 for grayscale
  int64_t num_classes;  // 0: no fc (a feature extractor; no forward)
  int64_t width;        // channels of layer1 (torchvision: 64)
  int stages;           // layer1 .. layer<stages>
  int blocks;           // BasicBlocks per stage
} ct_nn_resnet_config;

typedef struct ct_nn_basic_block {
  ct_nn_conv2d conv1;     // "prefix.conv1"  3x3 stride s
  ct_nn_batchnorm2d bn1;  // "prefix.bn1"
  ct_nn_conv2d conv2;     // "prefix.conv2"  3x3 stride 1
  ct_nn_batchnorm2d bn2;  // "prefix.bn2"
  bool has_downsample;
  ct_nn_conv2d down_conv;     // "prefix.downsample.0"  1x1 stride s
  ct_nn_batchnorm2d down_bn;  // "prefix.downsample.1"
} ct_nn_basic_block;

typedef struct ct_nn_resnet {
  ct_nn_resnet_config cfg;
  ct_nn_conv2d conv1;         // "prefix.conv1"
  ct_nn_batchnorm2d bn1;      // "prefix.bn1"
  ct_nn_basic_block *blocks;  // stage-major: stages * blocks entries
  int num_blocks;
  ct_nn_linear fc;           // "prefix.fc"
  int64_t feature_channels;  // width * 2^(stages-1)
} ct_nn_resnet;

ct_status ct_nn_resnet_init(ct_nn_resnet *m, ct_params *p, const char *prefix,
                            const ct_nn_resnet_config *cfg, ct_rng *init_rng);
void ct_nn_resnet_free(ct_nn_resnet *m);

// x (N, in_channels, H, W) -> the last stage's feature map
// (N, feature_channels, h, w), h = H / 2^(stages-1) rounded up at each stage.
// BN uses batch statistics (and updates its running ones) when ctx is
// training; else the running statistics.
ct_tensor *ct_nn_resnet_features(const ct_nn_resnet *m, ct_nn_ctx *ctx,
                                 ct_tensor *x);
// The same walk, keeping every stage's output: stages[s] (s < cfg.stages) is
// layer<s+1>'s map (N, width * 2^s, h_s, w_s), the last one the features
// above. CT_OK, or the status of the failed op.
ct_status ct_nn_resnet_stage_features(const ct_nn_resnet *m, ct_nn_ctx *ctx,
                                      ct_tensor *x, ct_tensor **stages);
// x (N, in_channels, H, W) -> logits (N, num_classes)
ct_tensor *ct_nn_resnet_forward(const ct_nn_resnet *m, ct_nn_ctx *ctx,
                                ct_tensor *x);

#endif
