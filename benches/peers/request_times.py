"""Time per request of the `Session` on every member of the session family, one member at a
time (run it on an otherwise idle machine): the median of the per-request times that
`benches/session.rs` writes (`ms`: compaction, checkpoint save, ledger, pointers), per member,
and the min / median / max of those medians. BENCHMARKS.md, "Time per request, idle".

    cargo build --release -p compaction-benches --example session
    python3 benches/peers/request_times.py [BUDGET] [family|unseen|flat|instructions] [SESSION_BINARY]

`flat`: how the time per request grows with a session's length, two ways, per shape (seed
and `keep_recent` of the family's 300- and 2,000-turn coding members):
- across sessions: the session generated at 300 turns against the one generated at 2,000, the
  ratio of their medians. The two differ in more than their length: the generator gives the
  longer session a longer plan from its first turn (a step per 25 turns: 13 against 81), and
  the plan is state the window sends at every request;
- within one session: the 2,000-turn session's requests during its last 300 turns against those
  during its first 300 (each request's `turn`): the same plan, 1,700 turns of history later
  (and a decision more per 25 turns).
Each session runs `RUNS` (5) times and each part keeps its lowest median: a shared VM's noise
only ever adds time. The 2,000-turn session's lowest median per 200 turns is printed too. One
more run of the 2,000-turn session (`SESSION_CHECKPOINT_BYTES=1`) gives what does not vary
between runs: the mean size of the checkpoint each request saves, in its first 300 turns and
its last 300, whole and its planner memory (the part that grows with the history).

`instructions`: the same two ratios in instructions instead of time, which do not drift: each
session runs once under valgrind's callgrind (about 80 times slower than natively: 2 minutes for
a 300-turn session, 15-20 for a 2,000-turn one; two at a time), and `benches/session.rs` makes
each request through a function named after the part of the session its turn is in, so the
inclusive count of that function over its requests' number is the mean instructions per
request of that part. A mean, not a median: it includes the compaction points. Valgrind's
virtual CPU lacks some of the hardware's extensions (SHA among them), so hashing weighs more in
these counts than in a native run.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from family import members  # noqa: E402
from trim_messages import TARGET  # noqa: E402


def main() -> None:
    budget = int(sys.argv[1]) if len(sys.argv) > 1 else 64_000
    which = sys.argv[2] if len(sys.argv) > 2 else "family"
    binary = sys.argv[3] if len(sys.argv) > 3 else str(TARGET / "release" / "examples" / "session")
    if which == "flat":
        flat(budget, binary)
        return
    if which == "instructions":
        instructions(budget, binary)
        return
    medians = {}
    with tempfile.TemporaryDirectory() as out:
        for member in members(which):
            ms = [r["ms"] for r in request_rows(binary, member, budget, out)]
            medians[member] = statistics.median(ms)
            print(f"{member}: {len(ms)} requests, median {medians[member]:.2f} ms", flush=True)
    values = sorted(medians.values())
    print(f"min / median / max of the medians: {values[0]:.2f} / "
          f"{statistics.median(values):.2f} / {values[-1]:.2f} ms")


def request_rows(binary: str, member: str, budget: int, out: str, env=None) -> list[dict]:
    """The rows of the requests of one run of `member`."""
    subprocess.run([binary, member, str(budget), out], capture_output=True, check=True,
                   env=None if env is None else {**os.environ, **env})
    return request_rows_of(Path(out) / f"compaction-{member}-{budget}.jsonl")


def request_ms(binary: str, member: str, budget: int, out: str) -> list[tuple[int, float]]:
    """Each request's user turn and time, from one run of `member`."""
    return [(r["turn"], r["ms"]) for r in request_rows(binary, member, budget, out)]


def first_and_last(rows: list, turn) -> tuple[list, list]:
    """The rows of a 2,000-turn session's first 300 turns and of its last 300 (`turn(row)`)."""
    return ([r for r in rows if turn(r) <= 300], [r for r in rows if turn(r) > 2000 - 300])


def checkpoint_growth(binary: str, member: str, budget: int, out: str) -> str:
    """The mean checkpoint bytes of `member`'s requests in its first and last 300 turns."""
    rows = request_rows(binary, member, budget, out, {"SESSION_CHECKPOINT_BYTES": "1"})
    first, last = first_and_last(rows, lambda r: r["turn"])
    parts = []
    for part in ["whole", "planner_memory"]:
        before, after = (statistics.mean(r["checkpoint_bytes"][part] for r in rs)
                         for rs in (first, last))
        parts.append(f"{part} {before:,.0f} -> {after:,.0f} bytes ({after / before:.2f}x)")
    return ", ".join(parts)


# Runs of each session in `flat`. This VM's speed drifts over tens of seconds (five runs of one
# binary on coding-2000-s2-k3, 2026-12-04: its turns 201-400 took a median 1.18 ms in one run
# and 1.97 ms in another), so a part of a session is taken at its lowest over several runs.
RUNS = 5


def flat(budget: int, binary: str) -> None:
    across, within = [], []
    with tempfile.TemporaryDirectory() as out:
        for shape in ["s1-k2", "s2-k3", "s3-k1", "s1-k1"]:
            short = min(statistics.median(ms for _, ms in request_ms(
                binary, f"coding-300-{shape}", budget, out)) for _ in range(RUNS))
            whole, first, last, buckets = [], [], [], []
            for _ in range(RUNS):
                rows = request_ms(binary, f"coding-2000-{shape}", budget, out)
                whole.append(statistics.median(ms for _, ms in rows))
                start, end = first_and_last(rows, lambda r: r[0])
                first.append(statistics.median(ms for _, ms in start))
                last.append(statistics.median(ms for _, ms in end))
                buckets.append([statistics.median(ms for turn, ms in rows
                                                  if b * 200 < max(turn, 1) <= (b + 1) * 200)
                                for b in range(10)])
            long = min(whole)
            across.append(long / short)
            within.append(min(last) / min(first))
            lowest = " ".join(f"{min(run[b] for run in buckets):.2f}" for b in range(10))
            print(f"coding {shape}: across, 300 turns {short:.2f} ms, 2,000 turns {long:.2f} ms: "
                  f"{long / short:.2f}x; within the 2,000-turn session, its first 300 turns "
                  f"{min(first):.2f} ms, its last 300 {min(last):.2f} ms: "
                  f"{min(last) / min(first):.2f}x (by 200 turns: {lowest} ms); its checkpoints, "
                  f"{checkpoint_growth(binary, f'coding-2000-{shape}', budget, out)}",
                  flush=True)
    for name, ratios in [("across sessions", across), ("within a session", within)]:
        ratios.sort()
        print(f"min / median / max of the ratios, {name}: {ratios[0]:.2f} / "
              f"{statistics.median(ratios):.2f} / {ratios[-1]:.2f}x")


# The functions of `benches/session.rs` that make the requests, by the part of the session.
PARTS = {"first": "request_in_first_300_turns", "last": "request_in_last_300_turns",
         "middle": "request_in_middle_turns"}


def counted(binary: str, member: str, budget: int, out: str) -> dict[str, tuple[int, int]]:
    """One run of `member` under callgrind: per part of the session, the instructions of its
    requests and their number."""
    profile = Path(out) / f"callgrind-{member}.out"
    subprocess.run(["valgrind", "--tool=callgrind", "--toggle-collect=*request_in_*",
                    f"--callgrind-out-file={profile}", binary, member, str(budget), out],
                   capture_output=True, check=True)
    annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(profile)],
                               capture_output=True, check=True, text=True).stdout
    turns = int(member.split("-")[1])
    rows = request_rows_of(Path(out) / f"compaction-{member}-{budget}.jsonl")
    numbers = {"first": sum(r["turn"] <= 300 for r in rows),
               "last": sum(300 < r["turn"] and r["turn"] > turns - 300 for r in rows)}
    numbers["middle"] = len(rows) - numbers["first"] - numbers["last"]
    counts = {}
    for part, function in PARTS.items():
        # A line of callgrind_annotate: `21,077,799,157 (100.0%)  ???:session::NAME [binary]`.
        found = re.search(r"^\s*([\d,]+) \([^)]*\)\s+\S*::" + function + r"\b", annotated, re.M)
        instructions = int(found.group(1).replace(",", "")) if found else 0
        if bool(found) != bool(numbers[part]):
            raise SystemExit(f"{member}: {part}: {numbers[part]} requests, callgrind: {found}")
        counts[part] = (instructions, numbers[part])
    return counts


def request_rows_of(path: Path) -> list[dict]:
    """The rows of the requests in a request file (`benches/session.rs`'s format)."""
    return [r for r in map(json.loads, path.read_text().splitlines())
            if "request" in r and "ms" in r]


def per_request(counts: dict[str, tuple[int, int]], *parts: str) -> float:
    """The mean instructions per request over `parts`."""
    return (sum(counts[p][0] for p in parts) / max(sum(counts[p][1] for p in parts), 1))


def instructions(budget: int, binary: str) -> None:
    shapes = ["s1-k2", "s2-k3", "s3-k1", "s1-k1"]
    with tempfile.TemporaryDirectory() as out, ThreadPoolExecutor(2) as pool:
        runs = {(turns, shape): pool.submit(counted, binary, f"coding-{turns}-{shape}", budget,
                                            out)
                for shape in shapes for turns in (2000, 300)}
        across, within = [], []
        for shape in shapes:
            short, long = runs[(300, shape)].result(), runs[(2000, shape)].result()
            short_mean = per_request(short, *PARTS)
            long_mean = per_request(long, *PARTS)
            first, last = per_request(long, "first"), per_request(long, "last")
            across.append(long_mean / short_mean)
            within.append(last / first)
            print(f"coding {shape}: across, 300 turns {short_mean / 1e6:.2f}M instructions per "
                  f"request, 2,000 turns {long_mean / 1e6:.2f}M: {long_mean / short_mean:.2f}x; "
                  f"within the 2,000-turn session, its first 300 turns {first / 1e6:.2f}M, its "
                  f"last 300 {last / 1e6:.2f}M: {last / first:.2f}x", flush=True)
    for name, ratios in [("across sessions", across), ("within a session", within)]:
        ratios.sort()
        print(f"min / median / max of the ratios, {name}: {ratios[0]:.2f} / "
              f"{statistics.median(ratios):.2f} / {ratios[-1]:.2f}x")


if __name__ == "__main__":
    main()
