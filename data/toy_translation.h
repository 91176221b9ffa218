// Built-in toy translation corpora, generated in-process from a seed.
//
// Tasks:
//   copy     source: random words "a0".."a<symbols-1>", length in
//            [min_len, max_len]; target: the same sequence.
//   reverse  as copy, target reversed.
//   grammar  an English-like source and a German-like target ("Toy German")
//            from a small grammar: 30 nouns (3 genders, irregular plurals),
//            15 adjectives, 21 verbs, 5 prepositions, 3 conjunctions. The
//            target
//              - inflects: articles and adjective endings by gender, number
//                and case (nominative subject, accusative or dative object by
//                verb, dative recipient and prepositional object), dative
//                plural nouns add -n, verbs agree with the subject's number;
//              - reorders: adjectives follow their noun, "gives X to Y" puts
//                the recipient first, "not" moves after the objects,
//                subordinate clauses (because/while/although) are verb-final,
//                separable verbs send their particle to the clause end
//                ("calls the dog" -> "ruft den hund an") but glue it on in
//                subordinate clauses ("... den hund anruft");
//              - maps many-to-one ("will see" -> "sehra", "in the" -> "im",
//                "towards the" -> "zum"/"zur", "to" before a recipient -> nothing)
//                and one-to-many ("calls" -> "ruft ... an", a comma before
//                the conjunction).
//            E.g. "the big dog does not help my small cats in the garden ."
//              -> "der hund große helft meinen katzen kleinen nicht im garten ."
// Sentences are space-separated tokens that data/tokenizer.h splits back
// unchanged. Every source sentence is distinct across train, val and test,
// so val/test hold only sentences never seen in training. The corpus is a
// function of (task, seed, sizes, lengths, symbols): Philox stream
// (CT_DATA_RNG_TOY, task), drawn sequentially, train then val then test.
//
// What this file does not do: tokenization or vocabularies (the corpora go
// through the same text pipeline as files), or realistic German.
#ifndef CT_DATA_TOY_TRANSLATION_H
#define CT_DATA_TOY_TRANSLATION_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "data/text.h"

typedef enum ct_toy_task {
  CT_TOY_COPY,
  CT_TOY_REVERSE,
  CT_TOY_GRAMMAR
} ct_toy_task;

typedef struct ct_toy_options {
  ct_toy_task task;
  uint64_t seed;
  int64_t train_size, val_size, test_size;  // pairs per split
  int min_len, max_len;  // copy/reverse: length range (0, 0: 3..12)
  int symbols;           // copy/reverse: distinct words (0: 50)
} ct_toy_options;

typedef struct ct_toy_corpus {
  ct_parallel_text train, val, test;
} ct_toy_corpus;

// Generates the three splits into a fresh *out. CT_ERR_ARG for bad options,
// or when the task cannot produce that many distinct sentences.
ct_status ct_toy_translation_generate(const ct_toy_options *opt,
                                      ct_toy_corpus *out);
void ct_toy_corpus_free(ct_toy_corpus *c);

// Generates and writes DIR/{train,val,test}.{src,tgt} (one sentence per
// line, UTF-8), creating DIR (and its parents) if missing. Existing files
// are an error (CT_ERR_IO naming the file) unless `overwrite`; each file is
// written to a temporary name and renamed, so a failure never leaves a
// half-written file in place.
ct_status ct_toy_translation_write(const char *dir, const ct_toy_options *opt,
                                   bool overwrite);

// "copy", "reverse", "grammar" <-> the task (CT_ERR_ARG for an unknown name).
const char *ct_toy_task_name(ct_toy_task task);
ct_status ct_toy_task_parse(const char *name, ct_toy_task *task);

#endif
