// Parameter stores in checkpoints: a section holding every parameter's name,
// shape and f32 values, or one slot of the optimizer state laid out the same
// way, and loading such a section back by name.
//
//   ct_ckpt_put_params(w, "params", &p);
//   ct_ckpt_put_param_state(w, "optim.exp_avg", &p, CT_OPTIM_SLOT_EXP_AVG);
//   ...
//   ct_ckpt_get_params(c, "params", &p, 0);  // fails, changing nothing, when
//                                            // names or shapes disagree
//
// A params section lists each parameter in registry order:
//   u32 tensor count, then per tensor: str name, u32 dtype (0 = f32),
//   u32 ndim, i64 x ndim shape, bytes (numel little-endian f32 values)
// (fields as record.h encodes them). An optimizer state section has the same
// layout, holding slot `slot` of the state buffers (which are laid out like
// the values).
//
// What this file does not do: the name and shape matching itself
// (params_load.h, shared with safetensors), or decide which sections a run
// saves (run.c).
#ifndef CT_TRAIN_CHECKPOINT_PARAMS_H
#define CT_TRAIN_CHECKPOINT_PARAMS_H

#include "core/error.h"
#include "core/params.h"
#include "train/checkpoint.h"
#include "train/params_load.h"  // CT_LOAD_* flags

ct_status ct_ckpt_put_params(ct_ckpt_writer *w, const char *section,
                             const ct_params *p);
// Loads values by name into an already-built store (flags: CT_LOAD_*). Names,
// shapes and counts are all checked first: on error the store is unchanged
// and the message says what differs ("... has 'fc.weight' [8, 4], the model
// expects [8, 6]").
ct_status ct_ckpt_get_params(const ct_ckpt *c, const char *section,
                             ct_params *dst, unsigned flags);
// The same for optimizer state slot `slot`. Saving a slot that was never
// allocated is a CT_ERR_STATE error; loading allocates it.
ct_status ct_ckpt_put_param_state(ct_ckpt_writer *w, const char *section,
                                  const ct_params *p, int slot);
ct_status ct_ckpt_get_param_state(const ct_ckpt *c, const char *section,
                                  ct_params *dst, int slot, unsigned flags);

#endif
