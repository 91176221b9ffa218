// The translation task's model: the Transformer or the attention GRU (see
// translation_model.h).
#include "train/translation_model.h"

#include <string.h>

// The keys only one arch reads.
static const char *const transformer_keys[] = {
    "model.d_model",        "model.heads",          "model.ff",
    "model.encoder_layers", "model.decoder_layers", "model.activation",
    "model.norm_first",     "model.tie_output"};
static const char *const rnn_keys[] = {"model.emb_dim", "model.enc_hidden",
                                       "model.dec_hidden",
                                       "train.teacher_forcing"};

// CT_ERR_ARG naming the first of `keys` that holds anything but its schema
// default: a key that `arch` does not read.
static ct_status refuse_keys(const ct_config *cfg, const char *const *keys,
                             int n, const char *arch) {
  ct_config *defaults = ct_train_config_new();
  if (!defaults) return ct_last_status();
  const int d = ct_config_diff(cfg, defaults, keys, n);
  char section[32] = "", key[64] = "";
  if (d >= 0) {
    const char *dot = strchr(keys[d], '.');
    snprintf(section, sizeof section, "%.*s", (int)(dot - keys[d]), keys[d]);
    snprintf(key, sizeof key, "%s", dot + 1);
  }
  ct_status st = CT_OK;
  if (d == -2)
    st = ct_last_status();
  else if (d >= 0)
    st = ct_error(CT_ERR_ARG,
                  "[%s] %s = %s: [model] arch = %s does not use this key "
                  "(remove it, or set it back to %s)",
                  section, key, ct_config_text(cfg, section, key), arch,
                  ct_config_text(defaults, section, key));
  ct_config_free(defaults);
  return st;
}

static ct_status read_transformer(const ct_config *cfg,
                                  ct_nn_seq2seq_config *out) {
  *out = (ct_nn_seq2seq_config){
      .d_model = ct_config_int(cfg, "model", "d_model"),
      .nhead = ct_config_int(cfg, "model", "heads"),
      .dim_feedforward = ct_config_int(cfg, "model", "ff"),
      .encoder_layers = (int)ct_config_int(cfg, "model", "encoder_layers"),
      .decoder_layers = (int)ct_config_int(cfg, "model", "decoder_layers"),
      .dropout = (float)ct_config_float(cfg, "model", "dropout"),
      .activation = CT_SCHEMA_ENUM(cfg, "model", "activation", CT_ACTIVATIONS,
                                   ct_nn_activation),
      .norm_first = ct_config_bool(cfg, "model", "norm_first"),
      .tie_output = ct_config_bool(cfg, "model", "tie_output"),
  };
  if (out->d_model % out->nhead)
    return ct_error(CT_ERR_ARG,
                    "[model] d_model = %lld is not a multiple of "
                    "heads = %lld",
                    (long long)out->d_model, (long long)out->nhead);
  return refuse_keys(cfg, rnn_keys, sizeof rnn_keys / sizeof rnn_keys[0],
                     "transformer");
}

static ct_status read_rnn(const ct_config *cfg, ct_nn_rnn_seq2seq_config *out,
                          float *teacher_forcing) {
  *out = (ct_nn_rnn_seq2seq_config){
      .emb_dim = ct_config_int(cfg, "model", "emb_dim"),
      .enc_hidden = ct_config_int(cfg, "model", "enc_hidden"),
      .dec_hidden = ct_config_int(cfg, "model", "dec_hidden"),
      .dropout = (float)ct_config_float(cfg, "model", "dropout"),
  };
  const double tf = ct_config_float(cfg, "train", "teacher_forcing");
  if (!(tf >= 0.0 && tf <= 1.0))
    return ct_error(CT_ERR_ARG,
                    "[train] teacher_forcing = %g: must be in [0, 1]", tf);
  *teacher_forcing = (float)tf;
  return refuse_keys(cfg, transformer_keys,
                     sizeof transformer_keys / sizeof transformer_keys[0],
                     "rnn");
}

ct_status ct_translation_model_read(const ct_config *cfg,
                                    ct_translation_model_config *out) {
  static const ct_model_arch archs[] = {CT_TRANSLATION_ARCHS(CT_SCHEMA_VALUE)};
  memset(out, 0, sizeof *out);
  ct_status st = ct_schema_task_arch(
      cfg, "translation", archs, (int)(sizeof archs / sizeof archs[0]),
      CT_SCHEMA_CHOICES(CT_TRANSLATION_ARCHS), &out->arch);
  if (st != CT_OK) return st;
  if (out->arch == CT_ARCH_RNN)
    return read_rnn(cfg, &out->rnn, &out->teacher_forcing);
  out->teacher_forcing = 1.0f;
  return read_transformer(cfg, &out->transformer);
}

ct_status ct_translation_model_init(ct_translation_model *m, ct_params *p,
                                    const ct_translation_model_config *cfg,
                                    int64_t src_vocab, int64_t tgt_vocab,
                                    ct_rng *init) {
  memset(m, 0, sizeof *m);
  m->cfg = *cfg;
  ct_status st;
  if (cfg->arch == CT_ARCH_RNN) {
    m->cfg.rnn.src_vocab = src_vocab;
    m->cfg.rnn.tgt_vocab = tgt_vocab;
    st = ct_nn_rnn_seq2seq_init(&m->rnn, p, &m->cfg.rnn, init);
  } else {
    m->cfg.transformer.src_vocab = src_vocab;
    m->cfg.transformer.tgt_vocab = tgt_vocab;
    st = ct_nn_seq2seq_init(&m->transformer, p, &m->cfg.transformer, init);
  }
  m->ready = true;
  return st;
}

void ct_translation_model_free(ct_translation_model *m) {
  if (!m->ready) return;
  if (m->cfg.arch == CT_ARCH_RNN)
    ct_nn_rnn_seq2seq_free(&m->rnn);
  else
    ct_nn_seq2seq_free(&m->transformer);
  m->ready = false;
}

int64_t ct_translation_model_width(const ct_translation_model *m) {
  return m->cfg.arch == CT_ARCH_RNN ? m->cfg.rnn.dec_hidden
                                    : m->cfg.transformer.d_model;
}

int64_t ct_translation_model_tgt_vocab(const ct_translation_model *m) {
  return m->cfg.arch == CT_ARCH_RNN ? m->cfg.rnn.tgt_vocab
                                    : m->cfg.transformer.tgt_vocab;
}

ct_tensor *ct_translation_model_logits(const ct_translation_model *m,
                                       ct_nn_ctx *ctx, ct_tensor *src,
                                       ct_tensor *tgt_in) {
  if (m->cfg.arch == CT_ARCH_RNN)
    return ct_nn_rnn_seq2seq_forward(&m->rnn, ctx, src, tgt_in,
                                     m->cfg.teacher_forcing, NULL);
  return ct_nn_seq2seq_forward(&m->transformer, ctx, src, tgt_in);
}

ct_status ct_translation_model_decode(const ct_translation_model *m,
                                      const int32_t *src, int64_t B, int64_t S,
                                      const ct_decode_opts *opts, int32_t *out,
                                      int64_t *lens, float *align) {
  if (m->cfg.arch == CT_ARCH_RNN)
    return ct_decode_batch_rnn(&m->rnn, src, B, S, opts, out, lens, align);
  if (align)
    return ct_error(CT_ERR_ARG,
                    "decode: attention alignments are drawn for arch = rnn "
                    "only (a Transformer attends with several heads per "
                    "layer)");
  return ct_decode_batch(&m->transformer, src, B, S, opts, out, lens);
}
