// Experiment configs: INI files checked against a schema the program supplies.
//
// A config file has sections and `key = value` lines:
//
//   # comments start with # or ; (also after a value, preceded by a space)
//   [optim]
//   learning_rate = 3e-4
//   name = adamw            ; an enum: one of the schema's choices
//   [run]
//   name = "wmt small"      ; double quotes are optional (\" and \\ inside)
//
// Every key the program reads is declared in a schema (section, key, type,
// default, doc), so a misspelled key or a bad value is an error with the file,
// line and key, never silently ignored; so is an integer outside its key's
// range (checked as it is read, so no value is ever cut to fit). Text must
// be UTF-8 without control characters (tabs aside); lines end in "\n",
// "\r\n" or "\r". `--set section.key=value` overrides
// go through the same checks. The resolved config (every key, final value,
// doc as comment) is what a run records, and what resume compares against.
//
//   static const ct_config_key schema[] = {
//     {"train", "steps", CT_CONFIG_INT, "1000", "1..1000000", "steps"},
//     {"optim", "name", CT_CONFIG_ENUM, "adamw", "adam|adamw|sgd", "optimizer"},
//   };
//   ct_config *cfg = ct_config_new(schema, 2);
//   if (!cfg || ct_config_load(cfg, path) || ct_config_set(cfg, "train.steps=50"))
//     fprintf(stderr, "ctrain: error: %s\n", ct_last_error());
//   int64_t steps = ct_config_int(cfg, "train", "steps");
//
// Not here: nested sections, includes, environment expansion, multi-line values.
#ifndef CT_TRAIN_CONFIG_H
#define CT_TRAIN_CONFIG_H

#include "core/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum ct_config_type {
  CT_CONFIG_STRING,
  CT_CONFIG_INT,    // int64, decimal, within the key's range
  CT_CONFIG_FLOAT,  // double, finite
  CT_CONFIG_BOOL,   // true/false, yes/no, on/off, 1/0
  CT_CONFIG_ENUM,   // one of `choices`
} ct_config_type;

// One schema entry. All strings must outlive the config (static tables).
typedef struct ct_config_key {
  const char *section;
  const char *key;
  ct_config_type type;
  const char
      *def;  // default, written as in a config file ("" allowed for strings)
  // The values allowed: CT_CONFIG_ENUM, the choices separated by '|';
  // CT_CONFIG_INT, the range "min..max" (NULL: 0..2147483647, so that no
  // value is cut when it is used as an int); NULL for the other types.
  const char *choices;
  const char *doc;  // one line, written as a comment in the resolved config
} ct_config_key;

typedef struct ct_config ct_config;

// A config holding every schema key at its default. Checks the schema itself
// (duplicate keys, defaults that do not parse). NULL with an error on failure.
ct_config *ct_config_new(const ct_config_key *schema, int n_keys);
void ct_config_free(ct_config *cfg);

// The most bytes a config file may hold (ctrain's resolved configs take
// about 10 kB).
enum { CT_CONFIG_MAX_BYTES = 1 << 20 };

// Reads an INI file over the current values. Errors name "path:line". On
// error the config may hold part of the file; callers stop there.
ct_status ct_config_load(ct_config *cfg, const char *path);
// The same from text in memory; `name` stands for the file in messages
// (e.g. "checkpoint config").
ct_status ct_config_parse(ct_config *cfg, const char *text, const char *name);
// Applies one override "section.key=value" (the argument of --set). Errors
// name the override: "--set train.steps=ten: [train] steps = 'ten': ...".
ct_status ct_config_set(ct_config *cfg, const char *assignment);
// Changes the default of one key: sets `value` when the key still holds its
// schema default (origin "default"), and leaves values from a file or --set
// alone. For defaults that depend on other keys (a task's recipe).
ct_status ct_config_set_default(ct_config *cfg, const char *section,
                                const char *key, const char *value);

// Checks that the integer keys {section, key} of `keys` are all >= min
// (0 or 1); the first that is not is CT_ERR_ARG "[section] key = v: must
// not be negative" (min 0) or "... must be at least 1" (min 1).
ct_status ct_config_check_min(const ct_config *cfg,
                              const char *const (*keys)[2], size_t n,
                              int64_t min);

// A CT_CONFIG_STRING key holding a list of integers separated by commas
// (spaces around them allowed), e.g. "2, 2, 6, 2": at most `max` of them,
// each at least 1, into out[0..*n). An empty or malformed list is
// CT_ERR_ARG naming the key, its value and where it came from.
ct_status ct_config_int_list(const ct_config *cfg, const char *section,
                             const char *key, int64_t *out, int max, int *n);
// The same with each number at least `min` (0 for a list of paddings).
ct_status ct_config_int_list_min(const ct_config *cfg, const char *section,
                                 const char *key, int64_t min, int64_t *out,
                                 int max, int *n);

// Typed getters. Asking for a key that is not in the schema, or with the wrong
// type, is a bug in the caller: it records a CT_ERR_ARG error and returns
// 0 / false / NULL.
int64_t ct_config_int(const ct_config *cfg, const char *section,
                      const char *key);
double ct_config_float(const ct_config *cfg, const char *section,
                       const char *key);
bool ct_config_bool(const ct_config *cfg, const char *section, const char *key);
// CT_CONFIG_STRING or CT_CONFIG_ENUM values.
const char *ct_config_str(const ct_config *cfg, const char *section,
                          const char *key);
// CT_CONFIG_ENUM: the index of the value among the choices (0-based), -1 on error.
int ct_config_enum(const ct_config *cfg, const char *section, const char *key);
// Any type: the value as it would be written in a config file.
const char *ct_config_text(const ct_config *cfg, const char *section,
                           const char *key);
// Where the value came from: "default", "path:line" or "--set".
const char *ct_config_origin(const ct_config *cfg, const char *section,
                             const char *key);

// The resolved config as INI text (malloc'd; NULL on allocation failure):
// every schema key grouped by section, with its doc line as a comment.
// Parsing it back with the same schema gives an equal config.
char *ct_config_to_string(const ct_config *cfg);
// Writes ct_config_to_string atomically to `path`.
ct_status ct_config_write(const ct_config *cfg, const char *path);

// Compares two configs with the same schema on `keys` ("section.key"; NULL
// and n_keys = 0 means every schema key), by typed value (3e-4 equals 0.0003).
// Returns the index of the first key that differs (into `keys`, or into the
// schema when keys is NULL), or -1 when all are equal. When one differs it
// also records a CT_ERR_STATE message naming the key and both values:
// "[model] d_model differs: 512 vs 256". Returns -2 on a bad key (CT_ERR_ARG).
int ct_config_diff(const ct_config *a, const ct_config *b,
                   const char *const *keys, int n_keys);

#endif
