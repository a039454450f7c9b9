//! The adversarial summarizer family: what the seeds saw summarizers do, and worse.

use compaction::{CompactorBuilder, Extractive, Summarizer, SummarizerError, SummaryRequest};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Which summarizer a case runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adversary {
    /// No summarizer configured: nothing is summarized.
    None,
    /// The built-in `Extractive`.
    Extractive,
    /// Rewrites identifiers, paths, numbers and negations, within its target.
    Paraphrase,
    /// Drops nearly everything ("done."), within its target.
    DropText,
    /// Answers with more tokens than its target.
    OverLong,
    /// Answers with nothing (or only whitespace).
    Empty,
    /// Fails (model error / timeout).
    Error,
}

impl Adversary {
    /// Every member of the family.
    pub const ALL: [Adversary; 7] = [
        Adversary::None,
        Adversary::Extractive,
        Adversary::Paraphrase,
        Adversary::DropText,
        Adversary::OverLong,
        Adversary::Empty,
        Adversary::Error,
    ];

    /// Whether a call to it must end compaction with `CompactionError::Summarizer`.
    pub fn misbehaves(self) -> bool {
        matches!(
            self,
            Adversary::OverLong | Adversary::Empty | Adversary::Error
        )
    }

    /// Installs it on a builder; the returned counter counts its calls.
    pub fn install(self, builder: CompactorBuilder) -> (CompactorBuilder, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let builder = match self {
            Adversary::None => builder,
            kind => builder.summarizer(Adversarial {
                kind,
                calls: calls.clone(),
            }),
        };
        (builder, calls)
    }
}

/// A summarizer of the adversarial family.
pub struct Adversarial {
    pub kind: Adversary,
    pub calls: Arc<AtomicUsize>,
}

/// Cuts `text` to at most `max` bytes at a char boundary. Every token of the built-in counters
/// covers at least one byte, so the cut has at most `max` tokens.
pub fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// What a careless model does to facts: wrong identifiers, rounded numbers, dropped negations,
/// collapsed qualifiers, drifted paths.
pub fn paraphrase(text: &str) -> String {
    let mut out = text
        .replace("not ", "")
        .replace("n't", "")
        .replace("blocked", "done")
        .replace("pending", "done")
        .replace("/etc/prod", "/etc/production")
        .replace("numpy<2.0", "numpy")
        .replace("mig-", "migration ")
        .replace("req-", "request ");
    out = out
        .chars()
        .map(|c| match c {
            '0'..='8' => char::from(c as u8 + 1),
            '9' => '0',
            'l' => '1',
            'O' => '0',
            other => other,
        })
        .collect();
    format!("In short: {out}")
}

impl Summarizer for Adversarial {
    async fn summarize(&self, req: SummaryRequest<'_>) -> Result<String, SummarizerError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let target = req.target_tokens;
        match self.kind {
            Adversary::None => unreachable!("no summarizer is installed for None"),
            Adversary::Extractive => Extractive.summarize(req).await,
            Adversary::Paraphrase => {
                let text = paraphrase(req.text);
                let out = cut(&text, target).trim_end();
                Ok(if out.trim().is_empty() {
                    "ok".into()
                } else {
                    out.into()
                })
            }
            Adversary::DropText => Ok(cut("done.", target).to_owned()),
            Adversary::OverLong => {
                Ok(format!("{} ", req.text).repeat(2) + &"word ".repeat(target + 4))
            }
            Adversary::Empty => Ok(if n.is_multiple_of(2) {
                String::new()
            } else {
                " \n\t ".into()
            }),
            Adversary::Error => Err(SummarizerError::failed(req.field, "model timed out")),
        }
    }
}
