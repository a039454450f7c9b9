"""The tables of a family run (`family.py`'s results, one JSON line per (session, budget,
policy)): min / median / max over the sessions per budget and policy, and the issue's goals,
each checked on every (session, budget) pair of the run."""

import statistics
from collections import defaultdict

POLICIES = ["ceiling", "Session", "trim_messages", "SummarizationMiddleware"]
PEERS = ["trim_messages", "SummarizationMiddleware"]


def spread(values, fmt="{:.3f}") -> str:
    values = [v for v in values if v is not None]
    if not values:
        return ""
    return " / ".join(fmt.format(v) for v in
                      (min(values), statistics.median(values), max(values)))


def report(rows: list[dict]) -> None:
    by = defaultdict(dict)  # (session, budget) -> policy -> row
    for r in rows:
        by[(r["session"], r["budget"])][r["policy"]] = r
    budgets = sorted({b for _, b in by})
    sessions = sorted({s for s, _ in by})
    print(f"{len(sessions)} sessions x {len(budgets)} budgets = {len(by)} pairs\n")
    print("min / median / max over the sessions\n")
    print("| budget | policy | prefix reuse | of the ceiling | mean request tokens | "
          "verbatim share | refused | Anthropic billed per request | OpenAI billed per request "
          "| Anthropic read share | ms per request (median) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for budget in budgets:
        for policy in POLICIES:
            rs = [p[policy] for (s, b), p in by.items() if b == budget and policy in p]
            if not rs:
                continue
            per = lambda key: [r[key] / max(r["requests"], 1) if key in r else None  # noqa: E731
                               for r in rs]
            print(f"| {budget // 1000}k | {policy} | {spread(r['prefix_reuse'] for r in rs)} | "
                  f"{spread(r['of_ceiling'] for r in rs)} | "
                  f"{spread((r['mean_tokens'] for r in rs), '{:,.0f}')} | "
                  f"{spread(r['verbatim_share'] for r in rs)} | "
                  f"{sum(r['refused'] + r['over_budget'] for r in rs)} | "
                  f"{spread(per('anthropic_billed'), '{:,.0f}')} | "
                  f"{spread(per('openai_billed'), '{:,.0f}')} | "
                  f"{spread(r.get('anthropic_read_share') for r in rs)} | "
                  f"{spread((r.get('ms_median') for r in rs), '{:.2f}')} |")
    print("\nSession's billed input over the cheaper peer's, per pair (min / median / max)\n")
    print("| budget | Anthropic | OpenAI |")
    print("|---|---|---|")
    for budget in budgets:
        ratios = {"anthropic_billed": [], "openai_billed": []}
        for (s, b), p in by.items():
            if b != budget or "Session" not in p or not all(q in p for q in PEERS):
                continue
            for key in ratios:
                ratios[key].append(p["Session"][key] / min(p[q][key] for q in PEERS))
        print(f"| {budget // 1000}k | {spread(ratios['anthropic_billed'])} | "
              f"{spread(ratios['openai_billed'])} |")
    goals(by)


def goals(by: dict) -> None:
    pairs = [(k, p) for k, p in by.items() if "Session" in p and all(q in p for q in PEERS)]
    n = len(pairs)
    ours = lambda p: p["Session"]  # noqa: E731
    near = sum(ours(p)["of_ceiling"] >= 0.9 for _, p in pairs)
    below = [k for k, p in pairs
             if any(ours(p)["prefix_reuse"] < p[q]["prefix_reuse"] for q in PEERS)]
    refused = sum(ours(p)["refused"] for _, p in pairs)
    costly = {key: [k for k, p in pairs if ours(p)[key] > min(p[q][key] for q in PEERS)]
              for key in ("anthropic_billed", "openai_billed")}
    print("\nGoals (issue 30), on the pairs of this run\n")
    print(f"- prefix reuse >= 0.9 of the ceiling on >= 90% of pairs: {near} of {n} "
          f"({near / max(n, 1):.0%}): **{'met' if near >= 0.9 * n else 'not met'}**")
    print(f"- prefix reuse >= both peers on every pair: {n - len(below)} of {n}: "
          f"**{'met' if not below else 'not met'}**" + (f" (below: {fmt(below)})" if below else ""))
    print(f"- no refusal: {refused} refused: **{'met' if refused == 0 else 'not met'}**")
    for key, name in (("anthropic_billed", "Anthropic"), ("openai_billed", "OpenAI")):
        bad = costly[key]
        print(f"- billed input <= the cheaper peer's ({name}): {n - len(bad)} of {n}: "
              f"**{'met' if not bad else 'not met'}**" + (f" (above: {fmt(bad)})" if bad else ""))
    print("\n| kind | pairs | >= 0.9 of the ceiling | >= both peers | Anthropic <= cheaper peer "
          "| OpenAI <= cheaper peer |")
    print("|---|---|---|---|---|---|")
    for kind in sorted({s.split("-")[0] for (s, _), _ in pairs}):
        of = [(k, p) for k, p in pairs if k[0].startswith(kind + "-")]
        print(f"| {kind} | {len(of)} | {sum(ours(p)['of_ceiling'] >= 0.9 for _, p in of)} | "
              f"{sum(k not in below for k, _ in of)} | "
              f"{sum(k not in costly['anthropic_billed'] for k, _ in of)} | "
              f"{sum(k not in costly['openai_billed'] for k, _ in of)} |")
    print()
    at64 = [ours(p).get("ms_median") for (s, b), p in pairs if b == 64_000]
    if at64:
        median = statistics.median(at64)
        print(f"- time per request <= 2 ms median at 64k: median of the sessions' medians "
              f"{median:.2f} ms: **{'met' if median <= 2 else 'not met'}**")
    flat = {}
    for (s, b), p in pairs:
        if b == 64_000 and s.startswith("coding-") and s.split("-")[1] in ("300", "2000"):
            flat.setdefault(s.split("-")[1], []).append(ours(p)["ms_median"])
    if len(flat) == 2:
        ratio = statistics.median(flat["2000"]) / statistics.median(flat["300"])
        print(f"- flat from 300 to 2,000 turns (coding, 64k, ratio of medians): {ratio:.2f}x "
              "(the sessions ran at different times of a shared machine: compare with care)")


def fmt(keys: list) -> str:
    shown = ", ".join(f"{s} at {b // 1000}k" for s, b in keys[:8])
    return shown + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
