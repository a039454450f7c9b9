#!/usr/bin/env python3
"""Prefix reuse across a long coding session (issue 22's benchmark), every policy in one run.

Run from the repository root: `python3 benches/peers/session.py`
(`--turns 300` or `--budgets 16000` to run part of it; `--keep` keeps the request files.)

The session (`fixtures/src/session.rs`, deterministic): a realistic coding agent's system
prompt, short user turns, each answered in 1 to 4 model calls (the first ones call a tool
whose result is 200-6,000 words, the last answers), the agent's state changing every 25 turns
(announced in that turn's user message; this library also keeps it as typed state). A request
is sent before every model call. Played at 300 and 2,000 turns, with a 16k and a 64k budget.

Policies, each writing the requests it would send (`{"message"...}` / `{"request"...}` JSONL,
see `benches/session.rs`):

- **compaction**: this library, `Compactor::compact` of the whole state before every request
  (`cargo run --release -p compaction-benches --example session`);
- **trim_messages**: LangChain's `trim_messages` of the whole conversation before every request
  (the last messages, starting on a human message, system prompt kept), exact o200k counts;
- **summarization**: LangChain's `SummarizationMiddleware` (its `before_model` hook, offline,
  the summary from `FakeListChatModel`), triggered at 90% of the budget left after the system
  prompt and keeping 60% of it (the marks this library's hysteresis is to use), exact counts;
- **ceiling**: append only, every new step verbatim, new content never cached (see below).

One scorer for all of them. Every message is tokenized once (bpe-openai, o200k: the counts
tiktoken gives) as the chat formula counts it (3 per message, role, content, tool call id; 3 +
id + name + arguments per call; 3 per request for the reply priming), so a request's tokens are
what the budget covers. A request's **shared prefix** is the longest token prefix it has in
common with any earlier request of the same policy (a trie of earlier requests; inside the
first message that differs, the common token prefix counts too). **Prefix reuse** is weighted
by tokens: the sum of shared prefixes over the sum of request tokens (what a provider's prompt
cache bills); the mean of the per-request ratios is printed beside it. Refused requests
(and, for the peers, requests over the budget) are counted and left out of both.

The **ceiling** replays the session append-only with nothing ever removed: request k is the
system prompt and every message so far, and its new tokens are those it does not share with
request k-1 (the same scorer). Sent within the budget, its cacheable part is its size capped at
the budget minus the new tokens (never below 0): ceiling = sum(max(0, min(T_k, B) - new_k)) /
sum(min(T_k, B)).

Python packages (langchain-core, langchain, bpe-openai) are installed with pip into a virtual
environment under the build directory (`$CARGO_TARGET_DIR` or `target/`).
"""

import argparse
import bisect
import json
import statistics
import subprocess
import time
from array import array
from collections.abc import Callable
from pathlib import Path

# The venv and paths of the transcript peer (this directory is on sys.path when run).
from trim_messages import ROOT, TARGET, ensure_venv

OUT = TARGET / "session-bench"
SUMMARY = (
    "SESSION INTENT: fix the billing service's retry logic (OPS-4127) so a timed-out charge is "
    "never charged twice. SUMMARY: the agent read the retry and ledger code, ran the tests, and "
    "changed the retry path step by step as planned; decisions were recorded as they were "
    "taken. ARTIFACTS: files under src/ and tests/ were read and some were written. NEXT STEPS: "
    "continue with the plan's current step and run the tests after every change."
)


def key_of(message: dict) -> str:
    """A message's identity: its OpenAI JSON with sorted keys."""
    return json.dumps(message, sort_keys=True, separators=(",", ":"))


class Tokens:
    """Each message's tokens as the chat formula counts them, computed once per message. The
    formula's fixed overheads are placeholder tokens (negative ids never produced by the
    encoder), so a message's token list is as long as its count and two messages share a
    prefix only where their texts do."""

    def __init__(self):
        import bpe_openai

        self.enc = bpe_openai.get_encoding("o200k_base")
        self.cache: dict[str, array] = {}

    def of(self, key: str) -> array:
        tokens = self.cache.get(key)
        if tokens is None:
            m = json.loads(key)
            enc = self.enc.encode_ordinary
            out = [0xFFFFFFFF] * 3 + enc(m["role"]) + enc(m.get("content") or "")
            if m.get("name"):
                out += [0xFFFFFFFE] + enc(m["name"])
            if m.get("tool_call_id"):
                out += enc(m["tool_call_id"])
            for call in m.get("tool_calls") or []:
                function = call["function"]
                out += [0xFFFFFFFD] * 3 + enc(call["id"]) + enc(function["name"])
                out += enc(function["arguments"])
            tokens = self.cache[key] = array("I", out)
        return tokens


def common(a: array, b: array) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class Node:
    __slots__ = ("children", "sorted")

    def __init__(self):
        self.children: dict[str, "Node"] = {}
        self.sorted: list[array] = []


class Score:
    """Prefix reuse of one policy's requests (see the module docs)."""

    def __init__(self, tokens: Tokens, budget: int, ceiling: bool = False):
        self.tokens, self.budget, self.ceiling = tokens, budget, ceiling
        self.root = Node()
        self.previous: tuple[list[str], Node, int] | None = None
        self.shared = self.total = self.cached = self.capped = 0
        self.ratios: list[float] = []
        self.sizes: list[int] = []
        self.ms: list[float] = []
        self.refused = 0
        self.over_budget = 0

    def request(self, keys: list[str], ms: float) -> None:
        toks = [self.tokens.of(k) for k in keys]
        total = sum(len(t) for t in toks) + 3
        if not self.ceiling and total > self.budget:
            self.over_budget += 1
            self.ms.append(ms)
            return
        node, i, depth = self.root, 0, 0
        if self.previous and keys[: len(self.previous[0])] == self.previous[0]:
            _, node, depth = self.previous
            i = len(self.previous[0])
        while i < len(keys) and keys[i] in node.children:
            node = node.children[keys[i]]
            depth += len(toks[i])
            i += 1
        shared = depth
        if i < len(keys) and node.sorted:
            at = bisect.bisect_left(node.sorted, toks[i])
            near = node.sorted[max(0, at - 1): at + 1]
            shared += max(common(toks[i], other) for other in near)
        # The rest of this request becomes part of the trie.
        end, end_depth = node, depth
        for j in range(i, len(keys)):
            child = Node()
            end.children[keys[j]] = child
            bisect.insort(end.sorted, toks[j])
            end = child
            end_depth += len(toks[j])
        self.previous = (keys, end, end_depth)
        if self.ceiling:
            sent = min(total, self.budget)
            self.cached += max(0, sent - (total - shared))
            self.capped += sent
        self.shared += shared
        self.total += total
        self.ratios.append(shared / total)
        self.sizes.append(total)
        self.ms.append(ms)

    def refuse(self, ms: float) -> None:
        self.refused += 1
        self.ms.append(ms)

    def reuse(self) -> float:
        if self.ceiling:
            return self.cached / max(self.capped, 1)
        return self.shared / max(self.total, 1)

    def row(self, name: str, ceiling: float | None) -> str:
        requests = len(self.ms)
        mean_ratio = statistics.fmean(self.ratios) if self.ratios else 0.0
        mean_tokens = statistics.fmean(self.sizes) if self.sizes else 0.0
        if self.ceiling:
            mean_tokens = self.capped / max(len(self.sizes), 1)
        of_ceiling = f"{self.reuse() / ceiling:.3f}" if ceiling else "1"
        failed = f"{self.refused} refused, {self.over_budget} over"
        return (f"| {name} | {requests} | {self.reuse():.3f} | {mean_ratio:.3f} | {of_ceiling} | "
                f"{mean_tokens:,.0f} | {statistics.fmean(self.ms) if self.ms else 0:.2f} | "
                f"{failed} |")


def read_jsonl(path: Path, score: Score) -> None:
    keys: dict[int, str] = {}
    with path.open() as f:
        for line in f:
            item = json.loads(line)
            if "message" in item:
                keys[item["message"]] = key_of(item["value"])
            elif "refused" in item:
                score.refuse(item["ms"])
            else:
                score.request([keys[i] for i in item["ids"]], item["ms"])


def to_langchain(m: dict):
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    role, content = m["role"], m.get("content") or ""
    if role == "system":
        return SystemMessage(content)
    if role == "user":
        return HumanMessage(content)
    if role == "tool":
        return ToolMessage(content, tool_call_id=m["tool_call_id"])
    calls = [
        {"name": c["function"]["name"], "args": json.loads(c["function"]["arguments"]),
         "id": c["id"], "type": "tool_call"}
        for c in m.get("tool_calls") or []
    ]
    return AIMessage(content, tool_calls=calls)


def to_openai(message) -> dict:
    """A LangChain message back in the OpenAI form the Rust side writes (the same keys, so the
    same message has the same identity and tokens in every policy's requests)."""
    roles = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}
    out = {"role": roles[message.type], "content": message.content}
    if message.type == "ai" and message.tool_calls:
        out["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {
                "name": c["name"],
                "arguments": json.dumps(c["args"], separators=(",", ":"))}}
            for c in message.tool_calls
        ]
    if message.type == "tool":
        out["tool_call_id"] = message.tool_call_id
    return out


class Counter:
    """The chat formula with exact o200k counts, one message at a time, each message counted
    once (by identity): what a careful LangChain user would pass as `token_counter`."""

    def __init__(self, tokens: Tokens):
        self.tokens = tokens
        self.keys: dict[int, tuple[object, str]] = {}

    def key(self, message) -> str:
        held = self.keys.get(id(message))
        if held is None or held[0] is not message:
            held = self.keys[id(message)] = (message, key_of(to_openai(message)))
        return held[1]

    def one(self, message) -> int:
        return len(self.tokens.of(self.key(message)))

    def many(self, messages) -> int:
        """The tokens of a list of messages (LangChain calls a counter with lists)."""
        return sum(self.one(m) for m in messages)


# What a player tells its caller of each request besides the score: the messages' keys and how
# many leading messages are its stable prefix (`family.py` records both).
Seen = Callable[[list[str], int], None]


def play_trim(session: dict, budget: int, counter: Counter, score: Score,
              seen: Seen | None = None) -> None:
    """trim_messages, handed only the messages that can matter: the system prompt and the
    shortest suffix that no longer fits (trim keeps the last messages that fit, so the output
    is the same as on the whole history, without counting all of it at every request)."""
    from langchain_core.messages import trim_messages

    history = [to_langchain(m) for m in session["initial"]]
    sums = [0]
    for m in history:
        sums.append(sums[-1] + counter.one(m))
    for event in session["events"]:
        if "push" in event:
            m = to_langchain(event["push"])
            history.append(m)
            sums.append(sums[-1] + counter.one(m))
        elif "request" in event:
            start = time.perf_counter()
            room = budget - 3
            # The largest j whose suffix history[j:] is over the room (or 1: everything).
            j = max(1, bisect.bisect_left(sums, sums[len(history)] - room) - 1)
            given = history if j <= 1 else history[:1] + history[j:]
            kept = trim_messages(
                given, max_tokens=room, token_counter=counter.many, strategy="last",
                include_system=True, start_on="human", allow_partial=False,
            )
            ms = (time.perf_counter() - start) * 1000
            keys = [counter.key(m) for m in kept]
            score.request(keys, ms)
            if seen:
                seen(keys, sum(1 for m in kept if m.type == "system"))


def play_summarization(session: dict, budget: int, counter: Counter, score: Score,
                       seen: Seen | None = None) -> None:
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    system = [to_langchain(m) for m in session["initial"] if m["role"] == "system"]
    messages = [to_langchain(m) for m in session["initial"] if m["role"] != "system"]
    room = budget - 3 - counter.many(system)
    middleware = SummarizationMiddleware(
        FakeListChatModel(responses=[SUMMARY]),
        trigger=("tokens", int(room * 0.9)),
        keep=("tokens", int(room * 0.6)),
        token_counter=counter.many,
    )
    summarized = False
    for event in session["events"]:
        if "push" in event:
            messages.append(to_langchain(event["push"]))
        elif "request" in event:
            start = time.perf_counter()
            update = middleware.before_model({"messages": messages}, None)
            if update:
                messages = [m for m in update["messages"] if m.type != "remove"]
                summarized = True
            ms = (time.perf_counter() - start) * 1000
            keys = [counter.key(m) for m in system + messages]
            score.request(keys, ms)
            if seen:
                # Its stable prefix: the system prompt and, once there is one, the summary.
                seen(keys, len(system) + int(summarized))


def play_ceiling(session: dict, score: Score) -> None:
    keys = [key_of(m) for m in session["initial"]]
    for event in session["events"]:
        if "push" in event:
            keys.append(key_of(event["push"]))
        elif "request" in event:
            score.request(list(keys), 0.0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, nargs="*", default=[300, 2000])
    parser.add_argument("--budgets", type=int, nargs="*", default=[16_000, 64_000])
    parser.add_argument("--keep", action="store_true", help="keep the request files")
    args = parser.parse_args()
    ensure_venv(["langchain-core", "langchain", "bpe-openai"])
    OUT.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "compaction-benches",
                    "--example", "session"], cwd=ROOT, check=True)
    binary = TARGET / "release" / "examples" / "session"
    tokens = Tokens()
    print("| policy | requests | prefix reuse (tokens) | mean of ratios | of the ceiling | "
          "mean request tokens | ms per request | refused, over budget |")
    for turns in args.turns:
        for n, budget in enumerate(args.budgets):
            ours = subprocess.run(
                [binary, str(turns), str(budget), str(OUT), *(["--export"] if n == 0 else [])],
                check=True, capture_output=True, text=True,
            ).stdout.strip()
            print(f"\n{turns} turns, budget {budget} ({ours})\n", flush=True)
            session = json.loads((OUT / f"session-{turns}.json").read_text())
            counter = Counter(tokens)
            ceiling = Score(tokens, budget, ceiling=True)
            play_ceiling(session, ceiling)
            print(ceiling.row("ceiling", None), flush=True)
            path = OUT / f"compaction-{turns}-{budget}.jsonl"
            score = Score(tokens, budget)
            read_jsonl(path, score)
            print(score.row("compaction", ceiling.reuse()), flush=True)
            if not args.keep:
                path.unlink()
            score = Score(tokens, budget)
            play_trim(session, budget, counter, score)
            print(score.row("trim_messages", ceiling.reuse()), flush=True)
            score = Score(tokens, budget)
            play_summarization(session, budget, counter, score)
            print(score.row("SummarizationMiddleware", ceiling.reuse()), flush=True)


if __name__ == "__main__":
    main()
