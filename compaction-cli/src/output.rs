//! How results are printed: UTC times, aligned tables, bars, JSON, and the progress bar.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The escapes every printed string goes through (`escape.rs`, below the failures too).
pub use crate::escape::{json_safe, printable, printable_lines};

/// Milliseconds since the Unix epoch.
pub fn millis(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// `2026-11-30T02:50:01Z` (UTC, whole seconds).
pub fn utc(time: SystemTime) -> String {
    let secs = millis(time).div_euclid(1000);
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Rows aligned under their headers, two spaces apart; the last column is not padded.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(&widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(width - cell.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A bar of `value` scaled so that `max` fills `width` cells (at least one cell when non-zero).
pub fn bar(value: usize, max: usize, width: usize) -> String {
    if value == 0 || max == 0 {
        return String::new();
    }
    let cells = (value * width).div_ceil(max).clamp(1, width);
    "█".repeat(cells)
}

/// `value` as a percentage of `total`, one decimal.
pub fn percent(value: usize, total: usize) -> String {
    if total == 0 {
        return "-".into();
    }
    format!("{:.1}%", value as f64 * 100.0 / total as f64)
}

/// `print!` that never panics: when stdout is closed early (`compaction agents DB | head`)
/// the process ends quietly, as the reader asked; another write failure is reported.
macro_rules! emit {
    ($($arg:tt)*) => { $crate::output::write_stdout(&format!($($arg)*)) };
}

/// `println!` that never panics (see `emit!`).
macro_rules! say {
    ($($arg:tt)*) => { $crate::output::write_stdout(&format!("{}\n", format_args!($($arg)*))) };
}

/// `eprintln!` for a warning that never panics (a closed stderr loses it, nothing else).
macro_rules! warn {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

/// Writes `text` to stdout; see `emit!`.
pub fn write_stdout(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("error: writing to stdout: {e}");
            std::process::exit(crate::fail::Exit::Problems as i32);
        }
        std::process::exit(crate::fail::Exit::Ok as i32);
    }
}

/// `12,345`: a count people read at a glance (marks of `show`).
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// `1 blob`, `2 blobs`, `2 entries`.
pub fn count(n: usize, noun: &str) -> String {
    match noun.strip_suffix('y') {
        _ if n == 1 => format!("1 {noun}"),
        Some(stem) => format!("{n} {stem}ies"),
        None => format!("{n} {noun}s"),
    }
}

/// Prints one JSON object on stdout, pretty, terminal-safe ([`json_safe`]).
pub fn print_json(value: &serde_json::Value) {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    say!("{}", json_safe(&text));
}

/// Work this large gets a progress bar on a terminal; below it, the work is over before a bar
/// would be read.
const PROGRESS_THRESHOLD: usize = 500;

/// A progress bar on stderr when stderr is a terminal and `total` is large; hidden otherwise
/// (pipes, tests, `--json` consumers never see it).
pub fn progress(label: &'static str, total: usize) -> ProgressBar {
    if total < PROGRESS_THRESHOLD || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} ({eta})") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(label);
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let leap_day = UNIX_EPOCH + Duration::from_secs(951_782_400 + 3_723);
        assert_eq!(utc(leap_day), "2000-02-29T01:02:03Z");
        let later = UNIX_EPOCH + Duration::from_millis(1_795_000_000_999);
        assert_eq!(utc(later), "2026-11-18T11:06:40Z");
    }

    #[test]
    fn tables_align_and_bars_scale() {
        let rows = vec![
            vec!["a".to_string(), "long cell".to_string(), "x".to_string()],
            vec!["bbbb".to_string(), "c".to_string(), "".to_string()],
        ];
        assert_eq!(
            table(&["H1", "H2", "H3"], &rows),
            "H1    H2         H3\na     long cell  x\nbbbb  c\n"
        );
        assert_eq!(bar(10, 10, 4), "████");
        assert_eq!(bar(1, 100, 4), "█");
        assert_eq!(bar(0, 100, 4), "");
        assert_eq!(percent(1, 3), "33.3%");
        assert_eq!(percent(1, 0), "-");
        assert_eq!(
            [0, 999, 1_000, 12_345, 1_234_567].map(thousands),
            ["0", "999", "1,000", "12,345", "1,234,567"]
        );
        assert_eq!(printable("a\nb\u{1b}[2J"), "a\\nb\\u{1b}[2J");
        assert_eq!(
            printable("\r\u{7}\u{202e}\u{2028}\u{9b}\u{200b}ok"),
            "\\r\\u{7}\\u{202e}\\u{2028}\\u{9b}\\u{200b}ok"
        );
        assert_eq!(printable_lines("a\nb\u{1b}"), "a\nb\\u{1b}");
        let json = serde_json::to_string(&"x\u{202e}\u{9b}\u{e0041}y").unwrap();
        let safe = json_safe(&json);
        assert!(safe.is_ascii(), "{safe}");
        assert_eq!(
            serde_json::from_str::<String>(&safe).unwrap(),
            "x\u{202e}\u{9b}\u{e0041}y"
        );
    }
}
