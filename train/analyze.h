// `ctrain analyze CKPT [--images N] [--split val|test] --out DIR`: the
// analysis figures of the ViT paper (Dosovitskiy et al. 2021, section 4.5)
// for a classification checkpoint with attention (ViT, DeiT, Swin, CvT),
// on the first N images of its validation (or test) split:
//
//   attention_distance.png   mean attention distance (pixels) of every
//                            head against depth, one dot per head and layer
//   attention_distance.csv   layer,head,distance_px (layer 1 = the first)
//   attention_distance.json  the same numbers, with the image diagonal
//   position_embedding.png   ViT/DeiT: cosine similarity of each patch's
//                            position embedding with every other patch's,
//                            a grid of small grids (tile (r, c) is patch
//                            (r, c)'s similarities, blue -1 to yellow 1)
//   position_embedding.csv   ViT/DeiT: row,col,cosine over patch pairs
//   rollout.png              the attention rollout of the first 8 images,
//                            as `classify --attention` draws it
//
// Mean attention distance: for each query token with a place (patches, not
// class tokens) the attention-weighted mean of its distance to the keys
// with a place, sum_j a_ij d_ij / sum_j a_ij (the weight on class tokens
// left out), d_ij between token centres in input pixels; averaged over the
// queries of all images, per head and layer. For Swin, the distance
// between the tokens in the image (the shifted window's roll undone; the
// -100 mask leaves pairs across its regions ~e^-100 of the weight), and a
// stage's tokens are patch * 2^stage pixels wide. For CvT (nn/cvt.h), a
// stage's map tokens lie at the centres of the cells of its h x w grid over
// the image, and a key of the stride-2 k/v map where its conv window's
// centre lies on the map; its rollout is drawn on the first stage's map.
//
// Not here: ResNets (an error names the arch), figures of hybrid models,
// choosing images by class.
#ifndef CT_TRAIN_ANALYZE_H
#define CT_TRAIN_ANALYZE_H

#include <stdio.h>

#include "nn/module.h"

// Adds one recorded layer's attention distances: sum[h] += each query's
// weighted mean distance (see above) over every image, group and query
// with a place, *queries += how many queries per head. A query whose keys
// with a place have no weight adds nothing. CT_ERR_SHAPE when the places
// do not match the weights, CT_ERR_ARG when they are missing.
ct_status ct_analyze_layer_distance(const ct_nn_attention_layer *layer,
                                    double *sum, int64_t *queries);

// The whole command: opens the checkpoint, writes the files above into
// out_dir (made when missing) and a summary to `out`. images >= 1.
ct_status ct_analyze_run(const char *ckpt, int64_t images, const char *split,
                         const char *out_dir, FILE *out);

#endif
