// BLEU against hand-computed cases (the arithmetic is in the comments) and
// the 13a tokenizer against sacreBLEU's rules on punctuation, numbers,
// entities and Unicode.
#include "core/error.h"
#include "tests/harness.h"
#include "train/bleu.h"

#include <stdlib.h>
#include <string.h>

static void check_tok(const char *in, const char *want) {
  char *got = ct_bleu_tokenize_13a(in);
  CHECK(got && !strcmp(got, want), "tokenize '%s':\n  got  '%s'\n  want '%s'",
        in, got, want);
  free(got);
}

static void test_tokenizer(void) {
  check_tok("Hello, world!", "Hello , world !");
  // '$' is split off; '.' and ',' stay inside numbers and split elsewhere.
  check_tok("It costs $3.50, or 3,000 yen.",
            "It costs $ 3.50 , or 3,000 yen .");
  // A dash splits only after a digit.
  check_tok("well-known 1990-2000", "well-known 1990 - 2000");
  check_tok("don't (yes) [no] {x} a/b a:b a;b 100% #1 @me",
            "don't ( yes ) [ no ] { x } a / b a : b a ; b 100 % # 1 @ me");
  // Entities are unescaped, then the symbols split.
  check_tok("&quot;Hi&quot; &amp; &lt;b&gt;", "\" Hi \" & < b >");
  check_tok("&amp;quot;", "& quot ;");
  check_tok("a<skipped>b", "ab");
  check_tok("end-\nline and\nmore", "endline and more");
  // The right-strip happens first, so a trailing "-\n" is not joined.
  check_tok("foo-\n", "foo-");
  check_tok("e.g. U.S.A.", "e . g . U . S . A .");
  // re.sub matches do not overlap: rule 2 takes "a." and then cannot see ".,";
  // rule 3 then splits the comma.
  check_tok("a.,b", "a . , b");
  check_tok("1.5.", "1.5 .");
  check_tok("  spaced \t out\r\n", "spaced out");
  check_tok("", "");
  check_tok("   ", "");
  // UTF-8: a multi-byte letter counts as [^0-9]; NBSP (U+00A0), U+3000 and
  // U+2009 are whitespace for Python's str.split; U+200B is not.
  check_tok("naïve café.", "naïve café .");
  check_tok(
      "a\xc2\xa0"
      "b\xe3\x80\x80"
      "c\xe2\x80\x89"
      "d\xe2\x80\x8b"
      "e",
      "a b c d\xe2\x80\x8b"
      "e");
  check_tok("\xe2\x80\x9cquoted\xe2\x80\x9d.",
            "\xe2\x80\x9cquoted\xe2\x80\x9d .");
}

static void test_identical(void) {
  const char *hyp[] = {"The cat sat on the mat.", "It was not unexpected."};
  ct_bleu b;
  CHECK(ct_bleu_corpus(hyp, hyp, 2, 1, &b) == CT_OK, "%s", ct_last_error());
  CHECK_CLOSE(b.score, 100.0, 1e-12, "identical corpus");
  CHECK_CLOSE(b.bp, 1.0, 0, "bp");
  // "The cat sat on the mat ." 7 tokens + "It was not unexpected ." 5 tokens.
  CHECK(b.sys_len == 12 && b.ref_len == 12, "lens %lld %lld",
        (long long)b.sys_len, (long long)b.ref_len);
  CHECK(b.total[0] == 12 && b.total[3] == 4 + 2, "totals %lld %lld",
        (long long)b.total[0], (long long)b.total[3]);
}

static void test_known_precisions(void) {
  // hyp "the cat sat on the mat" vs ref "the cat is on the mat":
  //   1-grams: the x2, cat, on, mat match; sat not        -> 5/6 = 83.33%
  //   2-grams: the cat, on the, the mat                    -> 3/5 = 60%
  //   3-grams: on the mat                                  -> 1/4 = 25%
  //   4-grams: none of 3; exp smoothing: 100 / (2 * 3)    -> 16.67%
  //   BP = 1 (6 vs 6); BLEU = (83.33 * 60 * 25 * 16.67)^(1/4) = 2083333.3^(1/4) = 37.99
  const char *hyp[] = {"the cat sat on the mat"},
             *ref[] = {"the cat is on the mat"};
  ct_bleu b;
  CHECK(ct_bleu_corpus(hyp, ref, 1, 1, &b) == CT_OK, "%s", ct_last_error());
  CHECK_CLOSE(b.precisions[0], 500.0 / 6, 1e-12, "p1");
  CHECK_CLOSE(b.precisions[1], 60.0, 1e-12, "p2");
  CHECK_CLOSE(b.precisions[2], 25.0, 1e-12, "p3");
  CHECK_CLOSE(b.precisions[3], 100.0 / 6, 1e-12, "p4 (smoothed)");
  CHECK(b.correct[3] == 0 && b.total[3] == 3, "4-gram counts");
  CHECK_CLOSE(b.score, pow(500.0 / 6 * 60 * 25 * 100.0 / 6, 0.25), 1e-12,
              "score");
  CHECK_CLOSE(b.score, 37.9918, 1e-5, "score, by hand");

  // Brevity: hyp "the cat sat on" (4) vs ref of 6 tokens: every precision is
  // 100%, BP = exp(1 - 6/4) = exp(-0.5) = 0.60653, BLEU = 60.653.
  const char *hyp2[] = {"the cat sat on"}, *ref2[] = {"the cat sat on the mat"};
  CHECK(ct_bleu_corpus(hyp2, ref2, 1, 1, &b) == CT_OK, "%s", ct_last_error());
  CHECK_CLOSE(b.bp, exp(-0.5), 1e-12, "bp");
  CHECK_CLOSE(b.score, 100 * exp(-0.5), 1e-12, "bp score");
  CHECK_CLOSE(b.score, 60.653, 1e-4, "bp score, by hand");

  // Both as one corpus: counts add before dividing.
  //   p = (5+4)/(6+4), (3+3)/(5+3), (1+2)/(4+2), (0+1)/(3+1) = 90, 75, 50, 25 %
  //   BP = exp(1 - 12/10) = 0.81873; BLEU = 0.81873 * (90*75*50*25)^(1/4) = 44.126
  const char *hyp3[] = {"the cat sat on the mat", "the cat sat on"};
  const char *ref3[] = {"the cat is on the mat", "the cat sat on the mat"};
  CHECK(ct_bleu_corpus(hyp3, ref3, 2, 1, &b) == CT_OK, "%s", ct_last_error());
  CHECK(b.sys_len == 10 && b.ref_len == 12, "corpus lens");
  CHECK_CLOSE(b.precisions[3], 25.0, 1e-12, "corpus p4 (no smoothing needed)");
  CHECK_CLOSE(b.score, exp(-0.2) * pow(90.0 * 75 * 50 * 25, 0.25), 1e-12,
              "corpus score");
  CHECK_CLOSE(b.score, 44.126, 1e-4, "corpus score, by hand");
  char line[160];
  ct_bleu_format(&b, line, sizeof line);
  CHECK(!strcmp(line,
                "BLEU = 44.13 90.0/75.0/50.0/25.0 (BP = 0.819 ratio = 0.833 "
                "hyp_len = 10 ref_len = 12)"),
        "format '%s'", line);
}

static void test_clipping_and_refs(void) {
  // hyp "the the the the" vs "the cat": 'the' is clipped to 1 -> p1 = 1/4.
  // No higher-order match: p2 = 100/(2*3), p3 = 100/(4*2), p4 = 100/(8*1).
  // BP = 1 (4 >= 2). BLEU = (25 * 16.667 * 12.5 * 12.5)^(1/4) = 15.973
  const char *hyp[] = {"the the the the"}, *ref[] = {"the cat"};
  ct_bleu b;
  CHECK(ct_bleu_corpus(hyp, ref, 1, 1, &b) == CT_OK, "%s", ct_last_error());
  CHECK(b.correct[0] == 1 && b.total[0] == 4, "clipped %lld/%lld",
        (long long)b.correct[0], (long long)b.total[0]);
  CHECK_CLOSE(b.precisions[2], 12.5, 1e-12, "p3 smoothed twice");
  CHECK_CLOSE(b.precisions[3], 12.5, 1e-12, "p4 smoothed three times");
  CHECK_CLOSE(b.score, pow(25 * 100.0 / 6 * 12.5 * 12.5, 0.25), 1e-12, "score");
  CHECK_CLOSE(b.score, 15.973, 1e-4, "score, by hand");

  // Two reference streams; clipping takes the max count over references and
  // the closest reference length (4, not 2) is used.
  // hyp "the cat sat down", refs "the cat" / "a cat sat down":
  //   p1 4/4, p2 3/3, p3 1/2 (cat sat down), p4 0/1 -> 100/2 = 50
  //   BLEU = (100 * 100 * 50 * 50)^(1/4) = 70.711
  const char *hyp2[] = {"the cat sat down"};
  const char *refs2[] = {"the cat", "a cat sat down"};
  CHECK(ct_bleu_corpus(hyp2, refs2, 1, 2, &b) == CT_OK, "%s", ct_last_error());
  CHECK(b.ref_len == 4, "closest ref len %lld", (long long)b.ref_len);
  CHECK_CLOSE(b.score, sqrt(5000.0), 1e-12, "multi-ref score");
  // An empty second reference is skipped, as in sacreBLEU.
  const char *refs3[] = {"a cat sat down", ""};
  CHECK(ct_bleu_corpus(hyp2, refs3, 1, 2, &b) == CT_OK, "%s", ct_last_error());
  CHECK_CLOSE(b.precisions[0], 75.0, 1e-12, "p1 with one ref");
  // Tie on length distance: the shorter reference wins (hyp 3; refs 2 and 4).
  const char *hyp4[] = {"x y z"}, *refs4[] = {"a b c d", "a b"};
  CHECK(ct_bleu_corpus(hyp4, refs4, 1, 2, &b) == CT_OK, "%s", ct_last_error());
  CHECK(b.ref_len == 2, "tie -> shorter ref, got %lld", (long long)b.ref_len);
}

// Cumulative BLEU-1..4 over several references per segment: NLTK's
// corpus_bleu documentation example (two segments, three references for the
// first, one for the second), corpus_bleu = 0.5920778868801042. By hand:
// clipped matches 28/29, 19/27, 13/25, 8/23; hyp_len 29; closest reference
// lengths 18 (ref b, |18 - 18| = 0) + 11 = 29, so BP = 1.
static void test_cumulative(void) {
  const char *hyp[] = {
      "It is a guide to action which ensures that the military always obeys "
      "the commands of the party",
      "he read the book because he was interested in world history"};
  const char *refs[] = {
      "It is a guide to action that ensures that the military will forever "
      "heed Party commands",
      "he was interested in world history because he read the book",
      "It is the guiding principle which guarantees the military forces "
      "always being under the command of the Party",
      NULL,
      "It is the practical guide for the army always to heed the directions "
      "of the party",
      NULL};
  ct_bleu b;
  CHECK(ct_bleu_corpus(hyp, refs, 2, 3, &b) == CT_OK, "%s", ct_last_error());
  const int64_t correct[] = {28, 19, 13, 8}, total[] = {29, 27, 25, 23};
  for (int k = 0; k < 4; k++)
    CHECK(b.correct[k] == correct[k] && b.total[k] == total[k],
          "order %d: %lld/%lld, want %lld/%lld", k + 1, (long long)b.correct[k],
          (long long)b.total[k], (long long)correct[k], (long long)total[k]);
  CHECK(b.sys_len == 29 && b.ref_len == 29 && b.bp == 1.0, "lengths %lld %lld",
        (long long)b.sys_len, (long long)b.ref_len);
  CHECK_CLOSE(ct_bleu_cumulative(&b, 1), 100.0 * 28 / 29, 1e-12, "bleu1");
  CHECK_CLOSE(ct_bleu_cumulative(&b, 2), 100.0 * sqrt(28.0 / 29 * 19 / 27),
              1e-12, "bleu2");
  CHECK_CLOSE(ct_bleu_cumulative(&b, 3),
              100.0 * cbrt(28.0 / 29 * 19 / 27 * 13 / 25), 1e-12, "bleu3");
  CHECK_CLOSE(ct_bleu_cumulative(&b, 4), 59.20778868801042, 1e-12,
              "bleu4 (NLTK's documented value)");
  CHECK_CLOSE(ct_bleu_cumulative(&b, 4), b.score, 1e-12, "bleu4 = score");
  CHECK_CLOSE(ct_bleu_cumulative(&b, 2), 82.42803277698696, 1e-12,
              "bleu2, independent count");
  // A short hypothesis: BP < 1 scales every order. hyp "the cat" vs refs
  // "the cat sat" / "a cat sat on it": closest length 3, BP = exp(1 - 3/2);
  // BLEU-1 = BP * 2/2, BLEU-2 = BP * sqrt(1 * 1/1); no trigram: BLEU-3 = 0.
  const char *hyp2[] = {"the cat"},
             *refs2[] = {"the cat sat", "a cat sat on it"};
  CHECK(ct_bleu_corpus(hyp2, refs2, 1, 2, &b) == CT_OK, "%s", ct_last_error());
  CHECK_CLOSE(ct_bleu_cumulative(&b, 1), 100.0 * exp(-0.5), 1e-12,
              "short bleu1");
  CHECK_CLOSE(ct_bleu_cumulative(&b, 2), 100.0 * exp(-0.5), 1e-12,
              "short bleu2");
  CHECK(ct_bleu_cumulative(&b, 3) == 0.0 && ct_bleu_cumulative(&b, 4) == 0.0,
        "no trigram: bleu3 %g bleu4 %g", ct_bleu_cumulative(&b, 3),
        ct_bleu_cumulative(&b, 4));
  CHECK(ct_bleu_cumulative(&b, 0) == 0.0 && ct_bleu_cumulative(&b, 5) == 0.0,
        "orders outside 1..4");
}

static void test_empty(void) {
  ct_bleu b;
  // An empty hypothesis: no n-grams, BP = 0, BLEU = 0.
  const char *hyp[] = {""}, *ref[] = {"the cat"};
  CHECK(ct_bleu_corpus(hyp, ref, 1, 1, &b) == CT_OK, "%s", ct_last_error());
  CHECK(b.score == 0.0 && b.bp == 0.0 && b.sys_len == 0 && b.ref_len == 2,
        "empty hyp");
  // No 4-gram at all in the corpus: sacreBLEU takes log(0) as -9999999999, so 0.
  const char *hyp2[] = {"the cat"}, *ref2[] = {"the cat"};
  CHECK(ct_bleu_corpus(hyp2, ref2, 1, 1, &b) == CT_OK, "%s", ct_last_error());
  CHECK(b.score == 0.0 && b.precisions[0] == 100.0 && b.total[2] == 0,
        "short corpus");
  // No match at all.
  const char *hyp3[] = {"x y z w"};
  CHECK(ct_bleu_corpus(hyp3, ref2, 1, 1, &b) == CT_OK, "%s", ct_last_error());
  CHECK(b.score == 0.0 && b.precisions[0] == 0.0, "no match");
  // An empty corpus.
  CHECK(ct_bleu_corpus(NULL, NULL, 0, 1, &b) == CT_OK && b.score == 0.0,
        "n = 0");
  // An empty reference is an error naming the segment.
  const char *hyp4[] = {"a", "b"}, *ref4[] = {"a", ""};
  CHECK(ct_bleu_corpus(hyp4, ref4, 2, 1, &b) == CT_ERR_ARG,
        "empty reference accepted");
  CHECK(
      !strcmp(ct_last_error(), "bleu: segment 1 has no reference (empty line)"),
      "'%s'", ct_last_error());
}

int main(void) {
  test_tokenizer();
  test_identical();
  test_known_precisions();
  test_clipping_and_refs();
  test_empty();
  test_cumulative();
  return test_summary("bleu");
}
