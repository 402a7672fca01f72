//! Durations as Kubernetes flags and Go write them: `0s`, `250ms`, `1.5s`, `2m`, `1h30m`.

use std::time::Duration;

/// The longest duration any flag or trace may give: 100 years. Virtual time counts nanoseconds in
/// 64 bits (584 years), so sums of a few such durations still fit, and a replay never reaches a
/// time its clock cannot hold.
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("{input:?} is not a duration (use a number with a unit, such as 250ms, 1.5s or 2m)")]
    Malformed { input: String },
    #[error("{input:?} is too long a duration: at most 100 years (876000h)")]
    TooLong { input: String },
}

/// Parses a Go-style duration: one or more decimal numbers, each with a unit of ns, us (or µs),
/// ms, s, m or h. A bare number counts as seconds. Negative durations are refused.
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let err = || DurationError::Malformed {
        input: input.to_owned(),
    };
    let text = input.trim();
    if text.is_empty() {
        return Err(err());
    }
    if let Some(exact) = exact_seconds(text) {
        return match exact {
            d if d > MAX_DURATION => Err(DurationError::TooLong {
                input: input.to_owned(),
            }),
            d => Ok(d),
        };
    }
    if let Ok(seconds) = text.parse::<f64>() {
        return duration_from_seconds(seconds, input);
    }
    let mut total = 0f64;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(err)?;
        let (number, tail) = rest.split_at(number_len);
        let value: f64 = number.parse().map_err(|_| err())?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(err()),
        };
        total += value * scale;
        rest = tail;
    }
    duration_from_seconds(total, input)
}

/// `12.345678901s`: whole seconds and up to nine decimals, read to the nanosecond without a
/// floating-point step, so that a time [`format_duration`] wrote reads back equal. `None` for any
/// other form.
fn exact_seconds(text: &str) -> Option<Duration> {
    let number = text.strip_suffix('s')?;
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || whole.len() > 12 || fraction.len() > 9 || !digits(whole) {
        return None;
    }
    if !digits(fraction) || (number.contains('.') && fraction.is_empty()) {
        return None;
    }
    let seconds: u64 = whole.parse().ok()?;
    let nanos = format!("{fraction:0<9}").parse::<u32>().ok()?;
    Some(Duration::new(seconds, nanos))
}

/// A duration as seconds with as many decimals as it needs, at most nine (`0s`, `1.5s`,
/// `12.345678901s`): what `parse_duration` reads back exactly.
pub fn format_duration(d: Duration) -> String {
    let nanos = d.subsec_nanos();
    if nanos == 0 {
        return format!("{}s", d.as_secs());
    }
    let fraction = format!("{nanos:09}");
    format!("{}.{}s", d.as_secs(), fraction.trim_end_matches('0'))
}

/// A number of seconds as a duration, within [`MAX_DURATION`]; `input` names it in the error.
pub fn duration_from_seconds(seconds: f64, input: &str) -> Result<Duration, DurationError> {
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(DurationError::Malformed {
            input: input.to_owned(),
        });
    }
    if seconds > MAX_DURATION.as_secs_f64() {
        return Err(DurationError::TooLong {
            input: input.to_owned(),
        });
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// A duration as seconds, the unit of `at` in the replay output.
pub fn format_seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_style_durations() {
        let ms = Duration::from_millis;
        assert_eq!(parse_duration("0s"), Ok(ms(0)));
        assert_eq!(parse_duration("250ms"), Ok(ms(250)));
        assert_eq!(parse_duration("1.5s"), Ok(ms(1500)));
        assert_eq!(parse_duration("2m"), Ok(ms(120_000)));
        assert_eq!(parse_duration("1h30m"), Ok(ms(5_400_000)));
        assert_eq!(parse_duration("3"), Ok(ms(3000)));
        assert_eq!(parse_duration("100us"), Ok(Duration::from_micros(100)));
        for bad in ["", "s", "5x", "-1s", "1.2.3s", "ms5", "NaN", "inf"] {
            assert!(
                matches!(parse_duration(bad), Err(DurationError::Malformed { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn formatted_durations_read_back_exactly() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut cases = vec![
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_micros(12_345_678),
            Duration::new(86_400 * 3, 999_999_999),
        ];
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.push(Duration::from_nanos(x % (400 * 86_400 * 1_000_000_000)));
        }
        for d in cases {
            let text = format_duration(d);
            assert_eq!(parse_duration(&text), Ok(d), "{text}");
        }
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(parse_duration("0.1s"), Ok(Duration::from_millis(100)));
    }

    #[test]
    fn durations_beyond_a_hundred_years_are_refused_not_a_panic() {
        assert_eq!(parse_duration("876000h"), Ok(MAX_DURATION));
        for long in [
            "876000h1s",
            "1e12",
            "1e20",
            "99999999999999999999h",
            "300000000h",
        ] {
            assert!(
                matches!(parse_duration(long), Err(DurationError::TooLong { .. })),
                "{long}"
            );
        }
        let message = parse_duration("1e20").unwrap_err().to_string();
        assert!(message.contains("at most 100 years"), "{message}");
    }
}
