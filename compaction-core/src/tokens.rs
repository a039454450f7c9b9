//! Token counting: exact BPE counts for OpenAI encodings, and a fast approximate heuristic.

use pieces::Encoding;

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
///
/// The exact counters remember the counts of short pieces (words, up to 15 bytes) in a memo per
/// thread and encoding, about 200 KB each, allocated by a thread's first count and emptied when
/// full: most words recur, and a remembered piece is not encoded again.
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
            Tokenizer::O200kBase => pieces::count(Encoding::O200k, text, usize::MAX),
            Tokenizer::Cl100kBase => pieces::count(Encoding::Cl100k, text, usize::MAX),
            Tokenizer::Heuristic => Some(text.len().div_ceil(4)),
        }
        .expect("no text has more than usize::MAX tokens")
    }

    fn count_till_limit(&self, text: &str, limit: usize) -> Option<usize> {
        match self {
            Tokenizer::O200kBase => pieces::count(Encoding::O200k, text, limit),
            Tokenizer::Cl100kBase => pieces::count(Encoding::Cl100k, text, limit),
            Tokenizer::Heuristic => {
                let n = self.count(text);
                (n <= limit).then_some(n)
            }
        }
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

/// The derive's UI test type-checks its fail cases with `--cfg trybuild` and never runs them;
/// that build leaves out `bpe-openai` (see compaction-core's Cargo.toml), so the exact counts
/// are never compiled into it. Every other build counts with [`pieces`].
#[cfg(trybuild)]
mod pieces {
    /// The encodings of the exact counters.
    #[derive(Clone, Copy)]
    pub(super) enum Encoding {
        O200k,
        Cl100k,
    }

    pub(super) fn count(encoding: Encoding, _text: &str, _limit: usize) -> Option<usize> {
        let (Encoding::O200k | Encoding::Cl100k) = encoding;
        unreachable!("a `--cfg trybuild` build is type-checked, never run")
    }
}

#[cfg(not(trybuild))]
mod pieces {
    //! Exact BPE counts with a per-thread memo of short pieces.
    //!
    //! A BPE count splits the text into pieces (the encoding's pre-tokenizer: words, numbers,
    //! punctuation runs) and encodes each piece alone, so a piece's count never depends on its
    //! neighbours. Encoding a piece builds an encoder with two allocations; most pieces are short
    //! words that recur ("the", " compaction"), and looking their count up is several times
    //! cheaper. The memo is per thread (no lock on the hot path), keyed by the piece's bytes, holds
    //! only pieces of at most [`SHORT`] bytes, and is fixed in size: allocated once at
    //! [`CAPACITY`] entries on a thread's first count, emptied when full. Longer pieces (identifiers,
    //! base64, hex) are encoded each time, with the early stop of `count_till_limit`.
    //!
    //! The counts are the encoding's own: `tests::memo_counts_equal_the_encodings` compares them
    //! with `bpe-openai`'s on generated text, hostile and ordinary.

    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::hash::RandomState;

    /// The longest piece the memo keeps, in bytes.
    const SHORT: usize = 15;
    /// Entries the memo holds before it is emptied (about 200 KB per thread).
    const CAPACITY: usize = 4_096;

    /// The encodings with a memo of their own.
    #[derive(Clone, Copy)]
    pub(super) enum Encoding {
        O200k,
        Cl100k,
    }

    impl Encoding {
        fn tokenizer(self) -> &'static bpe_openai::Tokenizer {
            match self {
                Encoding::O200k => bpe_openai::o200k_base(),
                Encoding::Cl100k => bpe_openai::cl100k_base(),
            }
        }
    }

    /// A short piece as its bytes padded with zeros, its length in the last byte.
    type Key = [u64; 2];

    fn key(piece: &[u8]) -> Key {
        let mut bytes = [0u8; 16];
        bytes[..piece.len()].copy_from_slice(piece);
        bytes[15] = piece.len() as u8;
        [
            u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")),
            u64::from_le_bytes(bytes[8..].try_into().expect("8 bytes")),
        ]
    }

    /// Keyed by std's randomly seeded hasher: text is outside input, and a memo whose keys an
    /// adversary could make collide would turn each lookup into a scan.
    type Memo = HashMap<Key, u32, RandomState>;

    thread_local! {
        static MEMOS: RefCell<[Option<Memo>; 2]> = const { RefCell::new([None, None]) };
    }

    /// The shortest text whose count the text memo keeps, in bytes: below it, splitting is
    /// as cheap as hashing.
    const LONG: usize = 256;
    /// The longest: a larger text is rarely counted twice unchanged.
    const LONGEST: usize = 64 * 1024;
    /// The bytes of text the memo holds per thread and encoding before it is emptied: the
    /// texts counted again are a request's window lines and recent messages, tens to hundreds
    /// of KB, and a server counting on many threads keeps one memo per thread.
    const TEXT_BYTES: usize = 2 * 1024 * 1024;

    /// What is known of a long text's count.
    #[derive(Clone, Copy)]
    enum Known {
        /// Exactly this many tokens.
        Exactly(usize),
        /// More than this many (a count stopped at that limit).
        MoreThan(usize),
    }

    /// Counts of whole long texts, keyed by the text itself (never by a hash alone: a
    /// collision would be a wrong count), with the bytes it holds.
    #[derive(Default)]
    struct TextMemo {
        known: HashMap<Box<str>, Known, RandomState>,
        bytes: usize,
    }

    thread_local! {
        /// The window's lines and the conversation's messages are counted again at every
        /// request (the planner asks whether a field's line fits, the effect log's line grows
        /// with the session): the pre-tokenizer's split of such a text costs many times its
        /// lookup here.
        static TEXTS: RefCell<[Option<TextMemo>; 2]> = const { RefCell::new([None, None]) };
    }

    /// `Some(tokens)` when `text` has at most `limit` tokens in `encoding`, `None` otherwise.
    pub(super) fn count(encoding: Encoding, text: &str, limit: usize) -> Option<usize> {
        if !(LONG..=LONGEST).contains(&text.len()) {
            return count_pieces(encoding, text, limit);
        }
        let known = TEXTS
            .try_with(|texts| {
                let texts = texts.borrow();
                texts[encoding as usize]
                    .as_ref()
                    .and_then(|memo| memo.known.get(text).copied())
            })
            .ok()
            .flatten();
        match known {
            Some(Known::Exactly(tokens)) => return (tokens <= limit).then_some(tokens),
            Some(Known::MoreThan(floor)) if limit <= floor => return None,
            _ => {}
        }
        let counted = count_pieces(encoding, text, limit);
        let learned = counted.map_or(Known::MoreThan(limit), Known::Exactly);
        // A count from a thread-local's destructor finds the memo gone: it is not kept.
        let _ = TEXTS.try_with(|texts| {
            let mut texts = texts.borrow_mut();
            let memo = texts[encoding as usize].get_or_insert_with(TextMemo::default);
            if let Some(known) = memo.known.get_mut(text) {
                *known = learned;
                return;
            }
            if memo.bytes + text.len() > TEXT_BYTES {
                memo.known.clear();
                memo.bytes = 0;
            }
            memo.bytes += text.len();
            memo.known.insert(text.into(), learned);
        });
        counted
    }

    /// [`count`] by pieces, each short one looked up in the piece memo.
    fn count_pieces(encoding: Encoding, text: &str, limit: usize) -> Option<usize> {
        let tokenizer = encoding.tokenizer();
        let text = tokenizer.normalize(text);
        // A count from a thread-local's destructor finds the memo gone: count without it.
        let memoized = MEMOS.try_with(|memos| {
            // A count never calls back into itself, so the borrow is never held twice.
            let mut memos = memos.borrow_mut();
            let memo = memos[encoding as usize].get_or_insert_with(|| {
                Memo::with_capacity_and_hasher(CAPACITY, RandomState::new())
            });
            let mut total = 0usize;
            for piece in tokenizer.split(text.as_str()) {
                let bytes = piece.as_bytes();
                let tokens = if bytes.len() <= SHORT {
                    let key = key(bytes);
                    match memo.get(&key) {
                        Some(&tokens) => tokens as usize,
                        None => {
                            let tokens = tokenizer.bpe.count(bytes);
                            if memo.len() >= CAPACITY {
                                memo.clear();
                            }
                            memo.insert(key, tokens as u32);
                            tokens
                        }
                    }
                } else {
                    tokenizer.bpe.count_till_limit(bytes, limit - total)?
                };
                total += tokens;
                if total > limit {
                    return None;
                }
            }
            Some(total)
        });
        memoized.unwrap_or_else(|_| tokenizer.count_till_limit(&text, limit))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// Text of every kind the pre-tokenizers split differently: words, numbers, punctuation,
        /// whitespace runs, non-Latin scripts, emoji, long unbroken runs, and our own markers.
        fn generated(seed: u64, len: usize) -> String {
            const PARTS: &[&str] = &[
                " the",
                " compaction",
                "never",
                " touch",
                " /etc/prod",
                "123456789",
                " 42",
                ".",
                ",",
                "!!",
                "\n",
                "\n\n",
                "   ",
                "\t",
                "é",
                " naïve",
                "日本語",
                " 🚀",
                "⟦p17⟧",
                "store://sha256:",
                "ab",
                "x",
                "'s",
                "'LL",
                "CamelCaseIdentifier",
                "snake_case_name",
                "0x7fffffff",
                "«»",
                "—",
                "\u{200b}",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            ];
            let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
            let mut out = String::new();
            while out.len() < len {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                out.push_str(PARTS[(state % PARTS.len() as u64) as usize]);
            }
            out
        }

        #[test]
        fn memo_counts_equal_the_encodings() {
            for encoding in [Encoding::O200k, Encoding::Cl100k] {
                let reference = encoding.tokenizer();
                for seed in 0..200 {
                    let text = generated(seed, (seed as usize % 40) * 25);
                    let exact = reference.count(text.as_str());
                    // Twice: the second count reads the memo the first one filled.
                    assert_eq!(count(encoding, &text, usize::MAX), Some(exact), "{text:?}");
                    assert_eq!(count(encoding, &text, usize::MAX), Some(exact), "{text:?}");
                    for limit in [0, exact.saturating_sub(1), exact, exact + 1] {
                        let theirs =
                            reference.count_till_limit(&reference.normalize(text.as_str()), limit);
                        assert_eq!(count(encoding, &text, limit), theirs, "{text:?} at {limit}");
                    }
                }
            }
        }

        #[test]
        fn long_texts_counted_again_read_the_text_memo_exactly() {
            for encoding in [Encoding::O200k, Encoding::Cl100k] {
                let reference = encoding.tokenizer();
                for seed in 0..60 {
                    let text = generated(1_000 + seed, LONG + (seed as usize) * 97);
                    let exact = reference.count(text.as_str());
                    // A stopped count first (the memo learns a floor), then limits on either
                    // side of it, then the whole count, then limits again from the exact entry.
                    for limit in [
                        exact / 2,
                        exact / 4,
                        exact,
                        exact - 1,
                        usize::MAX,
                        exact / 2,
                    ] {
                        let theirs =
                            reference.count_till_limit(&reference.normalize(text.as_str()), limit);
                        assert_eq!(count(encoding, &text, limit), theirs, "{text:?} at {limit}");
                    }
                    // A text that extends a known one is its own entry.
                    let other = format!("{text}!");
                    assert_eq!(
                        count(encoding, &other, usize::MAX),
                        Some(reference.count(other.as_str()))
                    );
                }
            }
        }

        #[test]
        fn a_full_text_memo_is_emptied_and_counts_stay_exact() {
            let reference = Encoding::O200k.tokenizer();
            let mut last = 0;
            for i in 0..(TEXT_BYTES / LONGEST) * 2 + 3 {
                let text = format!("{i} {}", generated(i as u64, LONGEST - 16));
                assert_eq!(
                    count(Encoding::O200k, &text, usize::MAX),
                    Some(reference.count(text.as_str()))
                );
                last = TEXTS.with(|texts| texts.borrow()[0].as_ref().map_or(0, |m| m.bytes));
                assert!(last <= TEXT_BYTES, "the memo holds at most its bytes");
            }
            assert!(last > 0);
        }

        #[test]
        fn a_full_memo_is_emptied_and_counts_stay_exact() {
            let reference = Encoding::O200k.tokenizer();
            // More distinct short pieces than the memo holds.
            let text: String = (0..CAPACITY * 3).map(|i| format!(" w{i}")).collect();
            assert_eq!(
                count(Encoding::O200k, &text, usize::MAX),
                Some(reference.count(text.as_str()))
            );
            MEMOS.with(|memos| {
                let memos = memos.borrow();
                let memo = memos[Encoding::O200k as usize].as_ref().expect("filled");
                assert!(memo.len() <= CAPACITY);
                assert!(
                    memo.capacity() < CAPACITY * 2,
                    "the memo never grows past its size"
                );
            });
        }

        #[test]
        fn a_count_from_a_thread_locals_destructor_is_exact() {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static COUNTED: AtomicUsize = AtomicUsize::new(0);
            struct CountsOnDrop;
            impl Drop for CountsOnDrop {
                fn drop(&mut self) {
                    let tokens = count(Encoding::O200k, "never touch /etc/prod", usize::MAX);
                    COUNTED.store(tokens.unwrap_or(0), Ordering::SeqCst);
                }
            }
            thread_local! {
                static GUARD: CountsOnDrop = const { CountsOnDrop };
            }
            std::thread::spawn(|| {
                // std destroys thread-locals in the reverse order of their first use: the
                // memo, used after the guard, is gone when the guard's destructor counts.
                GUARD.with(|_| ());
                assert_eq!(count(Encoding::O200k, "hello world", usize::MAX), Some(2));
            })
            .join()
            .expect("no panic while the thread's locals are destroyed");
            assert_eq!(COUNTED.load(Ordering::SeqCst), 6);
        }

        #[test]
        fn a_long_piece_over_the_limit_is_refused() {
            // One unbroken piece of a million letters: the limit answers without encoding it all.
            let text = "a".repeat(1_000_000);
            assert_eq!(count(Encoding::O200k, &text, 10), None);
            assert_eq!(count(Encoding::O200k, "", 0), Some(0));
        }
    }
}
