"""Where the `Session`'s extra tokens go on the support members, against `trim_messages` given
the same session (BENCHMARKS.md, "Left over the cheaper peer"): per request on average (each
message counted by the scorer's chat formula, `session.Tokens`), the `Session`'s request less
the peer's, split into the window
against the peer's state JSON (the first two messages against the peer's system prompt), the
state updates and the status sentences the peer reads instead of the updates; `other` is the
rest (non-zero where a policy compacted). The updates are split further: the effect records'
lines (which the peer does not carry), the other field lines (plan step, decisions: what the
status sentences say) and the framing: the rest of each update (its marker line, its ledger
lines' headers, its overhead as a message), so the three parts add up to the updates.

    python3 benches/peers/family.py --sessions support-100-s1-k1 ... --keep --out FILE
    python3 benches/peers/state_cost.py [REQUESTS_DIR]
"""
import glob
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from session import Tokens, key_of  # noqa: E402
from trim_messages import TARGET  # noqa: E402

TOKENS = Tokens()
COUNTS: dict[str, int] = {}
# A ledger's line in an update: `writes (idempotent=false, 3 records):` or, with only its new
# and changed records, `writes (3 records; the 2 shown earlier stand, ...):`.
LEDGER_HEADER = re.compile(r"^\S+ \((idempotent=\w+, )?\d+ records[;)]")


def tokens(text: str) -> int:
    """The o200k tokens of a piece of a message's content (a line, a sentence)."""
    if text not in COUNTS:
        COUNTS[text] = len(TOKENS.enc.encode_ordinary(text))
    return COUNTS[text]


def size(message: dict) -> int:
    """A whole message's tokens, as the scorer counts them."""
    return len(TOKENS.of(key_of(message)))


def load(path: str) -> tuple[dict, list]:
    messages, requests = {}, []
    for line in open(path):
        row = json.loads(line)
        if "message" in row:
            messages[row["message"]] = row["value"]
        elif "ids" in row:
            requests.append(row["ids"])
    return messages, requests


def is_update(message: dict) -> bool:
    return message["role"] == "system" and (message.get("content") or "").startswith(
        "⟦compaction:update")


def main() -> None:
    folder = sys.argv[1] if len(sys.argv) > 1 else str(TARGET / "session-bench")
    for ours_path in sorted(glob.glob(f"{folder}/compaction-support-*.jsonl")):
        name = Path(ours_path).name.removeprefix("compaction-").removesuffix(".jsonl")
        ours, our_requests = load(ours_path)
        peer, peer_requests = load(ours_path.replace("compaction-", "trim_messages-"))
        if len(our_requests) != len(peer_requests):
            print(f"{name}: the request counts differ, skipped")
            continue
        parts: dict[str, list[int]] = {k: [] for k in ["extra", "window", "updates", "records",
                                                        "fields", "framing", "status"]}
        for mine, theirs in zip(our_requests, peer_requests):
            updates = [ours[i]["content"] for i in mine if is_update(ours[i])]
            parts["extra"].append(sum(size(ours[i]) for i in mine)
                                  - sum(size(peer[i]) for i in theirs))
            parts["window"].append(size(ours[mine[0]]) + size(ours[mine[1]])
                                   - size(peer[theirs[0]]))
            sizes = sum(size(ours[i]) for i in mine if is_update(ours[i]))
            lines = [(i, line) for u in updates for i, line in enumerate(u.splitlines())]
            records = sum(tokens(line + "\n") for _, line in lines if line.startswith("  {"))
            fields = sum(tokens(line + "\n") for i, line in lines
                         if i > 0 and not line.startswith("  {") and not LEDGER_HEADER.match(line))
            parts["updates"].append(sizes)
            parts["records"].append(records)
            parts["fields"].append(fields)
            parts["framing"].append(sizes - records - fields)
            parts["status"].append(sum(
                tokens(peer[i]["content"].split("\n\n")[0] + "\n\n") for i in theirs
                if peer[i]["role"] == "user"
                and (peer[i].get("content") or "").startswith("Status:")))
        mean = {k: statistics.mean(v) for k, v in parts.items()}
        other = mean["extra"] - mean["window"] - mean["updates"] + mean["status"]
        print(f"{name}: extra per request {mean['extra']:.0f} = window against state "
              f"{mean['window']:.0f} + updates {mean['updates']:.0f} (effect records "
              f"{mean['records']:.0f}, other field lines {mean['fields']:.0f}, framing "
              f"{mean['framing']:.0f}) - status sentences {mean['status']:.0f}; "
              f"other {other:.0f}")


if __name__ == "__main__":
    main()
