"""Time per request of the `Session` on every member of the session family, one member at a
time (run it on an otherwise idle machine): the median of the per-request times that
`benches/session.rs` writes (`ms`: compaction, checkpoint save, ledger, pointers), per member,
and the min / median / max of those medians. BENCHMARKS.md, "Time per request, idle".

    cargo build --release -p compaction-benches --example session
    python3 benches/peers/request_times.py [BUDGET] [family|unseen|flat] [SESSION_BINARY]

`flat`: the same coding sessions (seed and `keep_recent` of the family's 300- and 2,000-turn
coding members) generated at 300 and at 2,000 turns, and each one's ratio of medians: how the
time per request grows with a session's length alone. Each length runs three times and keeps
its lowest median: a shared VM's noise (up to a quarter of a median between two runs of one
binary) only ever adds time.
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
    if which == "flat":
        flat(budget, binary)
        return
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


def median_ms(binary: str, member: str, budget: int, out: str) -> float:
    subprocess.run([binary, member, str(budget), out], capture_output=True, check=True)
    path = Path(out) / f"compaction-{member}-{budget}.jsonl"
    return statistics.median(r["ms"] for r in map(json.loads, path.read_text().splitlines())
                             if "request" in r and "ms" in r)


def flat(budget: int, binary: str) -> None:
    ratios = []
    with tempfile.TemporaryDirectory() as out:
        for shape in ["s1-k2", "s2-k3", "s3-k1", "s1-k1"]:
            short, long = (min(median_ms(binary, f"coding-{turns}-{shape}", budget, out)
                               for _ in range(3))
                           for turns in (300, 2000))
            ratios.append(long / short)
            print(f"coding {shape}: 300 turns {short:.2f} ms, 2,000 turns {long:.2f} ms: "
                  f"{long / short:.2f}x", flush=True)
    ratios.sort()
    print(f"min / median / max of the ratios: {ratios[0]:.2f} / "
          f"{statistics.median(ratios):.2f} / {ratios[-1]:.2f}x")


if __name__ == "__main__":
    main()
