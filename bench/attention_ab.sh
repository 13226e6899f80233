#!/bin/sh
# Two builds of the attention kernel, step by step in turn (see bench/probes/attention_ab.c):
#
#     [SET=avx512] bench/attention_ab.sh REV_A REV_B [DEPTH] [STEPS] [hot] [stream] [shuffled] [runs]
#
# REV_A and REV_B are git revisions, or "." for the working tree; e.g. HEAD~1 . 4096 30.
# SET picks the kernel set (avx2, the default, or avx512). Built with setup.py's flags for this
# machine.
set -eu
if [ $# -lt 2 ]; then
    echo "usage: $0 REV_A REV_B [DEPTH] [STEPS] [hot] [stream] [shuffled] [runs]" >&2
    exit 2
fi
kernel_set=${SET:-avx2}
case $kernel_set in
    avx2 | avx512) ;;
    *) echo "$0: SET must be avx2 or avx512, not '$kernel_set'" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# setup.py's BASE_FLAGS, as it writes them, and its default -march
flags="$(sed -n 's/^BASE_FLAGS = \[\(.*\)\]$/\1/p' "$root/setup.py" | tr -d '",') -march=native"
case $flags in -O*) ;; *) echo "$0: no BASE_FLAGS in setup.py" >&2; exit 1 ;; esac
for side in A B; do
    rev=$1
    shift
    mkdir -p "$work/$side"
    if [ "$rev" = . ]; then
        cp -r "$root/llamay/_core/csrc" "$work/$side/"
    else
        git -C "$root" archive "$rev" llamay/_core/csrc | tar -x -C "$work/$side" --strip-components=2
    fi
    printf '#define llamay_kernels_%s kern_%s\n#include "kernels_%s.c"\n' "$kernel_set" "$side" "$kernel_set" \
        > "$work/$side/csrc/build.c"
    cc $flags -I"$work/$side/csrc" -c "$work/$side/csrc/build.c" -o "$work/$side.o"
done
cc $flags -I"$root/llamay/_core/csrc" "$root/bench/probes/attention_ab.c" "$work/A.o" "$work/B.o" \
    -o "$work/attention_ab" -lm
depth=${1:-4096}
steps=${2:-30}
shift $(($# < 2 ? $# : 2))
"$work/attention_ab" "$depth" "$steps" "$@"
