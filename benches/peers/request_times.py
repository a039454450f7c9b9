"""Time per request of the `Session` on every member of the session family, one member at a
time (run it on an otherwise idle machine): the median of the per-request times that
`benches/session.rs` writes (`ms`: compaction, checkpoint save, ledger, pointers), per member,
and the min / median / max of those medians. BENCHMARKS.md, "Time per request, idle".

    cargo build --release -p compaction-benches --example session
    python3 benches/peers/request_times.py [BUDGET] [family|unseen] [SESSION_BINARY]
"""
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from family import members  # noqa: E402
from trim_messages import TARGET  # noqa: E402


def main() -> None:
    budget = int(sys.argv[1]) if len(sys.argv) > 1 else 64_000
    which = sys.argv[2] if len(sys.argv) > 2 else "family"
    binary = sys.argv[3] if len(sys.argv) > 3 else str(TARGET / "release" / "examples" / "session")
    medians = {}
    with tempfile.TemporaryDirectory() as out:
        for member in members(which):
            subprocess.run([binary, member, str(budget), out], capture_output=True, check=True)
            path = Path(out) / f"compaction-{member}-{budget}.jsonl"
            ms = [r["ms"] for r in map(json.loads, path.read_text().splitlines())
                  if "request" in r and "ms" in r]
            medians[member] = statistics.median(ms)
            print(f"{member}: {len(ms)} requests, median {medians[member]:.2f} ms", flush=True)
    values = sorted(medians.values())
    print(f"min / median / max of the medians: {values[0]:.2f} / "
          f"{statistics.median(values):.2f} / {values[-1]:.2f} ms")


if __name__ == "__main__":
    main()
