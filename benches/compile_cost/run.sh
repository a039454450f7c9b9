#!/usr/bin/env bash
# Derive compile cost (issue 5, measurement 6): cold build time of a generated crate of 100
# structs x 12 fields with `#[derive(Serialize, Deserialize)]` only, and with `Compactable`
# added (every field classified), depending on this workspace's `compaction` by path.
#
# What is timed: `cargo build` (debug, the default dev profile, CARGO_INCREMENTAL=0) of the
# generated crate `gen` ALONE. The workspace is first copied from git HEAD (`git archive`) to
# $OUT/workspace, so edits in the working tree cannot trigger rebuilds of `compaction` mid-run.
# Each variant has its own CARGO_TARGET_DIR; its dependencies (serde, serde_derive, syn,
# compaction, ...) are built first and not timed; then `touch src/lib.rs` and the timed
# `cargo build` recompiles only `gen` from scratch (macro expansion, type checking, codegen of
# the generated code, linking the rlib). Each variant is timed RUNS times (default 5); the
# median is reported. A variant with no derive at all (plain structs, `Default` only) is the
# baseline both derives add to.
#
# usage: benches/compile_cost/run.sh            (from anywhere; writes under target/compile_cost)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
workspace=$(cd "$here/../.." && pwd)
out=${OUT:-$workspace/target/compile_cost}
runs=${RUNS:-5}
export CARGO_INCREMENTAL=0
mkdir -p "$out"
rm -rf "$out/workspace" && mkdir -p "$out/workspace"
git -C "$workspace" archive HEAD | tar -x -C "$out/workspace"
snapshot=$out/workspace

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

time_variant() {
  local variant=$1 dir=$out/$1
  rm -rf "$dir/src"
  if [ "$variant" = none ]; then
    "$here/gen.sh" serde "$dir" "$snapshot"
    sed -i -e 's/^#\[derive(Serialize, Deserialize, Default)\]$/#[derive(Default)]/' \
      -e '/^use serde::/d' "$dir/src/lib.rs"
  else
    "$here/gen.sh" "$variant" "$dir" "$snapshot"
  fi
  export CARGO_TARGET_DIR=$dir/target
  (cd "$dir" && cargo build -q 2>&1) >&2          # dependencies (not timed)
  local times=()
  for ((r = 0; r < runs; r++)); do
    touch "$dir/src/lib.rs"
    local t0 t1 log
    t0=$(date +%s.%N)
    log=$(cd "$dir" && cargo build 2>&1)
    t1=$(date +%s.%N)
    # Only `gen` may have been compiled, or the time is not what this script says it is.
    if [ "$(grep -c Compiling <<<"$log")" != 1 ] || ! grep -q "Compiling gen " <<<"$log"; then
      echo "unexpected rebuild of a dependency:" >&2
      echo "$log" >&2
      exit 1
    fi
    times+=("$(echo "$t1 - $t0" | bc)")
  done
  echo "$variant: ${times[*]}" >&2
  printf '%s\n' "${times[@]}" | median
}

none=$(time_variant none)
serde=$(time_variant serde)
compactable=$(time_variant compactable)
serde_cost=$(echo "$serde - $none" | bc)
added=$(echo "$compactable - $serde" | bc)
echo "derive compile cost, 100 structs x 12 fields, debug build of the generated crate only (median of $runs):"
echo "  no derive (baseline):                  ${none} s"
echo "  Serialize + Deserialize:               ${serde} s  (serde's two derives cost ${serde_cost} s)"
echo "  Serialize + Deserialize + Compactable: ${compactable} s  (Compactable adds ${added} s)"
echo "  ratio added / serde's cost:            $(echo "scale=2; $added / $serde_cost" | bc)  (target <= 0.5)"
