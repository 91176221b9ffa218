// Picking a task by name, and its recipe defaults (see task.h).
#include "train/task.h"

#include <string.h>

const ct_task_ops *ct_task_for(const ct_config *cfg) {
  if (!strcmp(ct_config_str(cfg, "run", "task"), "classification"))
    return &ct_task_classification;
  if (!strcmp(ct_config_str(cfg, "run", "task"), "detection"))
    return &ct_task_detection;
  return &ct_task_translation;
}

ct_status ct_task_apply_defaults(ct_config *cfg) {
  const ct_task_ops *ops = ct_task_for(cfg);
  for (int i = 0; ops->defaults && ops->defaults[i][0]; i++) {
    ct_status st = ct_config_set_default(cfg, ops->defaults[i][0],
                                         ops->defaults[i][1],
                                         ops->defaults[i][2]);
    if (st != CT_OK) return st;
  }
  return CT_OK;
}
