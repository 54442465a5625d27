#!/usr/bin/env bash
# Functions short enough to see at once (STYLE.md): every function defined in
# the .cpp and .hpp files of the given folders may span at most LIMIT lines,
# from the first line of its signature to its closing brace. cli/ is held to
# 100 (issue #58: the commands parse options and call the layers that own
# the work). Exits non-zero naming every longer function as FILE:LINE; with
# --list, prints every function's length (longest first) and exits 0.
#
#   function_length.sh [--list] SOURCE_ROOT LIMIT FOLDER...
#
# The measure is textual, not a parser: comments, string and character
# literals are blanked first; a brace opened outside any function, after text
# holding a '(' and not in parentheses, opens a function (lambdas and local
# classes count toward the function that holds them); namespace, class,
# struct, enum and extern "C" bodies are walked into.
set -euo pipefail
list=0
if [[ ${1:-} == --list ]]; then
  list=1
  shift
fi
root=${1:?usage: function_length.sh [--list] SOURCE_ROOT LIMIT FOLDER...}
limit=${2:?usage: function_length.sh [--list] SOURCE_ROOT LIMIT FOLDER...}
shift 2
(($# > 0)) || { echo "usage: function_length.sh [--list] SOURCE_ROOT LIMIT FOLDER..." >&2; exit 2; }

files=()
for folder in "$@"; do
  [[ -d $root/$folder ]] || { echo "function_length: no folder $root/$folder" >&2; exit 2; }
  while IFS= read -r -d '' file; do files+=("$file"); done \
    < <(find "$root/$folder" -type f \( -name '*.cpp' -o -name '*.hpp' \) -print0 | sort -z)
done
((${#files[@]} > 0)) || { echo "function_length: no sources under $*" >&2; exit 1; }

# Prints "LINES FILE:LINE NAME" for every function.
measure() {
  awk '
    FNR == 1 { depth = 0; in_comment = 0; statement = ""; statement_line = 0; parens = 0; function_depth = 0 }
    # Blanks a line down to its code: block comments (across lines), line
    # comments, preprocessor lines, string and character literals.
    function code_of(line,    out, i, c, next_c, quote) {
      out = ""
      if (!in_comment && line ~ /^[ \t]*#/) return ""
      gsub(/[0-9]\x27[0-9]/, "00", line)  # digit separators (1'\''000) are no quotes
      for (i = 1; i <= length(line); i++) {
        c = substr(line, i, 1); next_c = substr(line, i + 1, 1)
        if (in_comment) {
          if (c == "*" && next_c == "/") { in_comment = 0; i++ }
          continue
        }
        if (c == "/" && next_c == "*") { in_comment = 1; i++; continue }
        if (c == "/" && next_c == "/") break
        if (c == "\"" || c == "\x27") {
          quote = c
          for (i++; i <= length(line) && substr(line, i, 1) != quote; i++) {
            if (substr(line, i, 1) == "\\") i++
          }
          out = out " "
          continue
        }
        out = out c
      }
      return out
    }
    function name_of(text,    head) {
      head = text
      sub(/\(.*/, "", head)
      sub(/[ \t]+$/, "", head)
      sub(/.*[ \t*&]/, "", head)
      return head
    }
    {
      code = code_of($0)
      if (function_depth == 0) sub(/^[ \t]*(public|private|protected)[ \t]*:/, "", code)
      for (i = 1; i <= length(code); i++) {
        c = substr(code, i, 1)
        if (function_depth > 0) {
          if (c == "{") depth++
          if (c == "}" && --depth < function_depth) {
            printf "%d %s:%d %s\n", FNR - start_line + 1, FILENAME, start_line, name
            function_depth = 0
            statement = ""
          }
          continue
        }
        if (c == "(") parens++
        if (c == ")") parens--
        if ((c == "{" || c == "}") && parens > 0) { statement = statement c; continue }
        if (c == "{") {
          depth++
          if (statement ~ /\(/ && statement !~ /(^|[^A-Za-z0-9_])(namespace|class|struct|union|enum)[ \t]/ &&
              statement !~ /=[ \t]*$/) {
            function_depth = depth
            start_line = statement_line
            name = name_of(statement)
          }
          statement = ""
          continue
        }
        if (c == "}") { depth--; statement = ""; continue }
        if (c == ";") { statement = ""; continue }
        if (statement == "" && c ~ /[ \t]/) continue
        if (statement == "") statement_line = FNR
        statement = statement c
      }
      if (statement != "") statement = statement " "
    }
  ' "${files[@]}"
}

measured=$(measure)
if ((list)); then
  sort -rn <<<"$measured" | sed "s|$root/||"
  exit 0
fi
long=$(awk -v limit="$limit" '$1 > limit' <<<"$measured" | sort -rn)
if [[ -n $long ]]; then
  while read -r lines where name; do
    echo "function_length: ${where#"$root"/}: $name is $lines lines (at most $limit)" >&2
  done <<<"$long"
  echo "function_length: $(wc -l <<<"$long") function(s) longer than $limit lines" >&2
  exit 1
fi
echo "function_length: $(wc -l <<<"$measured") functions in ${#files[@]} files, none over $limit lines"
