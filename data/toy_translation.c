// Toy translation corpora: copy/reverse on random words and the "Toy German"
// grammar (see toy_translation.h), plus the file writer.
#include "data/toy_translation.h"
#include "core/rng.h"
#include "data/batch.h"  // CT_DATA_RNG_TOY

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// ---- a growing sentence: words separated by single spaces ----

typedef struct sentence {
  char *s;
  int64_t len, cap;
  ct_status st;  // the first failure; later appends do nothing
} sentence;

// Appends one word made of up to three parts ("" or NULL for none).
static void add_word3(sentence *x, const char *a, const char *b,
                      const char *c) {
  const char *parts[3] = {a ? a : "", b ? b : "", c ? c : ""};
  size_t n = strlen(parts[0]) + strlen(parts[1]) + strlen(parts[2]);
  if (x->st || n == 0) return;
  x->st = ct_grow_array((void **)&x->s, &x->cap, x->len + (int64_t)n + 2, 1,
                        "toy corpus");
  if (x->st) return;
  if (x->len) x->s[x->len++] = ' ';
  for (int i = 0; i < 3; i++) {
    size_t k = strlen(parts[i]);
    memcpy(x->s + x->len, parts[i], k);
    x->len += (int64_t)k;
  }
  x->s[x->len] = '\0';
}
static void add_word(sentence *x, const char *w) {
  add_word3(x, w, NULL, NULL);
}

static bool chance(ct_rng *r, double p) { return ct_rng_next_double(r) < p; }
static int pick(ct_rng *r, int n) {
  return (int)ct_rng_next_below(r, (uint64_t)n);
}

// ---- copy / reverse ----

static void make_sequence(ct_rng *r, const ct_toy_options *o, sentence *src,
                          sentence *tgt) {
  int len = o->min_len + pick(r, o->max_len - o->min_len + 1);
  int words[64];
  char w[16];
  for (int i = 0; i < len; i++) {
    words[i] = pick(r, o->symbols);
    snprintf(w, sizeof w, "a%d", words[i]);
    add_word(src, w);
  }
  for (int i = 0; i < len; i++) {
    snprintf(w, sizeof w, "a%d",
             words[o->task == CT_TOY_REVERSE ? len - 1 - i : i]);
    add_word(tgt, w);
  }
}

// ---- the grammar ----

enum { MASC, FEM, NEUT, PLURAL };  // article columns: gender, or plural
enum { NOM, ACC, DAT };
enum { DET_THE, DET_A, DET_MY, DET_BARE, DET_TWO, DET_MANY };
enum { PRESENT, PAST, FUTURE };
enum verb_kind { TAKES_ACC, TAKES_DAT, SEPARABLE, DITRANSITIVE };

typedef struct noun {
  const char *en_sg, *en_pl, *de_sg, *de_pl;
  int gender;
} noun;

static const noun nouns[] = {
    {"dog", "dogs", "hund", "hunde", MASC},
    {"cat", "cats", "katze", "katzen", FEM},
    {"man", "men", "mann", "männer", MASC},
    {"woman", "women", "frau", "frauen", FEM},
    {"child", "children", "kind", "kinder", NEUT},
    {"bird", "birds", "vogel", "vögel", MASC},
    {"horse", "horses", "pferd", "pferde", NEUT},
    {"teacher", "teachers", "lehrer", "lehrer", MASC},
    {"farmer", "farmers", "bauer", "bauern", MASC},
    {"doctor", "doctors", "arzt", "ärzte", MASC},
    {"king", "kings", "könig", "könige", MASC},
    {"queen", "queens", "königin", "königinnen", FEM},
    {"student", "students", "student", "studenten", MASC},
    {"friend", "friends", "freund", "freunde", MASC},
    {"girl", "girls", "mädchen", "mädchen", NEUT},
    {"boy", "boys", "junge", "jungen", MASC},
    {"fox", "foxes", "fuchs", "füchse", MASC},
    {"mouse", "mice", "maus", "mäuse", FEM},
    {"baker", "bakers", "bäcker", "bäcker", MASC},
    {"singer", "singers", "sängerin", "sängerinnen", FEM},
    {"apple", "apples", "apfel", "äpfel", MASC},
    {"book", "books", "buch", "bücher", NEUT},
    {"house", "houses", "haus", "häuser", NEUT},
    {"car", "cars", "wagen", "wagen", MASC},
    {"ball", "balls", "ball", "bälle", MASC},
    {"letter", "letters", "brief", "briefe", MASC},
    {"tree", "trees", "baum", "bäume", MASC},
    {"garden", "gardens", "garten", "gärten", MASC},
    {"bridge", "bridges", "brücke", "brücken", FEM},
    {"cow", "cows", "kuh", "kühe", FEM},
};

typedef struct adjective {
  const char *en, *de;
} adjective;

static const adjective adjectives[] = {
    {"big", "groß"},     {"small", "klein"},  {"old", "alt"},
    {"young", "jung"},   {"red", "rot"},      {"green", "grün"},
    {"happy", "froh"},   {"sad", "traurig"},  {"fast", "schnell"},
    {"slow", "langsam"}, {"brave", "tapfer"}, {"clever", "klug"},
    {"quiet", "still"},  {"loud", "laut"},    {"black", "schwarz"},
};

typedef struct verb {
  const char *en_base, *en_3sg, *en_past;
  const char *de_stem, *de_particle;  // particle: separable verbs only
  enum verb_kind kind;
} verb;

static const verb verbs[] = {
    {"see", "sees", "saw", "seh", NULL, TAKES_ACC},
    {"find", "finds", "found", "find", NULL, TAKES_ACC},
    {"love", "loves", "loved", "lieb", NULL, TAKES_ACC},
    {"hear", "hears", "heard", "hör", NULL, TAKES_ACC},
    {"ask", "asks", "asked", "frag", NULL, TAKES_ACC},
    {"catch", "catches", "caught", "fang", NULL, TAKES_ACC},
    {"paint", "paints", "painted", "mal", NULL, TAKES_ACC},
    {"carry", "carries", "carried", "trag", NULL, TAKES_ACC},
    {"wash", "washes", "washed", "wasch", NULL, TAKES_ACC},
    {"know", "knows", "knew", "kenn", NULL, TAKES_ACC},
    {"help", "helps", "helped", "helf", NULL, TAKES_DAT},
    {"follow", "follows", "followed", "folg", NULL, TAKES_DAT},
    {"thank", "thanks", "thanked", "dank", NULL, TAKES_DAT},
    {"answer", "answers", "answered", "antwort", NULL, TAKES_DAT},
    {"call", "calls", "called", "ruf", "an", SEPARABLE},
    {"invite", "invites", "invited", "lad", "ein", SEPARABLE},
    {"fetch", "fetches", "fetched", "hol", "ab", SEPARABLE},
    {"wake", "wakes", "woke", "weck", "auf", SEPARABLE},
    {"give", "gives", "gave", "geb", NULL, DITRANSITIVE},
    {"show", "shows", "showed", "zeig", NULL, DITRANSITIVE},
    {"send", "sends", "sent", "schick", NULL, DITRANSITIVE},
};

typedef struct preposition {
  const char *en, *de;
  const char *de_dem, *de_der;  // contracted with dem / der, or NULL
} preposition;

static const preposition prepositions[] = {
    {"in", "in", "im", NULL},        {"with", "mit", NULL, NULL},
    {"near", "bei", "beim", NULL},   {"from", "von", "vom", NULL},
    {"towards", "zu", "zum", "zur"},
};

static const char *const conjunctions[][2] = {
    {"because", "weil"}, {"while", "während"}, {"although", "obwohl"}};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
_Static_assert(COUNT(nouns) == 30 && COUNT(adjectives) == 15 &&
                   COUNT(verbs) == 21,
               "the lexicon sizes are documented in toy_translation.h");

// Target articles [case][gender or PLURAL].
static const char *const definite[3][4] = {{"der", "die", "das", "die"},
                                           {"den", "die", "das", "die"},
                                           {"dem", "der", "dem", "den"}};
static const char *const indefinite[3][3] = {  // "mein" = "m" + these
    {"ein", "eine", "ein"},
    {"einen", "eine", "ein"},
    {"einem", "einer", "einem"}};
// Adjective endings: weak after der/die/das (and any plural article), mixed
// after ein/mein (singular), strong with no article (plural only).
static const char *const weak_ending[3][4] = {
    {"e", "e", "e", "en"}, {"en", "e", "e", "en"}, {"en", "en", "en", "en"}};
static const char *const mixed_ending[3][3] = {
    {"er", "e", "es"}, {"en", "e", "es"}, {"en", "en", "en"}};
static const char *const strong_plural_ending[3] = {"e", "e", "en"};

typedef struct noun_phrase {
  int noun, det, adj;  // adj: -1 for none
  bool plural;
} noun_phrase;

typedef struct clause {
  noun_phrase subj, obj, recipient, pp;  // recipient: ditransitive verbs
  int verb, tense, prep;                 // prep: -1 for none
  bool negated;
} clause;

static noun_phrase random_np(ct_rng *r, bool allow_adj) {
  noun_phrase np = {.noun = pick(r, COUNT(nouns)), .adj = -1};
  int d = pick(r, 100);
  np.det = d < 35   ? DET_THE
           : d < 55 ? DET_A
           : d < 70 ? DET_MY
           : d < 82 ? DET_BARE
           : d < 91 ? DET_TWO
                    : DET_MANY;
  if (np.det == DET_THE || np.det == DET_MY)
    np.plural = chance(r, 0.35);
  else
    np.plural = np.det != DET_A;
  if (allow_adj && chance(r, 0.3)) np.adj = pick(r, COUNT(adjectives));
  return np;
}

static clause random_clause(ct_rng *r, bool subordinate) {
  clause c = {.prep = -1};
  bool simple = subordinate;  // keeps two-clause sentences short
  c.subj = random_np(r, !simple);
  c.verb = pick(r, COUNT(verbs));
  if (simple)
    while (verbs[c.verb].kind == DITRANSITIVE) c.verb = pick(r, COUNT(verbs));
  c.obj = random_np(r, !simple);
  c.recipient = random_np(r, !simple);
  int t = pick(r, 10);
  c.tense = t < 5 ? PRESENT : t < 8 ? PAST : FUTURE;
  c.negated = chance(r, 0.2);
  if (!simple && chance(r, 0.3)) {
    c.prep = pick(r, COUNT(prepositions));
    c.pp = random_np(r, true);
  }
  return c;
}

static void source_np(sentence *x, const noun_phrase *np) {
  static const char *const det_words[] = {"the", "a",   "my",
                                          NULL,  "two", "many"};
  const noun *n = &nouns[np->noun];
  const char *head = np->plural ? n->en_pl : n->en_sg;
  const char *adj = np->adj >= 0 ? adjectives[np->adj].en : NULL;
  const char *next = adj ? adj : head;
  if (np->det == DET_A && strchr("aeiou", next[0]))
    add_word(x, "an");
  else
    add_word(x, det_words[np->det]);
  add_word(x, adj);
  add_word(x, head);
}

static void source_clause(sentence *x, const clause *c) {
  const verb *v = &verbs[c->verb];
  source_np(x, &c->subj);
  bool sg = !c->subj.plural;
  if (c->tense == FUTURE) {
    add_word(x, "will");
    if (c->negated) add_word(x, "not");
    add_word(x, v->en_base);
  } else if (c->negated) {
    add_word(x, c->tense == PAST ? "did" : sg ? "does" : "do");
    add_word(x, "not");
    add_word(x, v->en_base);
  } else {
    add_word(x, c->tense == PAST ? v->en_past : sg ? v->en_3sg : v->en_base);
  }
  source_np(x, &c->obj);
  if (v->kind == DITRANSITIVE) {
    add_word(x, "to");
    source_np(x, &c->recipient);
  }
  if (c->prep >= 0) {
    add_word(x, prepositions[c->prep].en);
    source_np(x, &c->pp);
  }
}

// The target noun phrase in case `cas`; with `prep`, the preposition comes
// first and contracts with a singular definite article (in + dem = im).
static void target_np(sentence *x, const noun_phrase *np, int cas,
                      const preposition *prep) {
  const noun *n = &nouns[np->noun];
  const int col = np->plural ? PLURAL : n->gender;
  const char *ending;
  char article[16] = "";
  switch (np->det) {
  case DET_THE:
    snprintf(article, sizeof article, "%s", definite[cas][col]);
    ending = weak_ending[cas][col];
    break;
  case DET_A:
  case DET_MY:
    if (np->plural) {  // only "my" has a plural
      snprintf(article, sizeof article, "meine%s", cas == DAT ? "n" : "");
      ending = weak_ending[cas][PLURAL];
    } else {
      snprintf(article, sizeof article, "%s%s", np->det == DET_MY ? "m" : "",
               indefinite[cas][col]);
      ending = mixed_ending[cas][col];
    }
    break;
  case DET_TWO:
    snprintf(article, sizeof article, "zwei");
    ending = strong_plural_ending[cas];
    break;
  case DET_MANY:
    snprintf(article, sizeof article, "viele%s", cas == DAT ? "n" : "");
    ending = strong_plural_ending[cas];
    break;
  default:  // DET_BARE
    ending = strong_plural_ending[cas];
    break;
  }
  if (prep) {
    const char *contracted = NULL;
    if (np->det == DET_THE && !np->plural)
      contracted = n->gender == FEM ? prep->de_der : prep->de_dem;
    if (contracted) {
      add_word(x, contracted);
      article[0] = '\0';
    } else {
      add_word(x, prep->de);
    }
  }
  add_word(x, article);
  if (np->plural) {
    size_t len = strlen(n->de_pl);
    char last = n->de_pl[len - 1];
    bool add_n = cas == DAT && last != 'n' && last != 's';
    add_word3(x, n->de_pl, add_n ? "n" : NULL, NULL);
  } else {
    add_word(x, n->de_sg);
  }
  if (np->adj >= 0) add_word3(x, adjectives[np->adj].de, ending, NULL);
}

// The finite verb: stem + tense/number suffix (+ "e" after a stem in t/d).
static void target_verb(sentence *x, const clause *c, bool with_particle) {
  const verb *v = &verbs[c->verb];
  const bool pl = c->subj.plural;
  const char last = v->de_stem[strlen(v->de_stem) - 1];
  const bool td = last == 't' || last == 'd';
  const char *suffix;
  if (c->tense == PRESENT)
    suffix = pl ? "en" : td ? "et" : "t";
  else if (c->tense == PAST)
    suffix = pl ? (td ? "eten" : "ten") : td ? "ete" : "te";
  else
    suffix = pl ? "ran" : "ra";
  add_word3(x, with_particle ? v->de_particle : NULL, v->de_stem, suffix);
}

// Main clause: S V [recipient] O [nicht] [PP] [particle].
// Subordinate: S [recipient] O [nicht] [PP] particle+V.
static void target_clause(sentence *x, const clause *c, bool subordinate) {
  const verb *v = &verbs[c->verb];
  target_np(x, &c->subj, NOM, NULL);
  if (!subordinate) target_verb(x, c, false);
  if (v->kind == DITRANSITIVE) target_np(x, &c->recipient, DAT, NULL);
  target_np(x, &c->obj, v->kind == TAKES_DAT ? DAT : ACC, NULL);
  if (c->negated) add_word(x, "nicht");
  if (c->prep >= 0) target_np(x, &c->pp, DAT, &prepositions[c->prep]);
  if (subordinate)
    target_verb(x, c, true);
  else if (v->de_particle)
    add_word(x, v->de_particle);
}

static void make_grammar_sentence(ct_rng *r, sentence *src, sentence *tgt) {
  bool two = chance(r, 0.25);
  clause main = random_clause(r, two);
  source_clause(src, &main);
  target_clause(tgt, &main, false);
  if (two) {
    int k = pick(r, COUNT(conjunctions));
    clause sub = random_clause(r, true);
    add_word(src, conjunctions[k][0]);
    source_clause(src, &sub);
    add_word(tgt, ",");
    add_word(tgt, conjunctions[k][1]);
    target_clause(tgt, &sub, true);
  }
  add_word(src, ".");
  add_word(tgt, ".");
}

// ---- generation with held-out splits ----

static ct_status check_options(ct_toy_options *o) {
  if (o->task != CT_TOY_COPY && o->task != CT_TOY_REVERSE &&
      o->task != CT_TOY_GRAMMAR)
    return ct_error(CT_ERR_ARG, "toy translation: unknown task %d",
                    (int)o->task);
  if (o->train_size < 0 || o->val_size < 0 || o->test_size < 0)
    return ct_error(CT_ERR_ARG, "toy translation: split sizes must be >= 0");
  if (!o->min_len && !o->max_len) {
    o->min_len = 3;
    o->max_len = 12;
  }
  if (!o->symbols) o->symbols = 50;
  if (o->min_len < 1 || o->max_len < o->min_len || o->max_len > 64)
    return ct_error(CT_ERR_ARG,
                    "toy translation: lengths %d..%d must satisfy 1 <= "
                    "min_len <= max_len <= 64",
                    o->min_len, o->max_len);
  if (o->symbols < 1 || o->symbols > 100000)
    return ct_error(CT_ERR_ARG, "toy translation: symbols %d not in 1..100000",
                    o->symbols);
  return CT_OK;
}

// Draws `size` pairs whose sources are not yet in `seen` into *split.
static ct_status generate_split(ct_rng *r, const ct_toy_options *o,
                                int64_t size, const char *name,
                                ct_string_table *seen,
                                ct_parallel_text *split) {
  enum { MAX_TRIES = 1000 };  // consecutive duplicates before giving up
  sentence src = {0}, tgt = {0};
  ct_status st = CT_OK;
  for (int64_t i = 0, tries = 0; !st && i < size;) {
    src.len = tgt.len = 0;
    if (o->task == CT_TOY_GRAMMAR)
      make_grammar_sentence(r, &src, &tgt);
    else
      make_sequence(r, o, &src, &tgt);
    st = src.st ? src.st : tgt.st;
    if (st) break;
    int added;
    if (ct_string_table_add(seen, src.s, (size_t)src.len, &added) < 0) {
      st = ct_last_status();
      break;
    }
    if (!added) {
      if (++tries >= MAX_TRIES)
        st = ct_error(CT_ERR_ARG,
                      "toy %s: found only %lld distinct %s sentences after "
                      "%d duplicate draws in a row; ask for fewer pairs, or "
                      "more symbols or longer sentences",
                      ct_toy_task_name(o->task), (long long)i, name,
                      (int)MAX_TRIES);
      continue;
    }
    tries = 0;
    st = ct_parallel_text_push(split, src.s, tgt.s);
    i++;
  }
  free(src.s);
  free(tgt.s);
  return st;
}

ct_status ct_toy_translation_generate(const ct_toy_options *opt,
                                      ct_toy_corpus *out) {
  *out = (ct_toy_corpus){0};
  ct_toy_options o = *opt;
  ct_status st = check_options(&o);
  if (st) return st;
  ct_rng r = ct_rng_make(o.seed, ct_rng_stream(CT_DATA_RNG_TOY, o.task));
  ct_string_table seen = {0};
  st = generate_split(&r, &o, o.train_size, "train", &seen, &out->train);
  if (!st) st = generate_split(&r, &o, o.val_size, "val", &seen, &out->val);
  if (!st) st = generate_split(&r, &o, o.test_size, "test", &seen, &out->test);
  ct_string_table_free(&seen);
  if (st) ct_toy_corpus_free(out);
  return st;
}

void ct_toy_corpus_free(ct_toy_corpus *c) {
  ct_parallel_text_free(&c->train);
  ct_parallel_text_free(&c->val);
  ct_parallel_text_free(&c->test);
}

static const char *const task_names[] = {[CT_TOY_COPY] = "copy",
                                         [CT_TOY_REVERSE] = "reverse",
                                         [CT_TOY_GRAMMAR] = "grammar"};

const char *ct_toy_task_name(ct_toy_task task) {
  return (unsigned)task < 3 ? task_names[task] : "unknown";
}

ct_status ct_toy_task_parse(const char *name, ct_toy_task *task) {
  for (int i = 0; i < 3; i++)
    if (!strcmp(name, task_names[i])) {
      *task = (ct_toy_task)i;
      return CT_OK;
    }
  return ct_error(CT_ERR_ARG,
                  "toy translation: unknown task \"%s\" (copy, reverse or "
                  "grammar)",
                  name);
}

// ---- the writer ----

static ct_status write_lines(const char *path, const ct_string_list *lines) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
    return ct_error(CT_ERR_ARG, "%s: path too long", path);
  FILE *f = fopen(tmp, "wb");
  if (!f)
    return ct_error(CT_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
  int err = 0;  // the errno of the first failure
  for (int64_t i = 0; !err && i < lines->count; i++)
    if (fputs(ct_string_list_get(lines, i), f) < 0 || fputc('\n', f) == EOF)
      err = errno ? errno : EIO;
  if (!err && fflush(f) != 0) err = errno;
  if (!err && fsync(fileno(f)) != 0) err = errno;
  if (fclose(f) != 0 && !err) err = errno;
  if (!err && rename(tmp, path) != 0) err = errno;
  if (!err) return CT_OK;
  remove(tmp);
  return ct_error(CT_ERR_IO, "%s: write failed: %s", path, strerror(err));
}

ct_status ct_toy_translation_write(const char *dir, const ct_toy_options *opt,
                                   bool overwrite) {
  static const char *const files[6] = {"train.src", "train.tgt", "val.src",
                                       "val.tgt",   "test.src",  "test.tgt"};
  char paths[6][4096];
  for (int i = 0; i < 6; i++)
    if (snprintf(paths[i], sizeof paths[i], "%s/%s", dir, files[i]) >=
        (int)sizeof paths[i])
      return ct_error(CT_ERR_ARG, "%s: path too long", dir);
  if (!overwrite)
    for (int i = 0; i < 6; i++)
      if (access(paths[i], F_OK) == 0)
        return ct_error(CT_ERR_IO,
                        "%s already exists; not overwriting it (choose "
                        "another directory or allow overwriting)",
                        paths[i]);
  ct_toy_corpus c;
  ct_status st = ct_toy_translation_generate(opt, &c);
  if (st) return st;
  st = ct_make_dirs(dir);
  const ct_parallel_text *splits[3] = {&c.train, &c.val, &c.test};
  for (int i = 0; !st && i < 3; i++) {
    st = write_lines(paths[2 * i], &splits[i]->src);
    if (!st) st = write_lines(paths[2 * i + 1], &splits[i]->tgt);
  }
  ct_toy_corpus_free(&c);
  return st;
}
