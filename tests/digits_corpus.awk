# A parallel corpus of numbers and dates in English words (source) and in
# digits written without spaces (target): the case where a word tokenizer
# fails (every number is one token, so test numbers are unseen) and char or
# BPE tokens succeed.
#   six hundred eighty two thousand five hundred fifty four  ->  682554
#   the twenty eighth of september nineteen eleven           ->  1911-09-28
# Half numbers (0..999999, the digit count drawn uniformly from 1..6), half
# dates (years 1900..2029, days 1..28). Every source line occurs once over
# all splits, so validation and test targets never occur in training.
# Deterministic in every awk (its own MINSTD generator, not rand()).
#
# usage: awk -v out=DIR [-v seed=1] [-v train=20000] [-v val=500]
#            [-v test=500] -f tests/digits_corpus.awk
# writes DIR/train.tsv, DIR/val.tsv, DIR/test.tsv (source<TAB>target).
function next_int(n) {  # uniform in [0, n)
  state = (state * 48271) % 2147483647
  return int(state / 2147483647 * n)
}
function below_thousand(n,    s) {  # 1..999 in words
  s = ""
  if (n >= 100) {
    s = ones[int(n / 100)] " hundred"
    n = n % 100
    if (n == 0) return s
    s = s " "
  }
  if (n < 20) return s ones[n]
  s = s tens[int(n / 10)]
  if (n % 10) s = s " " ones[n % 10]
  return s
}
function number_words(n,    s) {
  if (n == 0) return "zero"
  s = ""
  if (n >= 1000) {
    s = below_thousand(int(n / 1000)) " thousand"
    n = n % 1000
    if (n == 0) return s
    s = s " "
  }
  return s below_thousand(n)
}
function year_words(y) {
  if (y == 1900) return "nineteen hundred"
  if (y < 1910) return "nineteen oh " ones[y - 1900]
  if (y < 2000) return "nineteen " below_thousand(y - 1900)
  return number_words(y)
}
function pad2(n) { return n < 10 ? "0" n : n }
function draw(    digits, n, y, m, d) {
  if (next_int(2) == 0) {
    digits = 1 + next_int(6)
    n = digits == 1 ? next_int(10) : 10 ^ (digits - 1) + next_int(9 * 10 ^ (digits - 1))
    src = number_words(n)
    tgt = n
  } else {
    y = 1900 + next_int(130)
    m = 1 + next_int(12)
    d = 1 + next_int(28)
    src = "the " ordinals[d] " of " months[m] " " year_words(y)
    tgt = y "-" pad2(m) "-" pad2(d)
  }
}
function write_split(file, count,    k) {
  printf "" > file
  for (k = 0; k < count;) {
    draw()
    if (src in seen) continue
    seen[src] = 1
    print src "\t" tgt > file
    k++
  }
  close(file)
}
BEGIN {
  if (out == "") { print "digits_corpus.awk: set -v out=DIR" > "/dev/stderr"; exit 2 }
  state = (seed == "" ? 1 : seed) % 2147483646 + 1
  if (train == "") train = 20000
  if (val == "") val = 500
  if (test == "") test = 500
  split("one two three four five six seven eight nine ten eleven twelve " \
        "thirteen fourteen fifteen sixteen seventeen eighteen nineteen", ones, " ")
  ones[0] = "zero"
  split("ten twenty thirty forty fifty sixty seventy eighty ninety", tens, " ")
  split("first second third fourth fifth sixth seventh eighth ninth tenth " \
        "eleventh twelfth thirteenth fourteenth fifteenth sixteenth " \
        "seventeenth eighteenth nineteenth twentieth", ordinals, " ")
  for (d = 21; d <= 28; d++) ordinals[d] = "twenty " ordinals[d - 20]
  split("january february march april may june july august september " \
        "october november december", months, " ")
  write_split(out "/train.tsv", train)
  write_split(out "/val.tsv", val)
  write_split(out "/test.tsv", test)
}
