//! `HfTokenizer` (feature `hf-tokenizers`): tokenizers built in code and saved as
//! `tokenizer.json` (nothing is downloaded), loaded back, and counted exactly as the
//! `tokenizers` crate's own encode counts them.

use compaction::hf_tokenizers::tokenizers::models::bpe::{BpeTrainer, BPE};
use compaction::hf_tokenizers::tokenizers::models::wordlevel::WordLevel;
use compaction::hf_tokenizers::tokenizers::models::TrainerWrapper;
use compaction::hf_tokenizers::tokenizers::pre_tokenizers::byte_level::ByteLevel;
use compaction::hf_tokenizers::tokenizers::pre_tokenizers::whitespace::Whitespace;
use compaction::hf_tokenizers::tokenizers::{Tokenizer, TruncationParams};
use compaction::{Compactable, Compactor, HfTokenizer, Message, TokenCounter, Transcript};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

mod common;
use common::TempDir;

const CORPUS: &[&str] = &[
    "never touch /etc/prod",
    "numpy must stay below 2.0",
    "the agent compacts its context after every turn",
    "tool results leave the window behind a verified pointer",
    "naïve café 日本語 🦀 crab",
];

/// Texts to count: seen and unseen words, unicode, empty, long.
fn samples() -> Vec<String> {
    let mut out: Vec<String> = CORPUS.iter().map(|s| s.to_string()).collect();
    out.push(String::new());
    out.push("   \n\t ".into());
    out.push("unseen words zxqv and ⟦compaction:spilled store://sha256:00⟧".into());
    out.push("the pointer ".repeat(500));
    out
}

/// A byte-level BPE, trained in code on the corpus (the kind Llama 3 and Qwen ship).
fn trained_bpe() -> Tokenizer {
    let mut tokenizer = Tokenizer::new(BPE::default());
    tokenizer.with_pre_tokenizer(Some(ByteLevel::default()));
    tokenizer.with_decoder(Some(ByteLevel::default()));
    let mut trainer: TrainerWrapper = BpeTrainer::builder()
        .vocab_size(300)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .show_progress(false)
        .build()
        .into();
    tokenizer
        .train(&mut trainer, CORPUS.iter().map(|s| s.to_string()))
        .unwrap();
    tokenizer
}

/// A word-level tokenizer with an unknown token.
fn word_level() -> Tokenizer {
    let mut vocab = HashMap::new();
    for (id, word) in ["[UNK]", "the", "pointer", "numpy", "must", "stay"]
        .iter()
        .enumerate()
    {
        vocab.insert(word.to_string(), id as u32);
    }
    let model = WordLevel::builder()
        .vocab(vocab.into_iter().collect())
        .unk_token("[UNK]".into())
        .build()
        .unwrap();
    let mut tokenizer = Tokenizer::new(model);
    tokenizer.with_pre_tokenizer(Some(Whitespace {}));
    tokenizer
}

fn own_count(tokenizer: &Tokenizer, text: &str) -> usize {
    tokenizer.encode(text, false).unwrap().get_ids().len()
}

#[test]
fn counts_of_a_saved_tokenizer_match_its_own_encode() {
    let dir = TempDir::new("hf-counts");
    for (name, tokenizer) in [("bpe", trained_bpe()), ("word", word_level())] {
        let path = dir.db(&format!("{name}-tokenizer.json"));
        tokenizer.save(&path, false).unwrap();
        let counter = HfTokenizer::from_file(&path).unwrap().named(name);
        assert_eq!(counter.name(), name);
        let from_bytes = HfTokenizer::from_bytes(std::fs::read(&path).unwrap()).unwrap();
        for text in samples() {
            let expected = own_count(&tokenizer, &text);
            assert_eq!(counter.count(&text), expected, "{name}: {text:.40}");
            assert_eq!(from_bytes.count(&text), expected);
            assert_eq!(
                counter.count_till_limit(&text, expected),
                Some(expected),
                "{name}"
            );
        }
        std::fs::remove_file(&path).unwrap();
    }
    // The trained BPE splits unseen words into several tokens: counts are not word counts.
    let bpe = HfTokenizer::from_tokenizer(trained_bpe()).unwrap();
    assert!(bpe.count("zxqvwk") > 1);
    assert_eq!(bpe.count(""), 0);
}

#[test]
fn truncation_in_the_file_does_not_cut_the_count() {
    let mut tokenizer = word_level();
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: 4,
            ..TruncationParams::default()
        }))
        .unwrap();
    let dir = TempDir::new("hf-truncation");
    let path = dir.db("truncating-tokenizer.json");
    tokenizer.save(&path, false).unwrap();
    let text = "the pointer ".repeat(50);
    assert_eq!(own_count(&tokenizer, &text), 4); // what a naive counter would report
    let counter = HfTokenizer::from_file(&path).unwrap();
    assert_eq!(counter.count(&text), 100);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_missing_or_malformed_file_is_a_typed_error() {
    let dir = TempDir::new("hf-missing");
    let missing = HfTokenizer::from_file(dir.db("does-not-exist.json")).unwrap_err();
    assert!(missing.origin().ends_with("does-not-exist.json"));
    assert!(missing.to_string().contains("cannot load the tokenizer"));
    let malformed = HfTokenizer::from_bytes(br#"{"model": "#).unwrap_err();
    assert_eq!(malformed.origin(), "bytes");
}

#[derive(Compactable, Serialize, Deserialize)]
struct Agent {
    #[transcript]
    chat: Transcript,
}

#[test]
fn a_compactor_keeps_its_budget_in_the_models_tokens() {
    let counter = HfTokenizer::from_tokenizer(trained_bpe())
        .unwrap()
        .named("bpe");
    let mut chat = Transcript::new();
    for turn in 0..30 {
        chat.push(Message::user(format!("turn {turn}: {}", CORPUS[turn % 5])));
        chat.push(Message::assistant(CORPUS[(turn + 1) % 5].repeat(20)));
    }
    let compactor = Compactor::builder()
        .budget(2_500)
        .token_counter(counter)
        .build()
        .unwrap();
    assert_eq!(compactor.counter().name(), "bpe");
    let full = compaction::transcript::chat_tokens(chat.messages(), compactor.counter());
    assert!(full > 2_500, "the transcript must need compaction: {full}");
    let compacted = compactor.compact_blocking(&Agent { chat }).unwrap();
    assert!(compacted.request_tokens().unwrap() <= 2_500);
    let exact = compaction::transcript::chat_tokens(&compacted.messages(), compactor.counter());
    assert!(exact <= 2_500, "{exact}");
}
