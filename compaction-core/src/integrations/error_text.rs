//! [`ErrorText`]: the one place where a server's bytes become an error's text. Every error
//! built from an answer (a body, a header, an SSE event's name, an error's type or message,
//! serde's reason, which may quote the input) goes through [`ErrorText::excerpt`], which
//! replaces every secret the caller holds (the API key) *first* and only then cuts the text at
//! a character boundary: cut first, a key straddling the cut would survive minus its last
//! characters, which no later replacement finds.

/// What replaces a secret in an error.
const REPLACEMENT: &str = "<api key>";
/// The most characters of a server's text an error carries.
pub(crate) const EXCERPT_CHARS: usize = 200;

/// The secrets an error must never hold (none for an assembler used on its own), and the
/// function every error text built from a server's bytes goes through. No `Debug`: it holds
/// the secrets.
#[derive(Clone, Default)]
pub(crate) struct ErrorText {
    /// Each secret in every form a server's text may show it in (as sent, JSON-escaped,
    /// Debug-escaped), longest first so a longer form is replaced whole.
    forms: Vec<String>,
}

impl ErrorText {
    /// Error text that never holds any of `secrets` (empty ones are skipped).
    // Only the HTTP clients hold a key; the wire types alone (`*-types`) make none.
    #[cfg_attr(not(any(feature = "anthropic", feature = "openai")), allow(dead_code))]
    pub(crate) fn new<S: AsRef<str>>(secrets: impl IntoIterator<Item = S>) -> Self {
        let mut forms: Vec<String> = Vec::new();
        for secret in secrets {
            let secret = secret.as_ref();
            if secret.is_empty() {
                continue;
            }
            // A server may echo the key inside a JSON string, and serde's reasons quote
            // values with Debug's escapes: a key with a quote, a backslash or a control
            // character reads differently in each.
            let json = serde_json::to_string(secret).unwrap_or_default();
            let debug = format!("{secret:?}");
            for form in [
                secret,
                json.get(1..json.len().saturating_sub(1)).unwrap_or(""),
                debug.get(1..debug.len().saturating_sub(1)).unwrap_or(""),
            ] {
                if !form.is_empty() && !forms.iter().any(|f| f == form) {
                    forms.push(form.to_owned());
                }
            }
        }
        forms.sort_by_key(|form| std::cmp::Reverse(form.len()));
        ErrorText { forms }
    }

    /// `text` for an error: every secret replaced by `<api key>`, then at most
    /// [`EXCERPT_CHARS`] characters, the cut marked with the whole text's size.
    pub(crate) fn excerpt(&self, text: &str) -> String {
        self.excerpt_within(text, EXCERPT_CHARS)
    }

    /// [`excerpt`](Self::excerpt) with another length: scrubbed first, then cut at a
    /// character boundary after `max_chars` characters.
    pub(crate) fn excerpt_within(&self, text: &str, max_chars: usize) -> String {
        let scrubbed = self.scrub(text);
        let text = scrubbed.trim();
        match text.char_indices().nth(max_chars) {
            Some((end, _)) => format!("{}… ({} bytes in all)", &text[..end], text.len()),
            None => text.to_owned(),
        }
    }

    /// `text` with every form of every secret replaced, in one pass over the server's text:
    /// at each point the earliest form found (the longest, where two start together) is
    /// replaced and the search goes on after it. The replacements are never searched again,
    /// so this ends whatever the key (a key `key` or `e` sits inside `<api key>` itself: a
    /// search of the replaced text would never end), and a key without `<` or `>` cannot be
    /// formed across a replacement's edge. Each form's next place is searched for only once
    /// the cursor passed the one found before: a body echoing the key many times is read
    /// once per form, not once per echo.
    fn scrub(&self, text: &str) -> String {
        let mut next: Vec<Option<usize>> =
            self.forms.iter().map(|f| text.find(f.as_str())).collect();
        let mut out = String::with_capacity(text.len());
        let mut cursor = 0;
        loop {
            for (form, at) in self.forms.iter().zip(&mut next) {
                if at.is_some_and(|at| at < cursor) {
                    *at = text[cursor..].find(form.as_str()).map(|i| cursor + i);
                }
            }
            // The earliest place; `forms` is longest first, so the lower index at a tie.
            let found = next
                .iter()
                .enumerate()
                .filter_map(|(i, at)| Some(((*at)?, i)));
            let Some((at, i)) = found.min() else {
                out.push_str(&text[cursor..]);
                return out;
            };
            out.push_str(&text[cursor..at]);
            out.push_str(REPLACEMENT);
            cursor = at + self.forms[i].len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_excerpt_is_short_and_says_it_was_cut() {
        let plain = ErrorText::default();
        assert_eq!(plain.excerpt("  short body "), "short body");
        let cut = plain.excerpt(&"é".repeat(1000));
        assert!(cut.chars().count() < EXCERPT_CHARS + 40, "{cut}");
        assert!(cut.ends_with("(2000 bytes in all)"), "{cut}");
    }

    #[test]
    fn a_key_across_the_cut_is_replaced_before_the_cut() {
        let key = "sk-live-0123456789abcdef";
        let text = format!("{}{key} and more", "x".repeat(EXCERPT_CHARS - 5));
        let out = ErrorText::new([key]).excerpt(&text);
        assert!(!out.contains("sk-live-0"), "{out}");
        assert!(out.ends_with(&format!("({} bytes in all)", text.len() - key.len() + 9)));
        // Escaped forms too, and a key that holds the replacement itself.
        let odd = "k\"e\\y\n<api key>";
        let echoed = format!("json {} debug {odd:?} raw {odd}", serde_json::json!(odd));
        let out = ErrorText::new([odd]).excerpt_within(&echoed, 1000);
        assert_eq!(out, "json \"<api key>\" debug \"<api key>\" raw <api key>");
    }

    /// A key the replacement holds (`key`, one letter): replaced once, never searched again in
    /// what replaced it (a search of the replaced text grew it without end).
    #[test]
    fn a_key_inside_the_replacement_ends() {
        assert_eq!(
            ErrorText::new(["key"]).excerpt("invalid x-api-key: key"),
            "invalid x-api-<api key>: <api key>"
        );
        assert_eq!(ErrorText::new(["e"]).excerpt("see"), "s<api key><api key>");
        // Two forms starting at one place: the longer is replaced whole.
        let text = ErrorText::new(["abc", "abcdef"]);
        assert_eq!(text.excerpt("xabcdefy abc"), "x<api key>y <api key>");
    }

    /// The key at every offset of a text, cut at every length around it (every case the
    /// random ones of `tests/no_key_in_errors.rs` draw from, here exhaustively): no excerpt
    /// holds the key or any 12-character run of it.
    #[test]
    fn no_excerpt_holds_a_run_of_the_key_whatever_the_offset_and_the_cut() {
        let key = "sk-ant-api03-Zq9_x7-Kp2mL4vN8";
        let text = ErrorText::new([key]);
        let chars: Vec<char> = key.chars().collect();
        let runs: Vec<String> = chars.windows(12).map(|r| r.iter().collect()).collect();
        let filler: Vec<char> = "é日 .,:\\\"{}ab\n".chars().collect();
        for offset in 0..240 {
            let before: String = (0..offset).map(|i| filler[i % filler.len()]).collect();
            let echoed = format!("{before}{key}{before}");
            for cut in 0..260 {
                let out = text.excerpt_within(&echoed, cut);
                assert!(
                    runs.iter().all(|run| !out.contains(run.as_str())),
                    "offset {offset}, cut {cut}: {out}"
                );
                assert!(out.chars().count() <= cut + 40, "{out}");
            }
        }
    }
}
