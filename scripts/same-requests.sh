#!/bin/bash
# Plays every family member at every budget with two builds of the session bench and compares
# the requests they write, the policy's timing ("ms") left out: whether a change altered any
# request a single-writer `Session` sends.
#
#   git worktree add /tmp/base REV
#   (cd /tmp/base && CARGO_TARGET_DIR=/tmp/base-target cargo build --release -p compaction-benches --example session)
#   cargo build --release -p compaction-benches --example session
#   BASE=/tmp/base-target/release/examples/session scripts/same-requests.sh
set -u
members="coding-100-s1-k1 coding-100-s2-k2 coding-100-s3-k3 coding-300-s1-k2 coding-300-s2-k3 coding-300-s3-k1 coding-800-s1-k3 coding-2000-s1-k1 support-100-s1-k1 support-100-s2-k2 support-100-s3-k3 support-300-s1-k2 support-300-s2-k3 support-300-s3-k1 support-800-s1-k3 support-2000-s1-k1 research-100-s1-k1 research-100-s2-k2 research-100-s3-k3 research-300-s1-k2 research-300-s2-k3 research-300-s3-k1 research-800-s1-k3 research-2000-s1-k1"
budgets="8000 16000 32000 64000 128000"
mkdir -p /tmp/cmp/base /tmp/cmp/head
same=0; differ=0; requests=0
for m in $members; do
  for b in $budgets; do
    ${BASE:-/tmp/base-target/release/examples/session} $m $b /tmp/cmp/base >/dev/null 2>&1 &
    ${HEAD_BIN:-target/release/examples/session} $m $b /tmp/cmp/head >/dev/null 2>&1
    wait
    f=compaction-$m-$b.jsonl
    strip() { sed -E 's/,? *"ms": *[0-9.eE+-]+//' "$1"; }
    if cmp -s <(strip /tmp/cmp/base/$f) <(strip /tmp/cmp/head/$f); then
      same=$((same+1)); requests=$((requests + $(grep -c '"request"' /tmp/cmp/head/$f)))
    else
      differ=$((differ+1)); echo "DIFFERS: $m $b"
    fi
  done
done
echo "same: $same pairs ($requests requests), differ: $differ"
