// INI config parsing and checking against a schema; resolved-config output.
//
// Parsing is line by line over text in memory: a file is read whole first.
// Every message starts with where the value came from ("path:line" or
// "--set ARG"), so the user can go straight to it.
#include "train/config.h"
#include "data/strings.h"
#include "data/utf8.h"
#include "train/fileio.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct config_value {
  char *
      text;  // canonical text: what ct_config_text returns and the writer writes
  char *origin;  // "default", "path:line" or "--set"
  int64_t i;
  double f;
  bool b;
  int e;  // enum index
} config_value;

struct ct_config {
  const ct_config_key *schema;
  int n;
  config_value *v;
  int64_t *min, *max;  // CT_CONFIG_INT keys: the range their values must be in
};

// The range of an integer key without one in its schema entry.
static const char default_int_range[] = "0..2147483647";

// ---- small string helpers ----

static char *str_dup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

static char *str_ndup(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d) {
    memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// Trims blanks in place on [*s, *e).
static void trim(const char **s, const char **e) {
  while (*s < *e && is_blank(**s)) (*s)++;
  while (*e > *s && is_blank((*e)[-1])) (*e)--;
}

// Optimal-string-alignment distance (Levenshtein plus adjacent swaps), for
// "did you mean" suggestions. Names are short; longer ones are cut at 63.
static int edit_distance(const char *a, const char *b) {
  enum { M = 64 };
  int la = (int)strnlen(a, M - 1), lb = (int)strnlen(b, M - 1);
  static _Thread_local int d[M][M];
  for (int i = 0; i <= la; i++) d[i][0] = i;
  for (int j = 0; j <= lb; j++) d[0][j] = j;
  for (int i = 1; i <= la; i++) {
    for (int j = 1; j <= lb; j++) {
      int cost = a[i - 1] != b[j - 1];
      int best = d[i - 1][j - 1] + cost;
      if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
          d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  }
  return d[la][lb];
}

// A suggestion is close enough when at most a third of the name (and at
// least 2 edits' worth) differs.
static bool close_enough(const char *typed, int dist) {
  int len = (int)strlen(typed);
  int limit = len / 3 > 2 ? len / 3 : 2;
  return dist <= limit && dist < len;
}

// ---- schema lookups ----

static int key_index(const ct_config *cfg, const char *section,
                     const char *key) {
  for (int i = 0; i < cfg->n; i++)
    if (!strcmp(cfg->schema[i].section, section) &&
        !strcmp(cfg->schema[i].key, key))
      return i;
  return -1;
}

static bool section_exists(const ct_config *cfg, const char *section) {
  for (int i = 0; i < cfg->n; i++)
    if (!strcmp(cfg->schema[i].section, section)) return true;
  return false;
}

// "unknown section [optimm] (did you mean [optim]?)", prefixed by `where`.
static ct_status unknown_section(const ct_config *cfg, const char *where,
                                 const char *section, ct_status status) {
  const char *best = NULL;
  int best_d = 1 << 30;
  for (int i = 0; i < cfg->n; i++) {
    int d = edit_distance(section, cfg->schema[i].section);
    if (d < best_d) best_d = d, best = cfg->schema[i].section;
  }
  if (best && close_enough(section, best_d))
    return ct_error(status, "%s: unknown section [%s] (did you mean [%s]?)",
                    where, section, best);
  return ct_error(status, "%s: unknown section [%s]", where, section);
}

// "unknown key 'lerning_rate' in [optim] (did you mean 'learning_rate'?)",
// prefixed by `where`. The hint is the same key in another section if there
// is one, else the nearest spelling in this section, else nothing.
static ct_status unknown_key(const ct_config *cfg, const char *where,
                             const char *section, const char *key,
                             ct_status status) {
  for (int i = 0; i < cfg->n; i++)
    if (!strcmp(cfg->schema[i].key, key))
      return ct_error(status,
                      "%s: unknown key '%s' in [%s] (it belongs in [%s])",
                      where, key, section, cfg->schema[i].section);
  const char *best = NULL;
  int best_d = 1 << 30;
  for (int i = 0; i < cfg->n; i++) {
    if (strcmp(cfg->schema[i].section, section)) continue;
    int d = edit_distance(key, cfg->schema[i].key);
    if (d < best_d) best_d = d, best = cfg->schema[i].key;
  }
  if (best && close_enough(key, best_d))
    return ct_error(status, "%s: unknown key '%s' in [%s] (did you mean '%s'?)",
                    where, key, section, best);
  return ct_error(status, "%s: unknown key '%s' in [%s]", where, key, section);
}

// ---- values ----

// Parses `text` for schema entry `k` into *out (text and origin untouched).
// Returns NULL, or why the value is not acceptable.
static const char *value_parse(const ct_config_key *k, int64_t min, int64_t max,
                               const char *text, config_value *out, char *why,
                               size_t why_size) {
  size_t len = strlen(text), bad = ct_utf8_find_unsafe(text, len);
  if (bad < len) {
    char what[64];
    snprintf(why, why_size, "%s at byte %zu is not allowed",
             ct_utf8_unsafe_what(text, len, bad, what, sizeof what), bad + 1);
    return why;
  }
  char *end;
  switch (k->type) {
  case CT_CONFIG_STRING: return NULL;
  case CT_CONFIG_INT: {
    if (!*text) return "expected an integer";
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (*end || isspace((unsigned char)*text)) return "expected an integer";
    if (errno == ERANGE || v < min || v > max) {
      snprintf(why, why_size, "must be in %s",
               k->choices ? k->choices : default_int_range);
      return why;
    }
    out->i = v;
    return NULL;
  }
  case CT_CONFIG_FLOAT: {
    if (!*text) return "expected a number";
    errno = 0;
    double v = strtod(text, &end);
    if (*end || isspace((unsigned char)*text)) return "expected a number";
    if (!isfinite(v)) return "expected a finite number";
    out->f = v;
    return NULL;
  }
  case CT_CONFIG_BOOL: {
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
      if (!strcasecmp(text, yes[i])) return out->b = true, NULL;
      if (!strcasecmp(text, no[i])) return out->b = false, NULL;
    }
    return "expected true or false";
  }
  case CT_CONFIG_ENUM: {
    const char *c = k->choices ? k->choices : "";
    size_t len = strlen(text);
    for (int idx = 0;; idx++) {
      const char *bar = strchr(c, '|');
      size_t n = bar ? (size_t)(bar - c) : strlen(c);
      if (n == len && !memcmp(c, text, n)) return out->e = idx, NULL;
      if (!bar) break;
      c = bar + 1;
    }
    // "expected one of adam, adamw, sgd"
    size_t w = (size_t)snprintf(why, why_size, "expected one of ");
    for (const char *p = k->choices ? k->choices : ""; *p && w + 3 < why_size;
         p++) {
      if (*p == '|') {
        why[w++] = ',';
        why[w++] = ' ';
      } else {
        why[w++] = *p;
      }
    }
    why[w < why_size ? w : why_size - 1] = '\0';
    return why;
  }
  }
  return "unknown value type in the schema";
}

// Checks and stores a value. `where` prefixes messages ("x.ini:7",
// "--set train.steps=ten"); `origin` is recorded for ct_config_origin; a bad
// value is reported with `bad_status` (a file is malformed, a --set or schema
// argument is invalid).
static ct_status value_assign(ct_config *cfg, int idx, const char *text,
                              const char *where, const char *origin,
                              ct_status bad_status) {
  const ct_config_key *k = &cfg->schema[idx];
  config_value parsed = cfg->v[idx];
  char why_buf[512];
  const char *why = value_parse(k, cfg->min[idx], cfg->max[idx], text, &parsed,
                                why_buf, sizeof why_buf);
  if (why)
    return ct_error(bad_status, "%s: [%s] %s = '%s': %s", where, k->section,
                    k->key, text, why);
  char *t =
      str_dup(k->type == CT_CONFIG_BOOL ? (parsed.b ? "true" : "false") : text);
  char *o = str_dup(origin);
  if (!t || !o) {
    free(t);
    free(o);
    return ct_error(CT_ERR_NOMEM, "%s: out of memory", where);
  }
  free(parsed.text);
  free(parsed.origin);
  parsed.text = t;
  parsed.origin = o;
  cfg->v[idx] = parsed;
  return CT_OK;
}

// ---- construction ----

// "min..max" (decimal, min <= max) into *min and *max.
static bool parse_range(const char *text, int64_t *min, int64_t *max) {
  char *end;
  errno = 0;
  long long lo = strtoll(text, &end, 10);
  if (end == text || strncmp(end, "..", 2) || errno) return false;
  const char *hi_text = end + 2;
  long long hi = strtoll(hi_text, &end, 10);
  if (end == hi_text || *end || errno || lo > hi) return false;
  *min = lo;
  *max = hi;
  return true;
}

ct_config *ct_config_new(const ct_config_key *schema, int n_keys) {
  if (!schema || n_keys <= 0) {
    ct_error(CT_ERR_ARG, "config schema: no keys");
    return NULL;
  }
  ct_config *cfg = calloc(1, sizeof *cfg);
  config_value *v = calloc((size_t)n_keys, sizeof *v);
  int64_t *min = calloc((size_t)n_keys, sizeof *min);
  int64_t *max = calloc((size_t)n_keys, sizeof *max);
  if (!cfg || !v || !min || !max) {
    free(cfg);
    free(v);
    free(min);
    free(max);
    ct_error(CT_ERR_NOMEM, "config: out of memory");
    return NULL;
  }
  cfg->schema = schema;
  cfg->n = n_keys;
  cfg->v = v;
  cfg->min = min;
  cfg->max = max;
  for (int i = 0; i < n_keys; i++) {
    const ct_config_key *k = &schema[i];
    char where[256];
    snprintf(where, sizeof where, "config schema entry %d", i);
    if (!k->section || !k->key || !k->def ||
        (k->type == CT_CONFIG_ENUM && !k->choices)) {
      ct_error(
          CT_ERR_ARG,
          "%s: section, key, default (and choices for an enum) are required",
          where);
      ct_config_free(cfg);
      return NULL;
    }
    if (k->type == CT_CONFIG_INT &&
        !parse_range(k->choices ? k->choices : default_int_range, &min[i],
                     &max[i])) {
      ct_error(CT_ERR_ARG,
               "config schema: [%s] %s: range '%s' is not \"min..max\"",
               k->section, k->key, k->choices);
      ct_config_free(cfg);
      return NULL;
    }
    if (key_index(cfg, k->section, k->key) != i) {
      ct_error(CT_ERR_ARG, "config schema: [%s] %s declared twice", k->section,
               k->key);
      ct_config_free(cfg);
      return NULL;
    }
    if (value_assign(cfg, i, k->def, "config schema default", "default",
                     CT_ERR_ARG) != CT_OK) {
      ct_config_free(cfg);
      return NULL;
    }
  }
  return cfg;
}

void ct_config_free(ct_config *cfg) {
  if (!cfg) return;
  for (int i = 0; i < cfg->n && cfg->v; i++) {
    free(cfg->v[i].text);
    free(cfg->v[i].origin);
  }
  free(cfg->v);
  free(cfg->min);
  free(cfg->max);
  free(cfg);
}

// ---- parsing ----

// Parses a value after '=' on [s, e): an optional double-quoted string (with
// \" \\ escapes), else the text up to an inline comment (# or ; after a
// blank). Returns a malloc'd string, or NULL with *why set.
static char *value_text(const char *s, const char *e, const char **why) {
  trim(&s, &e);
  if (s < e && *s == '"') {
    char *out = malloc((size_t)(e - s));
    if (!out) return *why = "out of memory", NULL;
    size_t n = 0;
    const char *p = s + 1;
    for (; p < e && *p != '"'; p++) {
      if (*p == '\\' && p + 1 < e && (p[1] == '"' || p[1] == '\\')) p++;
      out[n++] = *p;
    }
    if (p >= e) {
      free(out);
      return *why = "unterminated quoted string", NULL;
    }
    for (p++; p < e && is_blank(*p); p++) {}
    if (p < e && *p != '#' && *p != ';') {
      free(out);
      return *why = "unexpected text after the closing quote", NULL;
    }
    out[n] = '\0';
    return out;
  }
  for (const char *p = s; p < e; p++) {
    if ((*p == '#' || *p == ';') && p > s && is_blank(p[-1])) {
      e = p;
      break;
    }
  }
  trim(&s, &e);
  return str_ndup(s, (size_t)(e - s));
}

ct_status ct_config_parse(ct_config *cfg, const char *text, const char *name) {
  if (!cfg || !text || !name)
    return ct_error(CT_ERR_ARG, "config parse: NULL argument");
  int *seen =
      calloc((size_t)cfg->n, sizeof *seen);  // line a key was set on, this text
  if (!seen) return ct_error(CT_ERR_NOMEM, "%s: out of memory", name);
  if (!strncmp(text, "\xEF\xBB\xBF", 3)) text += 3;  // UTF-8 byte order mark
  char section[128] = "";
  ct_status st = CT_OK;
  int line = 0;
  for (const char *p = text; *p && st == CT_OK;) {
    line++;
    // Lines end at "\n", "\r\n" or a bare "\r" (old Mac files).
    const char *s = p, *e = p + strcspn(p, "\r\n");
    p = *e == '\r' && e[1] == '\n' ? e + 2 : *e ? e + 1 : e;
    char where[512];
    snprintf(where, sizeof where, "%s:%d", name, line);
    size_t bad = ct_utf8_find_unsafe(s, (size_t)(e - s));
    if (bad < (size_t)(e - s)) {
      char what[64];
      st = ct_error(
          CT_ERR_FORMAT, "%s: %s at column %zu", where,
          ct_utf8_unsafe_what(s, (size_t)(e - s), bad, what, sizeof what),
          bad + 1);
      break;
    }
    trim(&s, &e);
    if (s == e || *s == '#' || *s == ';') continue;

    if (*s == '[') {
      const char *close = memchr(s, ']', (size_t)(e - s));
      const char *after = close ? close + 1 : e;
      while (after < e && is_blank(*after)) after++;
      if (!close || (after < e && *after != '#' && *after != ';')) {
        st = ct_error(CT_ERR_FORMAT,
                      "%s: malformed section header '%.*s' (expected [name])",
                      where, (int)(e - s), s);
        break;
      }
      const char *ns = s + 1, *ne = close;
      trim(&ns, &ne);
      snprintf(section, sizeof section, "%.*s", (int)(ne - ns), ns);
      if (!section_exists(cfg, section))
        st = unknown_section(cfg, where, section, CT_ERR_FORMAT);
      continue;
    }
    const char *eq = memchr(s, '=', (size_t)(e - s));
    if (!eq) {
      st = ct_error(CT_ERR_FORMAT,
                    "%s: expected 'key = value' or '[section]', got '%.*s'",
                    where, (int)(e - s), s);
      break;
    }
    const char *ks = s, *ke = eq;
    trim(&ks, &ke);
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)(ke - ks), ks);
    if (!key[0]) {
      st = ct_error(CT_ERR_FORMAT, "%s: missing key before '='", where);
      break;
    }
    if (!section[0]) {
      st = ct_error(
          CT_ERR_FORMAT,
          "%s: key '%s' outside any section (add a [section] line above it)",
          where, key);
      break;
    }
    int idx = key_index(cfg, section, key);
    if (idx < 0) {
      st = unknown_key(cfg, where, section, key, CT_ERR_FORMAT);
      break;
    }
    if (seen[idx]) {
      st = ct_error(CT_ERR_FORMAT,
                    "%s: duplicate key '%s' in [%s] (first set on line %d)",
                    where, key, section, seen[idx]);
      break;
    }
    seen[idx] = line;
    const char *why = NULL;
    char *value = value_text(eq + 1, e, &why);
    if (!value) {
      st = ct_error(
          why && strcmp(why, "out of memory") ? CT_ERR_FORMAT : CT_ERR_NOMEM,
          "%s: [%s] %s: %s", where, section, key, why ? why : "out of memory");
      break;
    }
    st = value_assign(cfg, idx, value, where, where, CT_ERR_FORMAT);
    free(value);
  }
  free(seen);
  return st;
}

ct_status ct_config_load(ct_config *cfg, const char *path) {
  if (!cfg || !path) return ct_error(CT_ERR_ARG, "config load: NULL argument");
  char *text;
  size_t len;
  ct_status st = ct_file_read_all(path, CT_CONFIG_MAX_BYTES, &text, &len);
  if (st != CT_OK) return st;
  if (strlen(text) != len) {
    free(text);
    return ct_error(CT_ERR_FORMAT, "%s: contains a NUL byte (not a text file?)",
                    path);
  }
  st = ct_config_parse(cfg, text, path);
  free(text);
  return st;
}

ct_status ct_config_set(ct_config *cfg, const char *assignment) {
  if (!cfg || !assignment) return ct_error(CT_ERR_ARG, "--set: NULL argument");
  size_t len = strlen(assignment), bad = ct_utf8_find_unsafe(assignment, len);
  if (bad < len) {
    char what[64];
    return ct_error(
        CT_ERR_ARG, "--set: %s at byte %zu of the argument",
        ct_utf8_unsafe_what(assignment, len, bad, what, sizeof what), bad + 1);
  }
  char where[512];
  snprintf(where, sizeof where, "--set %s", assignment);
  const char *eq = strchr(assignment, '=');
  const char *dot =
      eq ? memchr(assignment, '.', (size_t)(eq - assignment)) : NULL;
  if (!eq || !dot)
    return ct_error(CT_ERR_ARG, "%s: expected section.key=value", where);
  const char *ss = assignment, *se = dot, *ks = dot + 1, *ke = eq;
  const char *vs = eq + 1, *ve = eq + strlen(eq);
  trim(&ss, &se);
  trim(&ks, &ke);
  trim(&vs, &ve);
  char section[128], key[128];
  snprintf(section, sizeof section, "%.*s", (int)(se - ss), ss);
  snprintf(key, sizeof key, "%.*s", (int)(ke - ks), ks);
  if (!section_exists(cfg, section))
    return unknown_section(cfg, where, section, CT_ERR_ARG);
  int idx = key_index(cfg, section, key);
  if (idx < 0) return unknown_key(cfg, where, section, key, CT_ERR_ARG);
  char *value = str_ndup(vs, (size_t)(ve - vs));
  if (!value) return ct_error(CT_ERR_NOMEM, "%s: out of memory", where);
  ct_status st = value_assign(cfg, idx, value, where, "--set", CT_ERR_ARG);
  free(value);
  return st;
}

ct_status ct_config_set_default(ct_config *cfg, const char *section,
                                const char *key, const char *value) {
  int idx = cfg ? key_index(cfg, section, key) : -1;
  if (idx < 0)
    return ct_error(CT_ERR_ARG, "config default: unknown key [%s] %s",
                    section ? section : "?", key ? key : "?");
  if (strcmp(cfg->v[idx].origin, "default")) return CT_OK;
  char where[300];
  snprintf(where, sizeof where, "default of [%s] %s", section, key);
  return value_assign(cfg, idx, value, where, "default", CT_ERR_ARG);
}

ct_status ct_config_check_min(const ct_config *cfg,
                              const char *const (*keys)[2], size_t n,
                              int64_t min) {
  for (size_t i = 0; i < n; i++) {
    int64_t v = ct_config_int(cfg, keys[i][0], keys[i][1]);
    if (v >= min) continue;
    if (min == 0)
      return ct_error(CT_ERR_ARG, "[%s] %s = %lld: must not be negative",
                      keys[i][0], keys[i][1], (long long)v);
    return ct_error(CT_ERR_ARG, "[%s] %s = %lld: must be at least %lld",
                    keys[i][0], keys[i][1], (long long)v, (long long)min);
  }
  return CT_OK;
}

ct_status ct_config_int_list(const ct_config *cfg, const char *section,
                             const char *key, int64_t *out, int max, int *n) {
  return ct_config_int_list_min(cfg, section, key, 1, out, max, n);
}

ct_status ct_config_int_list_min(const ct_config *cfg, const char *section,
                                 const char *key, int64_t min, int64_t *out,
                                 int max, int *n) {
  const char *text = ct_config_str(cfg, section, key);
  if (!text) return ct_last_status();
  *n = 0;
  const char *s = text;
  for (;;) {
    while (*s == ' ' || *s == '\t') s++;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    bool digits = end != s && (*s == '+' || isdigit((unsigned char)*s));
    if (!digits || errno || v < min || v > INT32_MAX || *n >= max)
      return ct_error(CT_ERR_ARG,
                      "[%s] %s = '%s' (%s): want 1 to %d whole numbers >= %lld "
                      "separated by commas, e.g. 2,2,6",
                      section, key, text, ct_config_origin(cfg, section, key),
                      max, (long long)min);
    out[(*n)++] = v;
    for (s = end; *s == ' ' || *s == '\t';) s++;
    if (!*s) return CT_OK;
    if (*s++ != ',')
      return ct_error(CT_ERR_ARG,
                      "[%s] %s = '%s' (%s): want whole numbers separated by "
                      "commas, e.g. 2,2,6",
                      section, key, text, ct_config_origin(cfg, section, key));
  }
}

// ---- getters ----

static const config_value *lookup(const ct_config *cfg, const char *section,
                                  const char *key, int type,
                                  const char *getter) {
  if (!cfg || !section || !key) {
    ct_error(CT_ERR_ARG, "%s: NULL argument", getter);
    return NULL;
  }
  int idx = key_index(cfg, section, key);
  if (idx < 0) {
    ct_error(CT_ERR_ARG, "%s: [%s] %s is not in the config schema", getter,
             section, key);
    return NULL;
  }
  int t = (int)cfg->schema[idx].type;
  bool ok = type < 0 || t == type ||
            (type == CT_CONFIG_STRING && t == CT_CONFIG_ENUM);
  if (!ok) {
    ct_error(CT_ERR_ARG, "%s: [%s] %s has another type in the schema", getter,
             section, key);
    return NULL;
  }
  return &cfg->v[idx];
}

int64_t ct_config_int(const ct_config *cfg, const char *section,
                      const char *key) {
  const config_value *v =
      lookup(cfg, section, key, CT_CONFIG_INT, "ct_config_int");
  return v ? v->i : 0;
}

double ct_config_float(const ct_config *cfg, const char *section,
                       const char *key) {
  const config_value *v =
      lookup(cfg, section, key, CT_CONFIG_FLOAT, "ct_config_float");
  return v ? v->f : 0.0;
}

bool ct_config_bool(const ct_config *cfg, const char *section,
                    const char *key) {
  const config_value *v =
      lookup(cfg, section, key, CT_CONFIG_BOOL, "ct_config_bool");
  return v ? v->b : false;
}

const char *ct_config_str(const ct_config *cfg, const char *section,
                          const char *key) {
  const config_value *v =
      lookup(cfg, section, key, CT_CONFIG_STRING, "ct_config_str");
  return v ? v->text : NULL;
}

int ct_config_enum(const ct_config *cfg, const char *section, const char *key) {
  const config_value *v =
      lookup(cfg, section, key, CT_CONFIG_ENUM, "ct_config_enum");
  return v ? v->e : -1;
}

const char *ct_config_text(const ct_config *cfg, const char *section,
                           const char *key) {
  const config_value *v = lookup(cfg, section, key, -1, "ct_config_text");
  return v ? v->text : NULL;
}

const char *ct_config_origin(const ct_config *cfg, const char *section,
                             const char *key) {
  const config_value *v = lookup(cfg, section, key, -1, "ct_config_origin");
  return v ? v->origin : NULL;
}

// ---- output ----

// Strings that the parser would read differently when bare get quoted.
static bool needs_quotes(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || is_blank(s[0]) || is_blank(s[n - 1]) || s[0] == '"')
    return true;
  for (size_t i = 0; i < n; i++)
    if (s[i] == '#' || s[i] == ';' || s[i] == '\\') return true;
  return false;
}

char *ct_config_to_string(const ct_config *cfg) {
  if (!cfg) return NULL;
  ct_byte_buffer b = {0};
  ct_byte_buffer_printf(
      &b, "# Resolved ctrain config: every key with its final value.\n");
  for (int i = 0; i < cfg->n; i++) {
    const char *section = cfg->schema[i].section;
    bool first = true;  // print each section once, at its first schema entry
    for (int j = 0; j < i; j++)
      if (!strcmp(cfg->schema[j].section, section)) first = false;
    if (!first) continue;
    ct_byte_buffer_printf(&b, "\n[%s]\n", section);
    for (int j = i; j < cfg->n; j++) {
      const ct_config_key *k = &cfg->schema[j];
      if (strcmp(k->section, section)) continue;
      if (k->doc && k->doc[0]) ct_byte_buffer_printf(&b, "# %s", k->doc);
      if (k->type == CT_CONFIG_ENUM) {
        ct_byte_buffer_printf(&b,
                              "%s(one of: ", k->doc && k->doc[0] ? " " : "# ");
        for (const char *c = k->choices; *c; c++)
          ct_byte_buffer_printf(&b, "%s", *c == '|' ? ", " : (char[2]){*c, 0});
        ct_byte_buffer_printf(&b, ")");
      }
      if (k->type == CT_CONFIG_INT)
        ct_byte_buffer_printf(&b, "%s(%s)", k->doc && k->doc[0] ? " " : "# ",
                              k->choices ? k->choices : default_int_range);
      if ((k->doc && k->doc[0]) || k->type == CT_CONFIG_ENUM ||
          k->type == CT_CONFIG_INT)
        ct_byte_buffer_printf(&b, "\n");
      const char *t = cfg->v[j].text;
      if (k->type == CT_CONFIG_STRING && needs_quotes(t)) {
        ct_byte_buffer_printf(&b, "%s = \"", k->key);
        for (const char *c = t; *c; c++)
          ct_byte_buffer_printf(&b, "%s%c", *c == '"' || *c == '\\' ? "\\" : "",
                                *c);
        ct_byte_buffer_printf(&b, "\"\n");
      } else {
        ct_byte_buffer_printf(&b, "%s = %s\n", k->key, t);
      }
    }
  }
  if (b.failed) {
    ct_byte_buffer_free(&b);
    ct_error(CT_ERR_NOMEM,
             "config: out of memory formatting the resolved config");
    return NULL;
  }
  return b.data;
}

static ct_status write_text(FILE *f, const char *path, void *ctx) {
  (void)path;
  fputs((const char *)ctx, f);
  return CT_OK;
}

ct_status ct_config_write(const ct_config *cfg, const char *path) {
  if (!cfg || !path) return ct_error(CT_ERR_ARG, "config write: NULL argument");
  char *text = ct_config_to_string(cfg);
  if (!text) return ct_last_status();
  ct_status st = ct_file_write_atomic(path, write_text, text);
  free(text);
  return st;
}

// ---- comparison ----

static bool value_equal(const ct_config_key *k, const config_value *a,
                        const config_value *b) {
  switch (k->type) {
  case CT_CONFIG_INT: return a->i == b->i;
  case CT_CONFIG_FLOAT: return a->f == b->f;
  case CT_CONFIG_BOOL: return a->b == b->b;
  case CT_CONFIG_ENUM: return a->e == b->e;
  case CT_CONFIG_STRING: break;
  }
  return !strcmp(a->text, b->text);
}

int ct_config_diff(const ct_config *a, const ct_config *b,
                   const char *const *keys, int n_keys) {
  bool same = a && b && a->n == b->n;
  for (int i = 0; same && i < a->n; i++)
    same = !strcmp(a->schema[i].section, b->schema[i].section) &&
           !strcmp(a->schema[i].key, b->schema[i].key) &&
           a->schema[i].type == b->schema[i].type;
  if (!same) {
    ct_error(CT_ERR_ARG, "config diff: configs with different schemas");
    return -2;
  }
  int n = keys ? n_keys : a->n;
  for (int i = 0; i < n; i++) {
    int idx = i;
    if (keys) {
      const char *dot = strchr(keys[i], '.');
      char section[128];
      if (!dot || (size_t)(dot - keys[i]) >= sizeof section) {
        ct_error(CT_ERR_ARG, "config diff: '%s' is not section.key", keys[i]);
        return -2;
      }
      snprintf(section, sizeof section, "%.*s", (int)(dot - keys[i]), keys[i]);
      idx = key_index(a, section, dot + 1);
      if (idx < 0) {
        ct_error(CT_ERR_ARG, "config diff: [%s] %s is not in the config schema",
                 section, dot + 1);
        return -2;
      }
    }
    const ct_config_key *k = &a->schema[idx];
    if (!value_equal(k, &a->v[idx], &b->v[idx])) {
      ct_error(CT_ERR_STATE, "[%s] %s differs: %s vs %s", k->section, k->key,
               a->v[idx].text, b->v[idx].text);
      return i;
    }
  }
  return -1;
}
