// The config schema of `ctrain train`: every section and key a config file
// may hold, with its type, default and one-line doc (README.md lists them).
#ifndef CT_TRAIN_SCHEMA_H
#define CT_TRAIN_SCHEMA_H

#include "train/config.h"

// A config holding the defaults of every key.
ct_config *ct_train_config_new(void);

// The keys that fix the model's shape (and its vocabularies): a checkpoint
// may only be resumed, evaluated or used with a config that agrees on them.
extern const char *const ct_model_shape_keys[];
extern const int ct_model_shape_key_count;

#endif
