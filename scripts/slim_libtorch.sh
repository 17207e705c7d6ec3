#!/usr/bin/env bash
# Writes OUT_DIR/<soname>: a copy of LibTorch's libtorch_cpu without the libraries it names (DT_NEEDED)
# but takes no symbol from. Debian's names 46, among them OpenCV, FFmpeg, ZeroMQ, LevelDB and LMDB, which
# pull in ~250 more (GDAL, Qt, GStreamer...): loading and relocating them was half of every poslab
# process's start (docs/benchmarks.md, "Start-up and exit"). The build tree's executables find the copy
# first (CMake's BUILD_RPATH); installed ones load LibTorch as it is.
#
# A library is left out only when none of its exported symbols is one libtorch_cpu imports, and the copy
# is kept only when the loader then resolves every symbol of it and its dependencies (`ldd -r`) as it does
# for the original. Otherwise, or with nothing to leave out, OUT_DIR holds no copy and LibTorch loads as is.
# Usage: slim_libtorch.sh LIBTORCH_CPU OUT_DIR
set -euo pipefail
lib=$1
out=$2
# Whatever goes wrong, the build goes on with LibTorch as it is: no copy, a line saying so, exit 0.
trap 'echo "slim_libtorch: stopped at line $LINENO; LibTorch loads as it is" >&2; exit 0' ERR
for tool in readelf nm patchelf ldd; do
  command -v "$tool" > /dev/null || { echo "slim_libtorch: $tool not found; LibTorch loads as it is" >&2; exit 0; }
done
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ -n "$soname" ] || { echo "slim_libtorch: $lib has no SONAME; LibTorch loads as it is" >&2; exit 0; }
mkdir -p "$out"
rm -f "$out/$soname" "$out/$soname.tmp" "$out/source"
# A library that finds its dependencies relative to itself ($ORIGIN: PyPI's wheels) would lose them in a copy.
if readelf -d "$lib" | grep -E '\((RUNPATH|RPATH)\)' | grep -q 'ORIGIN'; then
  echo "slim_libtorch: $soname finds its libraries relative to its own directory; LibTorch loads as it is"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work" "$out/$soname.tmp"' EXIT

# The symbols it imports, without their version tags.
nm -D --undefined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | sort -u > "$work/imports"
# Its direct dependencies, and where the loader finds each.
readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' > "$work/needed"
ldd "$lib" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' > "$work/paths"
unused=()
while read -r name; do
  path=$(awk -v n="$name" '$1 == n {print $2; exit}' "$work/paths")
  [ -n "$path" ] || continue  # not found by ldd (the loader itself): kept
  case "$name" in libc.so.*|libm.so.*|libdl.so.*|librt.so.*|libpthread.so.*|libutil.so.*) continue ;; esac  # glibc's own
  provided=$(nm -D --defined-only "$path" 2>/dev/null | awk '{print $NF}' | sed 's/@.*//' | sort -u |
             comm -12 - "$work/imports" | wc -l)
  [ "$provided" -eq 0 ] && unused+=("$name")
done < "$work/needed"
total=$(wc -l < "$work/needed")
if [ ${#unused[@]} -eq 0 ]; then
  echo "slim_libtorch: $soname uses every library it names ($total); LibTorch loads as it is"
  exit 0
fi

cp "$lib" "$out/$soname.tmp"
args=()
for name in "${unused[@]}"; do args+=(--remove-needed "$name"); done
patchelf "${args[@]}" "$out/$soname.tmp"
# The loader finds every library the copy still names and resolves every symbol (no more "undefined
# symbol" lines than the original gets), and it loads fewer.
before=$(ldd -r "$lib" 2>&1 | grep -c "undefined symbol" || true)
check=$(cd "$out" && LD_LIBRARY_PATH="$out" ldd -r "./$soname.tmp" 2>&1) || check="ldd failed: $check"
after=$(grep -c "undefined symbol" <<< "$check" || true)
loaded_before=$(ldd "$lib" | grep -c '=>' || true)
loaded_after=$(grep -c '=>' <<< "$check" || true)
if grep -q -e "not found" -e "ldd failed" <<< "$check" || [ "$after" -gt "$before" ] || [ "$loaded_after" -ge "$loaded_before" ]; then
  echo "slim_libtorch: a copy of $soname without its unused libraries did not load as well ($after undefined symbols against $before, $loaded_after libraries against $loaded_before); LibTorch loads as it is" >&2
  exit 0
fi
mv "$out/$soname.tmp" "$out/$soname"
echo "$lib" > "$out/source"  # what it is a copy of (tests/cli/tools.sh compares them)
echo "slim_libtorch: $out/$soname: ${#unused[@]} of the $total libraries it names left out (none provides a symbol it uses: ${unused[*]}); it loads $loaded_after libraries instead of $loaded_before"
