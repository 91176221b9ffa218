// The enum keys of the training schema against their value lists
// (train/schema.h): every enum key has a list, its choices are the list's
// texts in order, each choice reads back as its own value, and the lower
// layers' names for those values (optimizer, schedule, toy task, tokenizer,
// task) are the same texts.
#include "tests/harness.h"
#include "train/schema.h"
#include "train/task.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_VALUES = 12 };

typedef struct value_list {
  const char *section, *key;
  const char *choices;  // as the schema's choices are made
  const char *const *names;
  const int *values;
  int n;
} value_list;

#define LIST(section, key, X)                                        \
  {                                                                  \
    section, key, CT_SCHEMA_CHOICES(X),                              \
        (const char *const[]){X(CT_SCHEMA_NAME)},                    \
        (const int[]){X(CT_SCHEMA_VALUE)},                           \
        (int)(sizeof(const int[]){X(CT_SCHEMA_VALUE)} / sizeof(int)) \
  }

static const value_list lists[] = {
    LIST("run", "task", CT_RUN_TASKS),
    LIST("data", "source", CT_DATA_SOURCES),
    LIST("data", "toy_task", CT_TOY_TASKS),
    LIST("data", "format", CT_TEXT_FORMATS),
    LIST("data", "tokenizer", CT_TOKENIZERS),
    LIST("data", "src_tokenizer", CT_SIDE_TOKENIZERS),
    LIST("data", "tgt_tokenizer", CT_SIDE_TOKENIZERS),
    LIST("data", "image_format", CT_IMAGE_FORMATS),
    LIST("data", "toy_items", CT_TOY_ITEMS),
    LIST("model", "arch", CT_MODEL_ARCHS),
    LIST("model", "activation", CT_ACTIVATIONS),
    LIST("model", "cvt_projection", CT_CVT_PROJECTIONS),
    LIST("model", "cvt_scale", CT_CVT_SCALES),
    LIST("model", "cvt_activation", CT_CVT_ACTIVATIONS),
    LIST("optim", "optimizer", CT_OPTIMIZERS),
    LIST("schedule", "kind", CT_SCHEDULE_KINDS),
    LIST("train", "distillation", CT_DISTILLATIONS),
    LIST("train", "distill_kl", CT_DISTILL_KLS),
    LIST("train", "precision", CT_PRECISIONS),
};
enum { N_LISTS = sizeof lists / sizeof lists[0] };

static const value_list *find_list(const char *section, const char *key) {
  for (int i = 0; i < N_LISTS; i++)
    if (!strcmp(lists[i].section, section) && !strcmp(lists[i].key, key))
      return &lists[i];
  return NULL;
}

// Every enum key of the schema has a list whose texts are its choices.
static void test_every_enum_key_has_a_list(void) {
  int n_keys, enums = 0;
  const ct_config_key *schema = ct_train_schema(&n_keys);
  for (int i = 0; i < n_keys; i++) {
    const ct_config_key *k = &schema[i];
    if (k->type != CT_CONFIG_ENUM) continue;
    enums++;
    const value_list *l = find_list(k->section, k->key);
    CHECK(l != NULL,
          "[%s] %s is an enum key without a value list in "
          "train/schema.h",
          k->section, k->key);
    if (!l) continue;
    CHECK(!strcmp(k->choices, l->choices), "[%s] %s: choices '%s', list '%s'",
          k->section, k->key, k->choices, l->choices);
  }
  CHECK(enums == N_LISTS, "%d enum keys in the schema, %d lists here", enums,
        N_LISTS);
}

// Setting each text gives its index, whose list value the readers take.
static void test_each_choice_reads_back(void) {
  ct_config *cfg = ct_train_config_new();
  CHECK(cfg != NULL, "config: %s", ct_last_error());
  for (int i = 0; cfg && i < N_LISTS; i++) {
    const value_list *l = &lists[i];
    CHECK(l->n >= 2 && l->n <= MAX_VALUES, "[%s] %s: %d values", l->section,
          l->key, l->n);
    for (int v = 0; v < l->n; v++) {
      char set[128];
      snprintf(set, sizeof set, "%s.%s=%s", l->section, l->key, l->names[v]);
      CHECK(ct_config_set(cfg, set) == CT_OK, "%s: %s", set, ct_last_error());
      CHECK(ct_schema_enum_index(cfg, l->section, l->key) == v,
            "%s reads back as index %d", set,
            ct_schema_enum_index(cfg, l->section, l->key));
    }
  }
  ct_config_free(cfg);
}

static const value_list *list_of(const char *section, const char *key) {
  const value_list *l = find_list(section, key);
  if (!l) {
    fprintf(stderr, "no list for [%s] %s\n", section, key);
    exit(1);
  }
  return l;
}

// The lower layers' own names of the values are the schema's texts, and
// every optimizer and schedule kind can be chosen.
static void test_lower_layer_names(void) {
  const value_list *l = list_of("optim", "optimizer");
  CHECK(l->n == CT_OPTIM_KIND_COUNT, "%d optimizers, %d kinds", l->n,
        CT_OPTIM_KIND_COUNT);
  for (int v = 0; v < l->n; v++)
    CHECK(!strcmp(ct_optim_kind_name((ct_optim_kind)l->values[v]), l->names[v]),
          "optimizer '%s' is '%s' in optim/", l->names[v],
          ct_optim_kind_name((ct_optim_kind)l->values[v]));
  l = list_of("schedule", "kind");
  CHECK(l->n == CT_SCHEDULE_KIND_COUNT, "%d schedules, %d kinds", l->n,
        CT_SCHEDULE_KIND_COUNT);
  for (int v = 0; v < l->n; v++)
    CHECK(!strcmp(ct_schedule_kind_name((ct_schedule_kind)l->values[v]),
                  l->names[v]),
          "schedule '%s' is '%s' in optim/", l->names[v],
          ct_schedule_kind_name((ct_schedule_kind)l->values[v]));
  l = list_of("data", "toy_task");
  for (int v = 0; v < l->n; v++)
    CHECK(!strcmp(ct_toy_task_name((ct_toy_task)l->values[v]), l->names[v]),
          "toy task '%s' is '%s' in data/", l->names[v],
          ct_toy_task_name((ct_toy_task)l->values[v]));
  l = list_of("data", "tokenizer");
  for (int v = 0; v < l->n; v++)
    CHECK(!strcmp(ct_tokenizer_kind_name((ct_tokenizer_kind)l->values[v]),
                  l->names[v]),
          "tokenizer '%s' is '%s' in data/", l->names[v],
          ct_tokenizer_kind_name((ct_tokenizer_kind)l->values[v]));
  // [run] task picks the task of that name.
  ct_config *cfg = ct_train_config_new();
  l = list_of("run", "task");
  for (int v = 0; cfg && v < l->n; v++) {
    char set[64];
    snprintf(set, sizeof set, "run.task=%s", l->names[v]);
    ct_config_set(cfg, set);
    CHECK(!strcmp(ct_task_for(cfg)->name, l->names[v]), "%s opens task '%s'",
          set, ct_task_for(cfg)->name);
  }
  ct_config_free(cfg);
}

// Every integer key states its range (a key without one would take
// 0..2147483647): a value outside it is refused as the config is read,
// naming the key, instead of being cut to fit an int later.
static void test_every_int_key_has_a_range(void) {
  int n_keys, ints = 0;
  const ct_config_key *schema = ct_train_schema(&n_keys);
  for (int i = 0; i < n_keys; i++) {
    const ct_config_key *k = &schema[i];
    if (k->type != CT_CONFIG_INT) continue;
    ints++;
    CHECK(k->choices && strstr(k->choices, ".."),
          "[%s] %s: an integer key without a range in train/schema.c",
          k->section, k->key);
  }
  CHECK(ints > 0, "no integer keys");
  ct_config *cfg = ct_train_config_new();
  CHECK(cfg != NULL, "config: %s", ct_last_error());
  // The example of the issue: 2^32 + 2 layers used to build 2.
  CHECK(ct_config_set(cfg, "model.encoder_layers=4294967298") == CT_ERR_ARG &&
            strstr(ct_last_error(), "[model] encoder_layers = '4294967298'") &&
            strstr(ct_last_error(), "must be in 1.."),
        "encoder_layers 2^32+2: %s", ct_last_error());
  CHECK(
      ct_config_set(cfg, "data.batch_size=9223372036854775807") == CT_ERR_ARG &&
          strstr(ct_last_error(), "[data] batch_size"),
      "batch_size INT64_MAX: %s", ct_last_error());
  ct_config_free(cfg);
}

int main(void) {
  test_every_enum_key_has_a_list();
  test_every_int_key_has_a_range();
  test_each_choice_reads_back();
  test_lower_layer_names();
  return test_summary("schema");
}
