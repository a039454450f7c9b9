//! Token counting: exact BPE counts for OpenAI encodings, and a fast approximate heuristic.

/// Counts the tokens of a text. The budget is always checked with the configured counter on the
/// final rendered window.
///
/// Use a built-in [`Tokenizer`], or bring the counter of your model:
///
/// ```
/// use compaction::{Compactor, TokenCounter, Tokenizer};
///
/// assert_eq!(Tokenizer::O200kBase.count("never touch /etc/prod"), 6);
/// assert_eq!(Tokenizer::Heuristic.count("12345678"), 2); // one token per 4 bytes
///
/// /// A stand-in for your model's tokenizer: one token per word.
/// struct Words;
/// impl TokenCounter for Words {
///     fn count(&self, text: &str) -> usize {
///         text.split_whitespace().count()
///     }
///     fn name(&self) -> &str {
///         "words"
///     }
/// }
///
/// let compactor = Compactor::builder().budget(1_000).token_counter(Words).build()?;
/// assert_eq!(compactor.counter().name(), "words");
/// # Ok::<(), compaction::CompactionError>(())
/// ```
pub trait TokenCounter: Send + Sync {
    /// Number of tokens in `text`.
    fn count(&self, text: &str) -> usize;

    /// `Some(count)` when `text` has at most `limit` tokens, `None` otherwise. Counters that can
    /// stop early (the built-in BPE ones) make this cheap for texts far over the limit.
    fn count_till_limit(&self, text: &str, limit: usize) -> Option<usize> {
        let n = self.count(text);
        (n <= limit).then_some(n)
    }

    /// A short name for reports (`o200k_base`, `cl100k_base`, `heuristic`).
    fn name(&self) -> &str {
        "custom"
    }
}

/// The built-in token counters.
///
/// `O200kBase` and `Cl100kBase` are exact byte-pair encodings (GPT-4o family and GPT-4/3.5
/// family), computed offline by the `bpe-openai` crate. `Heuristic` is approximate: one token per
/// four bytes, rounded up. It is fast but can under-count dense text, so use it only when the
/// budget has slack or the model's tokenizer is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tokenizer {
    /// Exact `o200k_base` counts.
    #[default]
    O200kBase,
    /// Exact `cl100k_base` counts.
    Cl100kBase,
    /// Approximate: `ceil(bytes / 4)`.
    Heuristic,
}

impl TokenCounter for Tokenizer {
    fn count(&self, text: &str) -> usize {
        match self {
            Tokenizer::O200kBase => bpe_openai::o200k_base().count(text),
            Tokenizer::Cl100kBase => bpe_openai::cl100k_base().count(text),
            Tokenizer::Heuristic => text.len().div_ceil(4),
        }
    }

    fn count_till_limit(&self, text: &str, limit: usize) -> Option<usize> {
        let bpe = match self {
            Tokenizer::O200kBase => bpe_openai::o200k_base(),
            Tokenizer::Cl100kBase => bpe_openai::cl100k_base(),
            Tokenizer::Heuristic => {
                let n = self.count(text);
                return (n <= limit).then_some(n);
            }
        };
        bpe.count_till_limit(&bpe.normalize(text), limit)
    }

    fn name(&self) -> &str {
        match self {
            Tokenizer::O200kBase => "o200k_base",
            Tokenizer::Cl100kBase => "cl100k_base",
            Tokenizer::Heuristic => "heuristic",
        }
    }
}

impl<F: Fn(&str) -> usize + Send + Sync> TokenCounter for F {
    fn count(&self, text: &str) -> usize {
        self(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_counts_match_known_values() {
        // "hello world" is two tokens in both encodings.
        assert_eq!(Tokenizer::O200kBase.count("hello world"), 2);
        assert_eq!(Tokenizer::Cl100kBase.count("hello world"), 2);
        assert_eq!(Tokenizer::Heuristic.count("hello world"), 3);
        assert_eq!(Tokenizer::O200kBase.count(""), 0);
    }
}
