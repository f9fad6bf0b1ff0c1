#!/usr/bin/env bash
# The test docs_links_and_flags: the README and docs/ hold together.
#   - every relative link in README.md and docs/*.md names a file or folder that exists, and a
#     link with an #anchor into a markdown file names one of its headings (GitHub's anchors:
#     the heading's text in lower case, punctuation dropped, spaces as hyphens, -1, -2, ... for
#     repeats);
#   - every flag that a program prints in its --help, and every gpipe-plan subcommand, appears
#     on docs/commands.md.
# Usage: check_docs.sh SOURCE_DIR PROGRAM...   (the programs as built: ctest passes their paths)
set -uo pipefail
export LC_ALL=C
source_dir=$1
shift
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# The markdown text outside fenced code blocks, with inline code spans removed.
prose() {
  awk '/^[[:space:]]*```/ { fenced = !fenced; next } !fenced' "$1" | sed -E 's/`[^`]*`//g'
}

# The anchors GitHub gives the headings of a markdown file, one a line.
anchors() {
  awk '/^[[:space:]]*```/ { fenced = !fenced; next } !fenced && /^#+ /' "$1" |
    sed -E 's/^#{1,6} +//; s/ +#* *$//; s/\[([^]]*)\]\([^)]*\)/\1/g' |
    tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9 _-]//g; s/ /-/g' |
    awk '{ n = seen[$0]++; print (n ? $0 "-" n : $0) }'
}

check_links() {
  local file=$1 dir target path anchor
  dir=$(dirname "$file")
  while IFS= read -r target; do
    case $target in
      http://* | https://* | mailto:*) continue ;;
    esac
    path=${target%%#*}
    anchor=
    [[ $target == *#* ]] && anchor=${target#*#}
    if [[ -z $path ]]; then
      path=$file
    else
      path=$dir/$path
    fi
    if [[ ! -e $path ]]; then
      fail "${file#"$source_dir"/}: link ($target) names ${path#"$source_dir"/}, which does not exist"
      continue
    fi
    # grep reads the whole list: with -q it could stop early and fail the pipe under pipefail.
    if [[ -n $anchor && $path == *.md ]] && ! grep -xF -- "$anchor" <<<"$(anchors "$path")" >/dev/null; then
      fail "${file#"$source_dir"/}: link ($target): ${path#"$source_dir"/} has no heading #$anchor"
    fi
  done < <(prose "$file" | grep -oE '\]\([^) ]+\)' | sed -E 's/^\]\(//; s/\)$//')
}

shopt -s nullglob
pages=("$source_dir/README.md" "$source_dir"/docs/*.md)
for page in "${pages[@]}"; do
  check_links "$page"
done

commands=$source_dir/docs/commands.md
if [[ ! -f $commands ]]; then
  fail "docs/commands.md is missing"
else
  for program in "$@"; do
    name=$(basename "$program")
    help=$("$program" --help 2>&1)
    if [[ -z $help ]]; then
      fail "$name --help printed nothing"
      continue
    fi
    flags=$(grep -oE '(^|[^A-Za-z0-9_-])--?[A-Za-z][A-Za-z0-9-]*' <<<"$help" |
              sed -E 's/^[^-]//' | sort -u)
    if [[ $name == gpipe-plan ]]; then
      flags+=$'\n'$(grep -oE 'gpipe-plan [a-z][a-z-]*' <<<"$help" | sort -u)
    fi
    while IFS= read -r flag; do
      [[ -z $flag ]] && continue
      if ! grep -E -- "(^|[^A-Za-z0-9_-])${flag}([^A-Za-z0-9_-]|$)" "$commands" >/dev/null; then
        fail "docs/commands.md does not mention '$flag', which $name --help prints"
      fi
    done <<<"$flags"
  done
fi

if ((failures > 0)); then
  echo "$failures problem(s) in README.md and docs/"
  exit 1
fi
echo "README.md and docs/: every relative link resolves, and docs/commands.md names every flag of: $*"
