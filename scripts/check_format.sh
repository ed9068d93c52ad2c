#!/usr/bin/env bash
# Checks that ferry's C++ sources follow .clang-format (clang-format 14, Debian's clang-format-14):
# every tracked .h and .cc under include/, src/, test/, bench/, examples/ and fuzz/. Prints the
# files that differ and the command that fixes them; exits non-zero if any does. Also refuses a
# co_await inside a conditional expression, which GCC 12 miscompiles.
# Usage: scripts/check_format.sh [--fix]
set -euo pipefail
cd "$(dirname "$0")/.."
format=${CLANG_FORMAT:-clang-format-14}
command -v "$format" >/dev/null 2>&1 || { echo "check_format: $format not found" >&2; exit 1; }
mapfile -t files < <(git ls-files -- 'include/*.h' 'src/*.h' 'src/*.cc' 'test/*.h' 'test/*.cc' \
  'bench/*.h' 'bench/*.cc' 'examples/*.h' 'examples/*.cc' 'fuzz/*.h' 'fuzz/*.cc')
if [ "${1:-}" = "--fix" ]; then
  "$format" -i "${files[@]}"
  exit 0
fi
# GCC 12 miscompiles a conditional expression with co_await in its arms (`c ? co_await a :
# co_await b`: neither runs, or the result is garbage; it crashed the soak's client): an if,
# always. The check is textual, on a `?` or `:` right before co_await.
if traps=$(grep -nE '(\?|[^:]:)[[:space:]]*co_await' "${files[@]}"); then
  echo "$traps" | sed 's/^/co_await in a conditional expression: /' >&2
  echo "write it as an if/else (GCC 12 miscompiles it)" >&2
  exit 1
fi
# One clang-format for all files; with --Werror each file that would change is reported as
# "file:line:col: error: code should be clang-formatted".
if report=$("$format" --dry-run --Werror "${files[@]}" 2>&1); then
  echo "check_format: ${#files[@]} files follow .clang-format, no co_await in a conditional"
  exit 0
fi
echo "$report" | grep -oE '^[^:]+\.(h|cc):' | tr -d : | sort -u | sed 's/^/not formatted: /' >&2
echo "fix with: scripts/check_format.sh --fix" >&2
exit 1
