// Loading named tensors read from some file into a parameter store: each
// tensor goes to the parameter of the same name, after every name and shape
// has been checked, converted to f32 on the way. Checkpoints
// (checkpoint_params.h) and safetensors (safetensors.h) both load through it.
//
//   ct_named_tensor t[] = {{.name = "fc.weight", .dtype = CT_FILE_F16,
//                           .ndim = 2, .shape = {8, 4}, .data = bytes}};
//   if (ct_params_load_named(&p, p.data, t, 1, CT_LOAD_ALLOW_MISSING,
//                            "model.safetensors") != CT_OK) ...
//
// What this file does not do: parse any file format (callers hand it tensors
// they found), or add parameters to the store (safetensors' CT_LOAD_REGISTER
// does that before calling it).
#ifndef CT_TRAIN_PARAMS_LOAD_H
#define CT_TRAIN_PARAMS_LOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "core/params.h"

// Loading options: by default every tensor in the file must match a parameter
// of the store (same name and shape) and every parameter must be in the file.
enum {
  CT_LOAD_ALLOW_MISSING = 1u << 0,     // keep parameters the file lacks as is
  CT_LOAD_ALLOW_UNEXPECTED = 1u << 1,  // ignore tensors the store lacks
  CT_LOAD_REGISTER = 1u << 2,          // safetensors: first add every tensor
                                       // of the file to the store (FROZEN)
};

// The element types a file's tensor may have; all are converted to f32.
typedef enum ct_file_dtype {
  CT_FILE_F32,
  CT_FILE_F16,
  CT_FILE_BF16,
  CT_FILE_F64,
} ct_file_dtype;

enum { CT_FILE_MAX_DIMS = 8 };

// A named tensor found in some file, to be matched against a store.
typedef struct ct_named_tensor {
  const char *name;
  ct_file_dtype dtype;
  int ndim;
  int64_t shape[CT_FILE_MAX_DIMS];
  const void *data;  // numel little-endian values of dtype (any alignment)
} ct_named_tensor;

// What a load left out: the file's tensors the store lacks (skipped under
// CT_LOAD_ALLOW_UNEXPECTED, refused otherwise) and the store's parameters
// the file lacks; each list names at most three, with shapes, then "(and N
// more)".
typedef struct ct_load_report {
  int unexpected, missing;
  char unexpected_names[600], missing_names[600];
  bool refused_unexpected;  // the load failed because of unexpected tensors
} ct_load_report;

// Copies (converting to f32) each tensor into `buf` (dst->data or one of its
// state buffers) at its parameter's offset. Names, shapes and counts are all
// checked against dst's registry first (see the CT_LOAD_* flags), and so
// is every value: a NaN or Inf (or an F64 beyond float's range) is
// CT_ERR_NUMERIC naming the tensor and element. On error the buffer is
// unchanged and the message says what differs ("... has 'fc.weight' [8, 4],
// the model expects [8, 6]"). `source` names the file in messages.
ct_status ct_params_load_named(ct_params *dst, float *buf,
                               const ct_named_tensor *t, int n, unsigned flags,
                               const char *source);
// The same, filling *report (when not NULL) whether or not it succeeds.
ct_status ct_params_load_named_reported(ct_params *dst, float *buf,
                                        const ct_named_tensor *t, int n,
                                        unsigned flags, const char *source,
                                        ct_load_report *report);

#endif
