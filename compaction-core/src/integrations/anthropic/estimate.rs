//! `ClaudeEstimate`: Claude's token count from `o200k_base` with a margin, for budgets and
//! cache minimums on Anthropic's wire without the summarizer's HTTP stack (feature
//! `anthropic-types`).

use crate::tokens::{TokenCounter, Tokenizer};

/// Claude's token count estimated from `o200k_base`: `ceil(o200k × factor)`.
///
/// Anthropic does not publish Claude's tokenizer (its exact counts come from the
/// `/v1/messages/count_tokens` endpoint), so a budget counted with `o200k_base` alone can be
/// too small for Claude. What we measured and what is published, on technical Markdown:
///
/// | counter | characters per token |
/// |---|---|
/// | `o200k_base`, the README.md before the guide (measured: 78,911 chars, 19,979 tokens) | 3.95 |
/// | Claude Opus 4.6, a 5,000-char CLAUDE.md (published: 1,399 tokens) | 3.57 |
/// | Claude Opus 4.7, the same file (published: 2,021 tokens) | 2.47 |
///
/// So Claude counts about 1.1× `o200k` before Opus 4.7 and about 1.6× with its tokenizer
/// (Anthropic states 1.0-1.35× between 4.6 and 4.7; third-party counts through the endpoint
/// reach 1.47× on documentation and 1.45× on English prose). The default factor, 1.6, covers
/// Opus 4.7 on Latin-script text and code; [`ClaudeEstimate::new`] takes another (1.15 for
/// earlier models). It only over-counts text whose Claude count is lower (CJK text, numbers).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClaudeEstimate {
    factor: f64,
}

impl ClaudeEstimate {
    /// `ceil(o200k × factor)`; a factor below 1 (or not finite) is taken as 1.
    pub fn new(factor: f64) -> Self {
        let factor = if factor.is_finite() && factor >= 1.0 {
            factor
        } else {
            1.0
        };
        ClaudeEstimate { factor }
    }

    /// The factor applied.
    pub fn factor(&self) -> f64 {
        self.factor
    }
}

impl Default for ClaudeEstimate {
    /// Factor 1.6 (see the type's docs).
    fn default() -> Self {
        ClaudeEstimate::new(1.6)
    }
}

impl TokenCounter for ClaudeEstimate {
    fn count(&self, text: &str) -> usize {
        (Tokenizer::O200kBase.count(text) as f64 * self.factor).ceil() as usize
    }

    fn count_till_limit(&self, text: &str, limit: usize) -> Option<usize> {
        // The o200k count is at most limit / factor exactly when the estimate is at most limit.
        let inner = (limit as f64 / self.factor).floor() as usize;
        Tokenizer::O200kBase
            .count_till_limit(text, inner)
            .map(|n| (n as f64 * self.factor).ceil() as usize)
            .filter(|n| *n <= limit)
    }

    fn name(&self) -> &str {
        "claude_estimate"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_scales_o200k_and_agrees_with_its_limit() {
        let text = "The quick brown fox jumps over the lazy dog. ".repeat(20);
        let o200k = Tokenizer::O200kBase.count(&text);
        let estimate = ClaudeEstimate::default();
        let n = estimate.count(&text);
        assert_eq!(n, (o200k as f64 * 1.6).ceil() as usize);
        for limit in [0, n - 1, n, n + 1, 10 * n] {
            assert_eq!(
                estimate.count_till_limit(&text, limit),
                (n <= limit).then_some(n),
                "{limit}"
            );
        }
        assert_eq!(ClaudeEstimate::new(0.5).factor(), 1.0);
        assert_eq!(ClaudeEstimate::new(f64::NAN).factor(), 1.0);
    }
}
