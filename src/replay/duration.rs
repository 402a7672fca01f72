//! Durations as Kubernetes flags and Go write them: `0s`, `250ms`, `1.5s`, `2m`, `1h30m`.

use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a duration (use a number with a unit, such as 250ms, 1.5s or 2m)")]
pub struct DurationError {
    pub input: String,
}

/// Parses a Go-style duration: one or more decimal numbers, each with a unit of ns, us (or µs),
/// ms, s, m or h. A bare number counts as seconds. Negative durations are refused.
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let err = || DurationError {
        input: input.to_owned(),
    };
    let text = input.trim();
    if text.is_empty() {
        return Err(err());
    }
    if let Ok(seconds) = text.parse::<f64>() {
        return seconds_to_duration(seconds).ok_or_else(err);
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
    seconds_to_duration(total).ok_or_else(err)
}

fn seconds_to_duration(seconds: f64) -> Option<Duration> {
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds))
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
        for bad in ["", "s", "5x", "-1s", "1.2.3s", "ms5"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
