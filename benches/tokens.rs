//! Token counting throughput (issue 5, measurement 3): the shipped exact o200k counter
//! (`Tokenizer::O200kBase`, backed by `bpe-openai`) against `tiktoken-rs`'s o200k encoder, and the
//! approximate `Heuristic`, on the same realistic text (tool outputs and documents).
//!
//! ```text
//! cargo bench -p compaction-benches --bench tokens
//! ```

use compaction::{TokenCounter, Tokenizer};
use divan::counter::BytesCount;
use divan::Bencher;
use std::sync::LazyLock;

/// About 1 MB of realistic text (tool outputs and documents, as in the compaction bench).
static TEXT: LazyLock<String> = LazyLock::new(|| {
    let bytes = if std::env::var_os("COMPACTION_BENCH_TINY").is_some() {
        20_000
    } else {
        1_000_000
    };
    compaction_fixtures::realistic::realistic_text(0x70C3_0005, bytes)
});

static TIKTOKEN: LazyLock<tiktoken_rs::CoreBPE> =
    LazyLock::new(|| tiktoken_rs::o200k_base().expect("o200k_base loads"));

fn main() {
    let text = &*TEXT;
    let shipped = Tokenizer::O200kBase.count(text);
    let tiktoken = TIKTOKEN.encode_ordinary(text).len();
    let heuristic = Tokenizer::Heuristic.count(text);
    println!(
        "text: {} B; o200k tokens: shipped {shipped}, tiktoken-rs {tiktoken}; heuristic {heuristic} ({:+.1}%)",
        text.len(),
        (heuristic as f64 / shipped as f64 - 1.0) * 100.0
    );
    assert_eq!(shipped, tiktoken, "both exact o200k counters must agree");
    divan::main();
}

/// The shipped exact counter: `Tokenizer::O200kBase` (bpe-openai).
#[divan::bench(sample_count = 20, sample_size = 1)]
fn o200k_shipped_bpe_openai(bencher: Bencher) {
    let text = &*TEXT;
    bencher
        .counter(BytesCount::of_str(text))
        .bench_local(|| Tokenizer::O200kBase.count(text));
}

/// tiktoken-rs's o200k_base (`encode_ordinary(..).len()`: it has no count-only entry point).
#[divan::bench(sample_count = 20, sample_size = 1)]
fn o200k_tiktoken_rs(bencher: Bencher) {
    let text = &*TEXT;
    let bpe = &*TIKTOKEN;
    bencher
        .counter(BytesCount::of_str(text))
        .bench_local(|| bpe.encode_ordinary(text).len());
}

/// The approximate heuristic (`ceil(bytes / 4)`).
#[divan::bench(sample_count = 20, sample_size = 100)]
fn heuristic(bencher: Bencher) {
    let text = &*TEXT;
    bencher
        .counter(BytesCount::of_str(text))
        .bench_local(|| Tokenizer::Heuristic.count(divan::black_box(text.as_str())));
}
