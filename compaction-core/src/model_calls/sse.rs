//! Server-sent events framing (the WHATWG `text/event-stream` rules), fed bytes split anywhere:
//! lines end in `\n`, `\r\n` or `\r` (a `\r\n` split across two chunks is one line end), an
//! event is its `event:` name and its `data:` lines, dispatched at a blank line; comments
//! (`:`), `id:` and `retry:` are read and dropped. An event whose bytes pass the decoder's
//! limit (4 MiB by default) is refused as soon as they do, so a server cannot make the reader
//! buffer an event of any size.

/// One dispatched event: its `event:` name, if any, and its data lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    pub(crate) name: Option<String>,
    pub(crate) data: String,
}

/// The most bytes one event may hold (its name, data lines and the line being read) by
/// default: a streamed event is a delta of a few bytes to a few KiB; a whole block in one
/// event (a compaction summary, a redacted thinking block) is at most a few hundred KiB.
pub(crate) const DEFAULT_MAX_EVENT_BYTES: usize = 4 << 20;

/// Why the stream's bytes do not frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SseError {
    /// The stream's bytes are not UTF-8 text (a line, once whole, did not decode).
    NotUtf8,
    /// One event's bytes passed the decoder's limit.
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
}

/// The framing state between two chunks: the line read so far and the event being built.
#[derive(Debug)]
pub(crate) struct SseDecoder {
    /// The bytes of the current line: a UTF-8 character split across chunks stays whole here.
    line: Vec<u8>,
    /// The last byte was a `\r`: a `\n` right after it ends nothing more.
    after_cr: bool,
    /// Whether a line was read yet (a byte order mark may start the first one).
    started: bool,
    name: Option<String>,
    data: Option<String>,
    /// The most bytes one event may hold.
    limit: usize,
}

impl Default for SseDecoder {
    fn default() -> Self {
        SseDecoder::with_limit(DEFAULT_MAX_EVENT_BYTES)
    }
}

impl SseDecoder {
    /// A decoder refusing any event of more than `limit` bytes.
    pub(crate) fn with_limit(limit: usize) -> Self {
        SseDecoder {
            line: Vec::new(),
            after_cr: false,
            started: false,
            name: None,
            data: None,
            limit,
        }
    }

    /// Reads `bytes` and appends every event they complete to `out`.
    pub(crate) fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        for &byte in bytes {
            match byte {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    self.line_ended(&line, out)?;
                }
                _ => {
                    self.after_cr = false;
                    self.line.push(byte);
                    // Checked as the bytes come: the event is refused before it is held whole.
                    if self.held() > self.limit {
                        return Err(SseError::TooLarge { limit: self.limit });
                    }
                }
            }
        }
        Ok(())
    }

    /// The bytes of the event being read: its name, its data so far and the current line.
    fn held(&self) -> usize {
        let name = self.name.as_ref().map_or(0, String::len);
        let data = self.data.as_ref().map_or(0, String::len);
        name + data + self.line.len()
    }

    /// Whether bytes of an event not yet dispatched are held (a line or lines without the
    /// blank line that ends the event): at the end of the stream they are dropped, as the
    /// framing rules say, so the stream was cut.
    pub(crate) fn holds_partial_event(&self) -> bool {
        !self.line.is_empty() || self.data.is_some() || self.name.is_some()
    }

    fn line_ended(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let mut line = std::str::from_utf8(line).map_err(|_| SseError::NotUtf8)?;
        if !self.started {
            self.started = true;
            line = line.strip_prefix('\u{feff}').unwrap_or(line);
        }
        if line.is_empty() {
            let name = self.name.take();
            if let Some(mut data) = self.data.take() {
                data.pop(); // the `\n` after the last data line
                out.push(SseEvent { name, data });
            }
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(()); // a comment
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.name = Some(value.to_owned()),
            "data" => {
                let data = self.data.get_or_insert_with(String::new);
                data.push_str(value);
                data.push('\n');
            }
            _ => {} // `id`, `retry` and unknown fields change nothing we read
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(chunks: &[&[u8]]) -> (Vec<SseEvent>, bool) {
        let mut decoder = SseDecoder::default();
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.push(chunk, &mut out).expect("UTF-8");
        }
        (out, decoder.holds_partial_event())
    }

    fn event(name: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            name: name.map(str::to_owned),
            data: data.to_owned(),
        }
    }

    #[test]
    fn events_are_framed_by_blank_lines_whatever_the_line_ends() {
        let text = "\u{feff}event: a\ndata: {\"x\":1}\n\n: comment\r\nid: 7\r\ndata:two\r\ndata:  lines\r\n\r\nevent: b\rdata\r\r";
        let (events, partial) = decode(&[text.as_bytes()]);
        assert_eq!(
            events,
            vec![
                event(Some("a"), "{\"x\":1}"),
                event(None, "two\n lines"),
                event(Some("b"), ""),
            ]
        );
        assert!(!partial);
    }

    #[test]
    fn a_split_anywhere_gives_the_same_events() {
        let text = "event: x\r\ndata: é×\r\n\r\nevent: y\ndata: z\n\n".as_bytes();
        let (whole, _) = decode(&[text]);
        for cut in 0..text.len() {
            let (split, _) = decode(&[&text[..cut], &text[cut..]]);
            assert_eq!(split, whole, "cut at {cut}");
        }
        let bytes: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(decode(&bytes).0, whole);
    }

    #[test]
    fn an_event_without_its_blank_line_is_held_not_dispatched() {
        let (events, partial) = decode(&[b"event: message_stop\ndata: {}\n"]);
        assert!(events.is_empty() && partial);
        let (_, partial) = decode(&[b"data: {}"]);
        assert!(partial);
    }

    #[test]
    fn bytes_that_are_not_utf8_are_refused() {
        let mut decoder = SseDecoder::default();
        let mut out = Vec::new();
        assert_eq!(
            decoder.push(b"data: \xff\xfe\n", &mut out),
            Err(SseError::NotUtf8)
        );
    }

    #[test]
    fn an_event_past_the_limit_is_refused_as_its_bytes_come() {
        let mut out = Vec::new();
        // 8 bytes of data and the name: under 16, then past it within the next line.
        let mut decoder = SseDecoder::with_limit(16);
        decoder
            .push(b"event: a\ndata: 12345678\n\n", &mut out)
            .unwrap();
        assert_eq!(out.len(), 1);
        let long = decoder.push(b"event: a\ndata: 12345678\ndata: 123456789", &mut out);
        assert_eq!(long, Err(SseError::TooLarge { limit: 16 }));
        // A line never ended counts too (a server sending one endless line).
        let mut decoder = SseDecoder::with_limit(16);
        let endless = decoder.push(&[b'x'; 17], &mut out);
        assert_eq!(endless, Err(SseError::TooLarge { limit: 16 }));
    }
}
