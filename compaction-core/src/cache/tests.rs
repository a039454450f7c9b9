//! One test per documented rule of each cache model: Anthropic's breakpoint limit, TTL order,
//! minimum, write-then-read prices, 20-block lookback and expiry; OpenAI's minimum, 128-token
//! steps, routing by key and leading tokens, and retention; Gemini's minimums per model, prefix
//! hits and discount.

use super::*;

const MIN: u64 = 60 * 1000;

/// Blocks of `tokens` each, with breakpoints (and their TTLs) at the given indices.
fn blocks(sizes: &[usize], breakpoints: &[(usize, CacheTtl)]) -> Vec<PromptBlock> {
    let mut out = PromptBlocks::new();
    for (i, &tokens) in sizes.iter().enumerate() {
        let bp = breakpoints.iter().find(|(at, _)| *at == i).map(|(_, t)| *t);
        out.push(format!("block {i}").as_bytes(), tokens, bp);
    }
    out.blocks().to_vec()
}

fn anthropic(min: usize) -> AnthropicCacheModel {
    AnthropicCacheModel::new(AnthropicCacheRules {
        min_cacheable_tokens: min,
        ttl: CacheTtl::FiveMinutes,
    })
}

use CacheTtl::{FiveMinutes as M5, OneHour as H1};

#[test]
fn never_a_fifth_breakpoint() {
    let four = blocks(&[500; 6], &[(0, M5), (1, M5), (2, M5), (3, M5)]);
    assert!(AnthropicCacheModel::check(&four).is_ok());
    let five = blocks(&[500; 6], &[(0, M5), (1, M5), (2, M5), (3, M5), (4, M5)]);
    assert_eq!(
        anthropic(1024).send(0, &five),
        Err(CacheRuleError::TooManyBreakpoints { found: 5 })
    );
}

#[test]
fn longer_ttls_come_first() {
    assert!(AnthropicCacheModel::check(&blocks(&[500; 3], &[(0, H1), (2, M5)])).is_ok());
    assert_eq!(
        AnthropicCacheModel::check(&blocks(&[500; 3], &[(0, M5), (2, H1)])),
        Err(CacheRuleError::TtlOrder { block: 2 })
    );
}

#[test]
fn a_prefix_under_the_minimum_is_neither_written_nor_read() {
    let request = blocks(&[300, 300, 300], &[(2, M5)]);
    let mut cache = anthropic(1024);
    for at in [0, MIN] {
        let used = cache.send(at, &request).unwrap();
        assert_eq!((used.read, used.written_5m, used.uncached), (0, 0, 900));
        assert_eq!(used.billed_input(), 900.0);
    }
}

#[test]
fn a_written_prefix_is_read_next_time_at_a_tenth_of_the_price() {
    let request = blocks(&[1000, 1000, 200], &[(1, M5)]);
    let mut cache = anthropic(1024);
    let first = cache.send(0, &request).unwrap();
    assert_eq!(
        (first.read, first.written_5m, first.uncached),
        (0, 2000, 200)
    );
    assert_eq!(first.billed_input(), 2000.0 * 1.25 + 200.0);
    let second = cache.send(MIN, &request).unwrap();
    assert_eq!(
        (second.read, second.written_5m, second.uncached),
        (2000, 0, 200)
    );
    assert!((second.billed_input() - (200.0 + 2000.0 * 0.1)).abs() < 1e-9);
    // One hour costs twice the base price to write.
    let mut hour = anthropic(1024);
    let written = hour
        .send(0, &blocks(&[1000, 1000, 200], &[(1, H1)]))
        .unwrap();
    assert_eq!((written.written_1h, written.billed_input()), (2000, 4200.0));
}

#[test]
fn the_lookback_reaches_twenty_block_boundaries_and_no_further() {
    // A 2,000-token prefix cached at block 1, then 18 or 19 new blocks and a breakpoint on the
    // last: 19 new blocks put the old boundary 20 back from the breakpoint (found), 20 new
    // blocks 21 back (not found).
    for (appended, found) in [(18usize, true), (19, false)] {
        let mut cache = anthropic(1024);
        cache.send(0, &blocks(&[1000, 1000], &[(1, M5)])).unwrap();
        let mut sizes = vec![1000, 1000];
        sizes.extend(std::iter::repeat_n(10, appended + 1));
        let last = sizes.len() - 1;
        let used = cache.send(MIN, &blocks(&sizes, &[(last, M5)])).unwrap();
        assert_eq!(used.read == 2000, found, "{appended} appended: {used:?}");
    }
}

#[test]
fn an_entry_expires_after_its_ttl_and_a_read_refreshes_it() {
    let request = blocks(&[2000, 10], &[(0, M5)]);
    let mut cache = anthropic(1024);
    cache.send(0, &request).unwrap();
    // Read at 4 minutes (refreshing it), so it is still there at 8.
    assert_eq!(cache.send(4 * MIN, &request).unwrap().read, 2000);
    assert_eq!(cache.send(8 * MIN, &request).unwrap().read, 2000);
    // Not read for 5 minutes and a millisecond: gone, written again.
    let late = cache.send(13 * MIN + 1, &request).unwrap();
    assert_eq!((late.read, late.written_5m), (0, 2000));
}

#[test]
fn the_minimum_follows_the_documented_model_families() {
    let min = |m: &str| AnthropicCacheRules::for_model(m).min_cacheable_tokens;
    assert_eq!(min("claude-opus-4-6"), 4096);
    assert_eq!(min("claude-haiku-4-5-20251001"), 4096);
    assert_eq!(min("claude-sonnet-4-6"), 2048);
    assert_eq!(min("claude-3-5-haiku-20241022"), 2048);
    assert_eq!(min("claude-sonnet-4-5-20250929"), 1024);
    assert_eq!(min("claude-opus-4-1-20250805"), 1024);
    assert_eq!(min("some-new-model"), 4096);
}

fn openai() -> OpenAiCacheModel {
    OpenAiCacheModel::new(OpenAiCacheRules::default())
}

#[test]
fn openai_caches_nothing_under_1024_tokens() {
    let request = blocks(&[500, 500], &[]);
    let mut cache = openai();
    cache.send(0, Some("k"), &request);
    assert_eq!(cache.send(MIN, Some("k"), &request).read, 0);
}

#[test]
fn openai_hits_grow_in_128_token_steps_from_1024() {
    let mut cache = openai();
    cache.send(0, Some("k"), &blocks(&[1000, 300, 50], &[]));
    // The same first 1,300 tokens, then something new: 1,300 shared -> 1,280 read.
    let mut next = PromptBlocks::new();
    next.push(b"block 0", 1000, None);
    next.push(b"block 1", 300, None);
    next.push(b"something else", 400, None);
    let used = cache.send(MIN, Some("k"), next.blocks());
    assert_eq!((used.read, used.uncached), (1280, 420));
}

#[test]
fn openai_routes_by_cache_key_and_leading_tokens() {
    let request = blocks(&[2000, 100], &[]);
    let mut cache = openai();
    cache.send(0, Some("agent-a"), &request);
    assert_eq!(
        cache.send(MIN, Some("agent-b"), &request).read,
        0,
        "another key"
    );
    // All 2,100 tokens seen before: 1,024 + 8 x 128 = 2,048 read.
    assert_eq!(cache.send(MIN, Some("agent-a"), &request).read, 2048);
    // Another first block (the leading tokens differ): another route, nothing shared.
    let mut other = PromptBlocks::new();
    other.push(b"another system prompt", 2000, None);
    other.push(b"block 1", 100, None);
    assert_eq!(cache.send(MIN, Some("agent-a"), other.blocks()).read, 0);
}

#[test]
fn openai_entries_expire_after_their_retention() {
    let request = blocks(&[2000, 100], &[]);
    let mut cache = openai();
    cache.send(0, None, &request);
    assert_eq!(cache.send(11 * MIN, None, &request).read, 0);
}

#[test]
fn gemini_caches_from_its_models_minimum_and_reads_the_shared_prefix() {
    assert_eq!(
        GeminiCacheRules::for_model("gemini-2.5-flash").min_tokens,
        1024
    );
    assert_eq!(
        GeminiCacheRules::for_model("gemini-2.5-flash-lite").min_tokens,
        1024
    );
    assert_eq!(
        GeminiCacheRules::for_model("gemini-2.5-pro").min_tokens,
        2048
    );
    assert_eq!(
        GeminiCacheRules::for_model("gemini-next-unknown").min_tokens,
        2048
    );
    // 1,500 tokens: cached on Flash, not on Pro.
    let request = blocks(&[1000, 500], &[]);
    let longer = blocks(&[1000, 500, 700], &[]);
    let mut flash = GeminiCacheModel::new(GeminiCacheRules::for_model("gemini-2.5-flash"));
    assert_eq!(flash.send(0, &request).read, 0);
    let use_ = flash.send(MIN, &longer);
    assert_eq!((use_.read, use_.uncached), (1500, 700));
    assert!((use_.billed_input() - (1500.0 * 0.25 + 700.0)).abs() < 1e-9);
    let mut pro = GeminiCacheModel::new(GeminiCacheRules::for_model("gemini-2.5-pro"));
    pro.send(0, &request);
    // The first request was under Pro's minimum: nothing was cached to read.
    assert_eq!(pro.send(MIN, &longer).read, 0);
    // Entries expire after the retention without use.
    assert_eq!(pro.send(MIN + 6 * MIN, &longer).read, 0);
    assert_eq!(pro.send(MIN + 7 * MIN, &longer).read, 2200);
}
