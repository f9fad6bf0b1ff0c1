#!/bin/sh
# Compiler launcher of the precompiled header's target (GpipePrecompiledHeaders.cmake): before a
# header is precompiled (-x c++-header ... -o FILE.gch), the stale FILE.gch goes, then the rest of
# the command line (ccache and the compiler) runs. ccache hashes a .gch it finds beside an
# included header as an input, and GCC writes different bytes for the same header on every run,
# so with the old one present the header never hits the cache and its new bytes miss every
# compile that reuses it; without it, an unchanged header comes back from the cache byte for byte
# and so do those compiles.
header=false
out=
prev=
for arg in "$@"; do
  [ "$prev" = "-x" ] && [ "$arg" = "c++-header" ] && header=true
  [ "$prev" = "-o" ] && out=$arg
  prev=$arg
done
if [ "$header" = true ] && [ -n "$out" ]; then
  rm -f "$out"
fi
exec "$@"
