// Picking a task by name, its recipe defaults, and evaluation metrics (see
// task.h).
#include "train/task.h"

#include <string.h>

const ct_task_ops *ct_task_for(const ct_config *cfg) {
  static const ct_task_ops *const tasks[] = {
      [CT_TASK_TRANSLATION] = &ct_task_translation,
      [CT_TASK_CLASSIFICATION] = &ct_task_classification,
      [CT_TASK_DETECTION] = &ct_task_detection,
      [CT_TASK_CAPTIONING] = &ct_task_captioning,
      [CT_TASK_CONTRASTIVE] = &ct_task_contrastive,
  };
  return tasks[CT_SCHEMA_ENUM(cfg, "run", "task", CT_RUN_TASKS, ct_task_kind)];
}

ct_status ct_task_apply_defaults(ct_config *cfg) {
  const ct_task_ops *ops = ct_task_for(cfg);
  for (int i = 0; ops->defaults && ops->defaults[i][0]; i++) {
    ct_status st = ct_config_set_default(
        cfg, ops->defaults[i][0], ops->defaults[i][1], ops->defaults[i][2]);
    if (st != CT_OK) return st;
  }
  const char *arch = ct_config_text(cfg, "model", "arch");
  for (int i = 0; ops->arch_defaults && ops->arch_defaults[i][0]; i++) {
    const char *const *row = ops->arch_defaults[i];
    if (strcmp(row[0], arch)) continue;
    ct_status st = ct_config_set_default(cfg, row[1], row[2], row[3]);
    if (st != CT_OK) return st;
  }
  return CT_OK;
}

static void add_metric(ct_eval_metrics *m, const char *name, double value,
                       bool count) {
  if (m->n == CT_EVAL_MAX_METRICS) {
    ct_error(CT_ERR_STATE, "evaluation: more than %d metrics (%s dropped)",
             CT_EVAL_MAX_METRICS, name);
    return;
  }
  m->items[m->n++] =
      (ct_eval_metric){.name = name, .value = value, .count = count};
}

void ct_eval_metrics_add(ct_eval_metrics *m, const char *name, double value) {
  add_metric(m, name, value, false);
}

void ct_eval_metrics_add_count(ct_eval_metrics *m, const char *name,
                               int64_t count) {
  add_metric(m, name, (double)count, true);
}

ct_status ct_eval_metrics_get(const ct_eval_metrics *m, const char *name,
                              double *value) {
  for (int i = 0; i < m->n; i++) {
    if (strcmp(m->items[i].name, name)) continue;
    *value = m->items[i].value;
    return CT_OK;
  }
  return ct_error(CT_ERR_STATE, "evaluation: no '%s' among the metrics", name);
}

void ct_eval_metrics_to_json(const ct_eval_metrics *m, ct_json_obj *o) {
  for (int i = 0; i < m->n; i++) {
    const ct_eval_metric *e = &m->items[i];
    if (e->count)
      ct_json_obj_int(o, e->name, (int64_t)e->value);
    else
      ct_json_obj_num(o, e->name, e->value);
  }
}

void ct_task_cursor_position(const ct_task *t, int64_t *epoch,
                             int64_t *position) {
  *epoch = t->cursor->epoch;
  *position = t->cursor->position;
}

ct_status ct_task_cursor_seek(ct_task *t, int64_t epoch, int64_t position) {
  ct_batch_cursor *c = t->cursor;
  return ct_batch_seek(t->ops->name, c->batches, epoch, position, &c->epoch,
                       &c->position, &c->stride);
}

void ct_task_cursor_stride(ct_task *t, int64_t take, int64_t skip) {
  t->cursor->stride = (ct_batch_stride){.take = take, .skip = skip};
}

int64_t ct_task_cursor_epoch_batches(ct_task *t, int64_t epoch) {
  (void)epoch;
  return t->cursor->batches;
}
