#!/usr/bin/env bash
# The pictures of README.md and docs/: SVG timelines drawn by `gpipe-plan timeline`.
#   scripts/docs_pictures.sh [--bin DIR]            redraw every picture into docs/pictures/
#   scripts/docs_pictures.sh --check [--bin DIR]    redraw into a temporary folder and fail, naming
#                                                   the picture, where a committed one differs
#                                                   (the test docs_pictures_current)
#   scripts/docs_pictures.sh --record [--bin DIR]   first train the main example with a trace of
#                                                   its first steps (gpipe-run, 4 processes) and
#                                                   keep it as docs/pictures/mlp-trace.json.gz
# The pictures:
#   mlp-step.svg        a real step of examples/mlp (the README's), from the recorded trace;
#   schedule-*.svg      each training schedule simulated on docs/pictures/schedules.pbtxt
#                       (8 equal layers on the simulated device: F = B = W = 1 ms a layer).
# DIR holds gpipe-plan (and, for --record, gpipe-run and gpipe-worker); default build/bin.
set -euo pipefail
shopt -s nullglob
cd "$(dirname "$0")/.."
mode=write
bin=build/bin
while (($# > 0)); do
  case $1 in
    --check) mode=check ;;
    --record) mode=record ;;
    --bin) bin=$2; shift ;;
    *) echo "usage: $0 [--check|--record] [--bin DIR]" >&2; exit 2 ;;
  esac
  shift
done
pictures=docs/pictures
trace=$pictures/mlp-trace.json.gz
# The step of the recorded trace that the README shows: the last one traced (steps 0, 1, 2).
trace_steps=3
shown_step=2

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [[ $mode == record ]]; then
  "$bin/gpipe-run" examples/mlp/plan.pbtxt --trace "$work/mlp-trace.json" \
    --override "runtime { trace_steps: $trace_steps }" 2>&1 | tee "$work/progress.txt"
  gzip -n -9 -c "$work/mlp-trace.json" >"$trace"
  echo "kept the trace of steps 0-$((trace_steps - 1)) as $trace; the run's last line (for the README):"
  grep 'step [0-9]*/' "$work/progress.txt" | tail -1
  mode=write
fi

out=$pictures
[[ $mode == check ]] && out=$work/pictures
mkdir -p "$out"
draw() {  # draw OUT_NAME SOURCE [gpipe-plan timeline arguments]
  local name=$1
  shift
  "$bin/gpipe-plan" timeline "$@" -o "$out/$name" >"$work/$name.log" 2>&1 || {
    cat "$work/$name.log" >&2
    echo "gpipe-plan timeline failed drawing $name" >&2
    exit 1
  }
}

gzip -d -c "$trace" >"$work/mlp-trace.json"
draw mlp-step.svg "$work/mlp-trace.json" --step "$shown_step"
for schedule in GPIPE ONE_F_ONE_B INTERLEAVED_1F1B ZERO_BUBBLE_H1 ZERO_BUBBLE_H2 ZERO_BUBBLE_V \
                DUALPIPE_V; do
  chunks=""
  [[ $schedule == INTERLEAVED_1F1B ]] && chunks="virtual_stages: 2"
  draw "schedule-$schedule.svg" "$pictures/schedules.pbtxt" \
    --override "pipeline { schedule: $schedule $chunks }"
done

if [[ $mode == check ]]; then
  stale=0
  for picture in "$out"/*.svg; do
    name=$(basename "$picture")
    if ! cmp -s "$picture" "$pictures/$name"; then
      echo "docs/pictures/$name is not what gpipe-plan timeline draws now (see $0)" >&2
      stale=1
    fi
  done
  for committed in "$pictures"/*.svg; do
    [[ -f $out/$(basename "$committed") ]] || {
      echo "$committed is drawn by nothing in $0: remove it" >&2
      stale=1
    }
  done
  if ((stale)); then
    echo "Redraw the pictures with: scripts/docs_pictures.sh --bin $bin, and commit them." >&2
    exit 1
  fi
  echo "docs/pictures: every picture is current"
else
  echo "drew $(ls "$out"/*.svg | wc -l) pictures into $out"
fi
