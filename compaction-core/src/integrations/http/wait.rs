//! The wait a 429 or 5xx answer asks for, read into a bounded `Duration` with checked
//! conversions only: `retry-after-ms` (OpenAI's, a number of milliseconds), else `Retry-After`
//! (RFC 9110 §10.2.3: a number of seconds, or an HTTP-date). A value no wait can be made of
//! (NaN, negative, infinite, past what a `Duration` holds) is [`UNWAITABLE`]: the retry loop
//! ends the call at once with its error, as for a wait over `max_backoff`, rather than panic
//! in the transport's thread (`Duration::from_secs_f64` panics on such values).

use hyper::header::HeaderMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The wait of a server that asked for one no clock can hold: longer than any `max_backoff`,
/// so the call ends at once with the server's error (checked by name too, for a `max_backoff`
/// of `Duration::MAX`).
pub(crate) const UNWAITABLE: Duration = Duration::MAX;

/// The wait a 429/5xx answer asks for, or `None` when it names none the backoff should yield
/// to (no header, or one that is neither a number nor an HTTP-date).
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    retry_after_at(headers, SystemTime::now())
}

/// [`retry_after`] with the clock given (an HTTP-date is a wait from `now`).
fn retry_after_at(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| Some(headers.get(name)?.to_str().ok()?.trim().to_owned());
    if let Some(ms) = text("retry-after-ms").and_then(|t| t.parse::<f64>().ok()) {
        // Milliseconds to seconds in f64 cannot overflow; the conversion below is checked.
        return Some(seconds(ms / 1000.0));
    }
    let value = text("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return Some(seconds(secs));
    }
    let at = http_date(&value)?;
    // A date already past asks for no wait.
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// A wait of `secs` seconds, checked: NaN, negative or too large for a `Duration` is
/// [`UNWAITABLE`].
fn seconds(secs: f64) -> Duration {
    if secs.is_nan() || secs < 0.0 {
        return UNWAITABLE;
    }
    Duration::try_from_secs_f64(secs).unwrap_or(UNWAITABLE)
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// An HTTP-date in any of the three forms RFC 9110 §5.6.7 says a recipient must read:
/// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`)
/// and asctime (`Sun Nov  6 08:49:37 1994`). The weekday is not checked (it adds nothing).
/// A date past what `SystemTime` holds is far enough ahead to be [`UNWAITABLE`] anyway: it
/// reads as the latest time representable, so its wait is refused, never wrapped.
fn http_date(text: &str) -> Option<SystemTime> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let (day, month, year, time) = match words.as_slice() {
        // IMF-fixdate.
        [_, day, month, year, time, "GMT"] => (*day, *month, year.parse::<i64>().ok()?, *time),
        // RFC 850: a two-digit year is the most recent one of that form (RFC 9110 §5.6.7
        // asks for a year more than 50 years ahead to be read as the past century's).
        [_, date, time, "GMT"] => {
            let mut parts = date.split('-');
            let (day, month, year) = (parts.next()?, parts.next()?, parts.next()?);
            if parts.next().is_some() || year.len() != 2 {
                return None;
            }
            let year = 2000 + year.parse::<i64>().ok()?;
            let current = 1970 + days_since_epoch(SystemTime::now()) / 365;
            let year = if year > current + 50 {
                year - 100
            } else {
                year
            };
            (day, month, year, *time)
        }
        // asctime.
        [_, month, day, time, year] => (*day, *month, year.parse::<i64>().ok()?, *time),
        _ => return None,
    };
    let day: i64 = day.parse().ok()?;
    let month = MONTHS.iter().position(|m| *m == month)? as i64 + 1;
    let mut clock = time.split(':').map(|p| p.parse::<i64>().ok());
    let (h, m, s) = (clock.next()??, clock.next()??, clock.next()??);
    if clock.next().is_some() || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    if !(0..=999_999).contains(&year) {
        return None;
    }
    let secs = days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + s;
    match u64::try_from(secs) {
        Ok(secs) => Some(
            UNIX_EPOCH
                .checked_add(Duration::from_secs(secs))
                .unwrap_or_else(far_future),
        ),
        // Before 1970: long past.
        Err(_) => Some(UNIX_EPOCH),
    }
}

/// The latest `SystemTime` this check needs: any wait to it is over every `max_backoff`.
fn far_future() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1 << 40)
}

/// Days from 1970-01-01 to `now` (0 for a clock set before it).
fn days_since_epoch(now: SystemTime) -> i64 {
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2)
}

/// Days from 1970-01-01 to the proleptic Gregorian date (Howard Hinnant's `days_from_civil`);
/// the year is at most six digits, so nothing overflows.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut out = HeaderMap::new();
        for (name, value) in pairs {
            out.insert(*name, value.parse().unwrap());
        }
        out
    }

    fn asked(pairs: &[(&'static str, &str)]) -> Option<Duration> {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37
        retry_after_at(&headers(pairs), now)
    }

    #[test]
    fn milliseconds_then_seconds_then_a_date() {
        assert_eq!(asked(&[]), None);
        assert_eq!(asked(&[("retry-after", "2")]), Some(Duration::from_secs(2)));
        assert_eq!(
            asked(&[("retry-after", " 1.5 ")]),
            Some(Duration::from_millis(1500))
        );
        let both = [("retry-after", "2"), ("retry-after-ms", "150")];
        assert_eq!(asked(&both), Some(Duration::from_millis(150)));
        // A date 23 seconds after `now`, in each of the three forms.
        for date in [
            "Sun, 06 Nov 1994 08:50:00 GMT",
            "Sunday, 06-Nov-94 08:50:00 GMT",
            "Sun Nov  6 08:50:00 1994",
        ] {
            let got = asked(&[("retry-after", date)]);
            assert_eq!(got, Some(Duration::from_secs(23)), "{date}");
        }
        // Past dates are no wait; text that is neither leaves the choice to the backoff.
        let past = [("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")];
        assert_eq!(retry_after(&headers(&past)), Some(Duration::ZERO));
        assert_eq!(
            asked(&[("retry-after", "Thu, 01 Jan 1970 00:00:00 GMT")]),
            Some(Duration::ZERO)
        );
        for junk in [
            "soon",
            "Sun, 06 Nov 1994 25:00:00 GMT",
            "Sun, 32 Nov 1994 08:00:00 GMT",
        ] {
            assert_eq!(asked(&[("retry-after", junk)]), None, "{junk}");
        }
        assert_eq!(asked(&[("retry-after-ms", "soon")]), None);
    }

    #[test]
    fn values_no_clock_holds_are_unwaitable_never_a_panic() {
        for value in ["1e300", "inf", "-inf", "NaN", "-5", "-0.001"] {
            let ms = asked(&[("retry-after-ms", value)]);
            assert_eq!(ms, Some(UNWAITABLE), "retry-after-ms: {value}");
        }
        for value in ["1e300", "-1", "NaN", "infinity", "1e20"] {
            let s = asked(&[("retry-after", value)]);
            assert_eq!(s, Some(UNWAITABLE), "retry-after: {value}");
        }
        // Huge but representable: a wait over every max_backoff, refused by the loop.
        for value in ["1e20", "1.8e19"] {
            let ms = asked(&[("retry-after-ms", value)]).unwrap();
            assert!(ms > Duration::from_secs(1 << 50), "retry-after-ms: {value}");
        }
        // The largest dates: far past any max_backoff, never wrapped to the past.
        let far = asked(&[("retry-after", "Fri, 31 Dec 999999 23:59:59 GMT")]).unwrap();
        assert!(far > Duration::from_secs(1 << 30), "{far:?}");
        assert_eq!(
            asked(&[("retry-after", "Fri, 31 Dec 1000000 23:59:59 GMT")]),
            None
        );
        assert_eq!(asked(&[("retry-after-ms", "-0")]), Some(Duration::ZERO));
    }
}
