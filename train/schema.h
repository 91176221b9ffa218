// The config schema of `ctrain train`: every section and key a config file
// may hold, with its type, default and one-line doc (README.md lists them),
// and the values of its enum keys.
#ifndef CT_TRAIN_SCHEMA_H
#define CT_TRAIN_SCHEMA_H

#include "core/gemm.h"
#include "data/text_tokenizer.h"
#include "data/toy_translation.h"
#include "nn/cvt.h"
#include "nn/distill.h"
#include "nn/module.h"
#include "optim/optim.h"
#include "optim/schedule.h"
#include "train/config.h"

// A config holding the defaults of every key.
ct_config *ct_train_config_new(void);
// The schema itself (static), *n_keys entries.
const ct_config_key *ct_train_schema(int *n_keys);

// The keys that fix the model's shape (and its vocabularies): a checkpoint
// may only be resumed, evaluated or used with a config that agrees on them.
extern const char *const ct_model_shape_keys[];
extern const int ct_model_shape_key_count;

// ---- the values of the enum keys ----------------------------------------
//
// Each enum key has one list X(value, "text") in the order of its choices.
// The schema's choices ("adam|adamw|sgd") and the readers' value tables are
// both made from it, so a text and its value cannot drift apart. Values of
// enums that a lower layer owns are its constants (the optimizer's order
// differs from ct_optim_kind's); the others are enums declared here from
// the list. tests/test_schema.c checks that every enum key has a list and
// that the lower layers' own names (ct_optim_kind_name, ...) agree.

#define CT_RUN_TASKS(X)                       \
  X(CT_TASK_TRANSLATION, "translation")       \
  X(CT_TASK_CLASSIFICATION, "classification") \
  X(CT_TASK_DETECTION, "detection")           \
  X(CT_TASK_CAPTIONING, "captioning")         \
  X(CT_TASK_CONTRASTIVE, "contrastive")
#define CT_DATA_SOURCES(X) \
  X(CT_DATA_SOURCE_TOY, "toy") X(CT_DATA_SOURCE_FILES, "files")
#define CT_TOY_TASKS(X)  \
  X(CT_TOY_COPY, "copy") \
  X(CT_TOY_REVERSE, "reverse") X(CT_TOY_GRAMMAR, "grammar")
#define CT_TEXT_FORMATS(X) \
  X(CT_TEXT_FORMAT_PAIR, "pair") X(CT_TEXT_FORMAT_TSV, "tsv")
#define CT_TOKENIZERS(X)       \
  X(CT_TOKENIZER_WORD, "word") \
  X(CT_TOKENIZER_BPE, "bpe") X(CT_TOKENIZER_CHAR, "char")
// A side's tokenizer: "same" (CT_TOKENIZER_SAME) takes [data] tokenizer.
#define CT_SIDE_TOKENIZERS(X) X(CT_TOKENIZER_SAME, "same") CT_TOKENIZERS(X)
#define CT_IMAGE_FORMATS(X)             \
  X(CT_IMAGE_FORMAT_IDX, "idx")         \
  X(CT_IMAGE_FORMAT_CIFAR10, "cifar10") \
  X(CT_IMAGE_FORMAT_CIFAR100, "cifar100") X(CT_IMAGE_FORMAT_PNG, "png")
#define CT_TOY_ITEMS(X) \
  X(CT_TOY_ITEMS_SHAPES, "shapes") X(CT_TOY_ITEMS_FMNIST, "fmnist")
// [model] arch: one list, grouped by the task whose models they are (the
// classification list first, so that its vit stays the schema default).
#define CT_CLASSIFICATION_ARCHS(X) \
  X(CT_ARCH_VIT, "vit")            \
  X(CT_ARCH_DEIT, "deit")          \
  X(CT_ARCH_RESNET, "resnet") X(CT_ARCH_SWIN, "swin") X(CT_ARCH_CVT, "cvt")
#define CT_TRANSLATION_ARCHS(X) \
  X(CT_ARCH_TRANSFORMER, "transformer") X(CT_ARCH_RNN, "rnn")
#define CT_DETECTION_ARCHS(X) \
  X(CT_ARCH_DETR, "detr") X(CT_ARCH_DEFORMABLE_DETR, "deformable_detr")
#define CT_MODEL_ARCHS(X) \
  CT_CLASSIFICATION_ARCHS(X) CT_TRANSLATION_ARCHS(X) CT_DETECTION_ARCHS(X)
#define CT_ACTIVATIONS(X) X(CT_NN_RELU, "relu") X(CT_NN_GELU, "gelu")
#define CT_CVT_PROJECTIONS(X) \
  X(CT_NN_CVT_DW_BN, "dw_bn") X(CT_NN_CVT_LINEAR, "linear")
#define CT_CVT_SCALES(X) \
  X(CT_NN_CVT_SCALE_DIM, "dim") X(CT_NN_CVT_SCALE_HEAD, "head")
#define CT_CVT_ACTIVATIONS(X) \
  X(CT_NN_QUICK_GELU, "quick_gelu") X(CT_NN_GELU, "gelu")
#define CT_OPTIMIZERS(X) \
  X(CT_OPTIM_ADAM, "adam") X(CT_OPTIM_ADAMW, "adamw") X(CT_OPTIM_SGD, "sgd")
#define CT_SCHEDULE_KINDS(X)          \
  X(CT_SCHEDULE_CONSTANT, "constant") \
  X(CT_SCHEDULE_COSINE, "cosine")     \
  X(CT_SCHEDULE_LINEAR, "linear")     \
  X(CT_SCHEDULE_INVERSE_SQRT, "inverse_sqrt") X(CT_SCHEDULE_STEP, "step")
#define CT_DISTILLATIONS(X)     \
  X(CT_NN_DISTILL_NONE, "none") \
  X(CT_NN_DISTILL_HARD, "hard") X(CT_NN_DISTILL_SOFT, "soft")
#define CT_DISTILL_KLS(X) \
  X(CT_DISTILL_KL_ELEMENT, "element") X(CT_DISTILL_KL_SAMPLE, "sample")
#define CT_PRECISIONS(X) X(CT_GEMM_FP32, "fp32") X(CT_GEMM_BF16, "bf16")

// What a list expands to: its values (an initializer or enumerator list),
// its texts, and the schema's choices text ("|a|b" + 1 is "a|b").
#define CT_SCHEMA_VALUE(value, text) value,
#define CT_SCHEMA_NAME(value, text) text,
#define CT_SCHEMA_CHOICE(value, text) "|" text
#define CT_SCHEMA_CHOICES(LIST) (LIST(CT_SCHEMA_CHOICE) + 1)

typedef enum ct_task_kind { CT_RUN_TASKS(CT_SCHEMA_VALUE) } ct_task_kind;
typedef enum ct_data_source { CT_DATA_SOURCES(CT_SCHEMA_VALUE) } ct_data_source;
typedef enum ct_text_format { CT_TEXT_FORMATS(CT_SCHEMA_VALUE) } ct_text_format;
enum { CT_TOKENIZER_SAME = -1 };
typedef enum ct_image_format {
  CT_IMAGE_FORMATS(CT_SCHEMA_VALUE)
} ct_image_format;
typedef enum ct_toy_items { CT_TOY_ITEMS(CT_SCHEMA_VALUE) } ct_toy_items;
typedef enum ct_model_arch { CT_MODEL_ARCHS(CT_SCHEMA_VALUE) } ct_model_arch;
typedef enum ct_distill_kl { CT_DISTILL_KLS(CT_SCHEMA_VALUE) } ct_distill_kl;

// The value of the enum key [section] key through its list, e.g.
// CT_SCHEMA_ENUM(cfg, "optim", "optimizer", CT_OPTIMIZERS, ct_optim_kind).
// A key that is not an enum of the schema is a bug of the caller: the
// getter records it, and this gives the list's first value.
#define CT_SCHEMA_ENUM(cfg, section, key, LIST, type) \
  ((const type[]){                                    \
      LIST(CT_SCHEMA_VALUE)}[ct_schema_enum_index((cfg), (section), (key))])
int ct_schema_enum_index(const ct_config *cfg, const char *section,
                         const char *key);

// The [model] arch of cfg when it is one of `n` archs (a task's list, e.g.
// {CT_TRANSLATION_ARCHS(CT_SCHEMA_VALUE)}); otherwise CT_ERR_ARG
// "[model] arch = vit is not a <task> model (<choices>)".
ct_status ct_schema_task_arch(const ct_config *cfg, const char *task,
                              const ct_model_arch *archs, int n,
                              const char *choices, ct_model_arch *out);

#endif
