//! The baseline most agents ship today: keep the system prompt, the last messages that fit, and
//! a summary of everything older, cutting wherever the token count says.

use compaction::transcript::{message_tokens, ChatFormat, OpenAiChat};
use compaction::{block_on, Message, Summarizer, SummaryRequest, TokenCounter};

/// What the naive compactor puts in front of its summary.
pub const SUMMARY_HEADER: &str = "Summary of the earlier conversation:\n";

/// Keeps the last messages that fit and summarizes the rest.
pub struct Naive<'a, S> {
    pub budget: usize,
    pub summary_tokens: usize,
    pub counter: &'a dyn TokenCounter,
    pub summarizer: &'a S,
    /// Tokens of each message seen so far (a cache: the counts do not change the result).
    costs: Vec<usize>,
}

impl<'a, S: Summarizer> Naive<'a, S> {
    pub fn new(
        budget: usize,
        summary_tokens: usize,
        counter: &'a dyn TokenCounter,
        summarizer: &'a S,
    ) -> Self {
        Naive {
            budget,
            summary_tokens,
            counter,
            summarizer,
            costs: Vec::new(),
        }
    }

    /// The request for `history` (whose first message is the system prompt).
    pub fn request(&mut self, history: &[Message]) -> Vec<Message> {
        for message in &history[self.costs.len()..] {
            self.costs.push(message_tokens(message, self.counter));
        }
        let summary_room =
            message_tokens(&Message::system(SUMMARY_HEADER), self.counter) + self.summary_tokens;
        let mut total = self.costs[0] + OpenAiChat.reply_priming();
        if total + self.costs[1..].iter().sum::<usize>() <= self.budget {
            return history.to_vec();
        }
        total += summary_room;
        // Walk back from the newest message while the count allows: the cut lands wherever
        // the budget runs out, between a call and its result if that is where it is.
        let mut cut = history.len();
        while cut > 1 && total + self.costs[cut - 1] <= self.budget {
            total += self.costs[cut - 1];
            cut -= 1;
        }
        let mut request = vec![history[0].clone()];
        let source = transcript_text(&history[1..cut]);
        let summary = block_on(self.summarizer.summarize(SummaryRequest {
            field: "chat",
            text: &source,
            target_tokens: self.summary_tokens,
        }))
        .unwrap_or_else(|e| format!("(no summary: {e})"));
        request.push(Message::system(format!("{SUMMARY_HEADER}{summary}")));
        request.extend_from_slice(&history[cut..]);
        request
    }
}

/// The dropped messages as the summarizer reads them: one line per message and per call.
fn transcript_text(messages: &[Message]) -> String {
    let mut text = String::new();
    for message in messages {
        text.push_str(&format!("{}: {}\n", message.role.as_str(), message.content));
        for call in &message.tool_calls {
            text.push_str(&format!("  -> {} {}\n", call.name, call.arguments));
        }
    }
    text
}
