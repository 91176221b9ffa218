# Shared by the program's end-to-end test scripts, which source it right
# after `set -u`: their first argument is the ctrain binary.
#   . "$(dirname "$0")/e2e_lib.sh"
# Sets ctrain (made absolute), tmp (a scratch folder removed at exit) and
# fails (the count of failed checks), and defines the check helpers below.
ctrain=$1
case $ctrain in */*) ctrain=$(cd "$(dirname "$ctrain")" && pwd)/$(basename "$ctrain") ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; fails=$((fails + 1)); }
expect() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }  # DESC CONDITION
# jnum JSON KEY / jstr JSON KEY: a number or string member of a JSON line.
jnum() { sed -n "s/.*\"$2\": *\([-0-9.eE+]*\).*/\1/p" <<<"$1"; }
jstr() { sed -n "s/.*\"$2\": *\"\([^\"]*\)\".*/\1/p" <<<"$1"; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 >= b + 0) }'; }
# fails_with DESC PATTERN CMD...: exit 1 and stderr matching PATTERN.
fails_with() {
  local desc=$1 pattern=$2
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -eq 1 ] && grep -q -- "$pattern" "$tmp/err"; then ok "$desc"
  else bad "$desc (exit $rc: $(head -c 300 "$tmp/err"))"; fi
}
# sets KEY=VALUE...: one `--set KEY=VALUE` pair per line, for mapfile.
sets() { for s in "$@"; do printf -- '--set\n%s\n' "$s"; done; }
