// Weights to and from PyTorch: a parameter store saved as, or loaded from, a
// .safetensors file (the Hugging Face format that `safetensors.torch`
// save_file / load_file read and write).
//
//   // export: every parameter as an F32 tensor under its state_dict name
//   const char *meta[] = {"format", "pt", "step", "1200", NULL};
//   ct_safetensors_save("model.safetensors", &p, meta);
//
//   // init_from: fill an already-built model by name; a new head may differ
//   ct_safetensors_load("vit_small.safetensors", &p,
//                       CT_LOAD_ALLOW_MISSING | CT_LOAD_ALLOW_UNEXPECTED);
//
// Format (https://github.com/huggingface/safetensors, see safetensors.c):
// u64 little-endian N, N bytes of JSON header (space-padded to a multiple of
// 8), then the tensors' bytes, packed in data_offsets order.
//
// What this file does not do: write dtypes other than F32, or keep the file's
// __metadata__ (it is validated and ignored on load).
#ifndef CT_TRAIN_SAFETENSORS_H
#define CT_TRAIN_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "core/error.h"
#include "core/params.h"
#include "train/params_load.h"  // CT_LOAD_* flags

// The header size limit of the reference implementation.
enum { CT_SAFETENSORS_MAX_HEADER = 100000000 };

// Writes all parameters (values only) as F32 tensors, sorted by name as the
// reference writer does, atomically (see fileio.h). `metadata` is NULL
// or a NULL-terminated list of key, value strings for "__metadata__".
ct_status ct_safetensors_save(const char *path, const ct_params *p,
                              const char *const *metadata);

// Loads the tensors of a .safetensors file into dst by name. F32 is copied;
// F16, BF16 and F64 are converted to f32; other dtypes are an error naming
// the tensor. The whole file is validated first (header JSON, dtypes, offsets
// in range, packed without gaps or overlaps, no trailing bytes) and then the
// names and shapes against dst (flags: CT_LOAD_ALLOW_MISSING,
// CT_LOAD_ALLOW_UNEXPECTED); on any error dst is unchanged. With
// CT_LOAD_REGISTER, every tensor is first added to dst (which should then be
// empty) under its name and shape: the file read as it is.
ct_status ct_safetensors_load(const char *path, ct_params *dst, unsigned flags);
// The same for a file already in memory; `what` names it in messages.
ct_status ct_safetensors_load_buffer(const void *bytes, size_t len,
                                     const char *what, ct_params *dst,
                                     unsigned flags);
// ct_safetensors_load that also says what it left out (report: see
// params_load.h; filled on failure too).
ct_status ct_safetensors_load_reported(const char *path, ct_params *dst,
                                       unsigned flags, ct_load_report *report);

// Weights into a built model by name (`[model] init_from`, `ctrain forward
// --weights`): every parameter must be in the file. A tensor the model
// lacks is an error whose message ends with `how_to_skip` (the option that
// allows it), or with allow_unexpected it is skipped and a warning on `warn`
// (when not NULL) lists the skipped tensors.
ct_status ct_safetensors_load_weights(const char *path, ct_params *dst,
                                      bool allow_unexpected,
                                      const char *how_to_skip, FILE *warn);

#endif
