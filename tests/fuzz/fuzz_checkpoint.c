// Fuzz target: checkpoint files (train/checkpoint.h and what the program
// reads from one: train/run.h). Two kinds of input, by the first byte:
// - even: the rest is a checkpoint file, parsed as it is (the container:
//   header, sections, CRCs, zlib);
// - odd: the rest is a list of sections (a 2-byte little-endian length,
//   then the bytes) for the names meta, config, vocab.src, vocab.tgt,
//   classes, image, params, optim.0, optim.1, merges.src, merges.tgt in turn, which are written
//   into a checkpoint with valid CRCs: mutations reach the readers behind
//   the checksums (tests/fuzz/seed_sections.c makes such seeds from real
//   checkpoints).
// Then the config, run state, vocabularies and image section are read;
// when the config describes a small model (below), it is opened as `ctrain
// eval` and `inspect` open it (ct_run_model_open: task, model, parameters)
// and its run state is loaded as a resume loads it. A hostile file may
// describe a huge model: building one is not a finding, so larger ones
// stop at the section reads.
#include "data/vocab.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/seed_sections.h"
#include "train/image_meta.h"
#include "train/run.h"

#include <stdbool.h>

// Whether the config's model is small enough to build in a fuzz run.
static bool small_model(const ct_config *cfg, const ct_ckpt *c) {
  static const struct {
    const char *section, *key;
    int64_t max;
  } caps[] = {
      {"model", "d_model", 64},       {"model", "heads", 8},
      {"model", "ff", 256},           {"model", "encoder_layers", 3},
      {"model", "decoder_layers", 3}, {"model", "dim", 64},
      {"model", "depth", 3},          {"model", "mlp_dim", 256},
      {"model", "width", 16},         {"model", "stages", 3},
      {"model", "blocks", 2},         {"model", "queries", 32},
      {"model", "emb_dim", 64},       {"model", "enc_hidden", 64},
      {"model", "dec_hidden", 64},
  };
  for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
    if (ct_config_int(cfg, caps[i].section, caps[i].key) > caps[i].max)
      return false;
  if (ct_ckpt_has(c, "image")) {
    ct_image_meta m = {0};
    bool ok = ct_image_meta_load(&m, c) == CT_OK && m.H <= 64 && m.W <= 64 &&
              m.K <= 100;
    ct_string_list_free(&m.class_names);
    if (!ok) return false;
  }
  return true;
}

// The section list of an odd input as a checkpoint file (malloc'd).
static unsigned char *from_sections(const uint8_t *b, size_t n, size_t *len) {
  ct_ckpt_writer *w = ct_ckpt_writer_new();
  for (int k = 0; k < CT_FUZZ_CKPT_SECTIONS && n >= 2; k++) {
    size_t l = (size_t)b[0] | (size_t)b[1] << 8;
    if (l > n - 2) l = n - 2;
    ct_ckpt_writer_add(w, ct_fuzz_ckpt_sections[k], b + 2, l);
    b += 2 + l;
    n -= 2 + l;
  }
  unsigned char *out = NULL;
  if (ct_ckpt_writer_serialize(w, &out, len) != CT_OK) abort();
  ct_ckpt_writer_free(w);
  return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *input, size_t input_size) {
  if (input_size < 1) return 0;
  const uint8_t *data = input + 1;
  size_t size = input_size - 1;
  unsigned char *built = NULL;
  if (input[0] & 1) data = built = from_sections(data, size, &size);
  ct_ckpt *c = NULL;
  if (ct_ckpt_parse(data, size, "fuzz.ct", &c) != CT_OK) {
    free(built);
    return 0;
  }
  const char *vocabs[2] = {"vocab.src", "vocab.tgt"};
  for (int k = 0; k < 2; k++) {
    const void *bytes;
    size_t len;
    ct_vocab v;
    if (ct_ckpt_section(c, vocabs[k], &bytes, &len) == CT_OK &&
        ct_vocab_load(&v, bytes, len) == CT_OK)
      ct_vocab_free(&v);
  }
  ct_config *cfg = ct_run_config_from_ckpt(c);
  ct_run_settings run;
  bool open =
      cfg && ct_run_settings_read(cfg, &run) == CT_OK && small_model(cfg, c);
  ct_config_free(cfg);
  ct_ckpt_free(c);
  const char *path = open ? fuzz_write("fuzz.ct", data, size) : NULL;
  free(built);
  if (!open) return 0;
  ct_run_model m;
  if (ct_run_model_open(&m, path, CT_TASK_MODEL_ONLY) == CT_OK) {
    // As a resume reads it: the optimizer's moments too.
    ct_optim opt;
    ct_run_state state;
    if (ct_optim_init(&opt, &m.run.optim) == CT_OK)
      ct_run_load(m.ckpt, &m.params, &opt, &state);
  }
  ct_run_model_close(&m);
  return 0;
}
