//! The trace file: one step per line, each a YAML sequence item whose body is a JSON flow mapping
//! (`- {"at":"1.5s","apply":{...}}`). The whole file is a YAML list of steps that `simulate
//! --events` reads as it is, a crash leaves every complete line readable, and the loader's fast
//! path reads each line with serde_json. Rotated by size, as `FILE.1` … `FILE.N`.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::duration::format_duration;

/// `--record-trace-max-size` and `--record-trace-max-files`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes a file may hold before the next step starts a new one.
    pub max_size: u64,
    /// Files kept: the current one and `max_files - 1` rotated ones.
    pub max_files: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_size: 1 << 30,
            max_files: 5,
        }
    }
}

/// A size as a Kubernetes quantity (`512Mi`, `1G`, `100k`) or plain bytes (`1048576`).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let scale: u64 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        _ => {
            return Err(format!(
                "{text:?} is not a size (such as 512Mi, 1Gi or 1000000)"
            ));
        }
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{text:?} is not a size (such as 512Mi, 1Gi or 1000000)"))
}

/// How often buffered steps reach the file: a crash loses at most this much.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

pub(super) struct TraceWriter {
    path: PathBuf,
    out: BufWriter<File>,
    limits: Limits,
    /// Bytes in the current file.
    written: u64,
    /// Steps in the current file after the state it starts with: a file is never rotated before
    /// it holds one, however large that state is.
    steps: u64,
    flushed: Instant,
}

impl TraceWriter {
    pub(super) fn create(path: &Path, limits: Limits) -> io::Result<TraceWriter> {
        Ok(TraceWriter {
            path: path.to_owned(),
            out: BufWriter::with_capacity(256 << 10, File::create(path)?),
            limits,
            written: 0,
            steps: 0,
            flushed: Instant::now(),
        })
    }

    /// Whether `line` would take the current file over its size.
    pub(super) fn full_for(&self, line: &[u8]) -> bool {
        self.steps > 0 && self.written + line.len() as u64 > self.limits.max_size
    }

    /// The current file becomes `FILE.1`, older ones move up one, the one beyond the limit goes,
    /// and a new, empty `FILE` starts.
    pub(super) fn rotate(&mut self) -> io::Result<()> {
        self.out.flush()?;
        let numbered = |n: usize| {
            let mut name = self.path.clone().into_os_string();
            name.push(format!(".{n}"));
            PathBuf::from(name)
        };
        let kept = self.limits.max_files.saturating_sub(1);
        if kept == 0 {
            std::fs::remove_file(&self.path)?;
        } else {
            match std::fs::remove_file(numbered(kept)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            for n in (1..kept).rev() {
                match std::fs::rename(numbered(n), numbered(n + 1)) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
            std::fs::rename(&self.path, numbered(1))?;
        }
        self.out = BufWriter::with_capacity(256 << 10, File::create(&self.path)?);
        self.written = 0;
        self.steps = 0;
        Ok(())
    }

    /// A line of the state a file starts with.
    pub(super) fn write_state(&mut self, line: &[u8]) -> io::Result<()> {
        self.out.write_all(line)?;
        self.written += line.len() as u64;
        Ok(())
    }

    pub(super) fn write_step(&mut self, line: &[u8]) -> io::Result<()> {
        self.write_state(line)?;
        self.steps += 1;
        Ok(())
    }

    pub(super) fn flush_if_due(&mut self) -> io::Result<()> {
        if self.flushed.elapsed() >= FLUSH_EVERY {
            self.flush()?;
        }
        Ok(())
    }

    pub(super) fn flush(&mut self) -> io::Result<()> {
        self.flushed = Instant::now();
        self.out.flush()
    }
}

/// `- {"at":"…","apply":` object `}` and a newline, into `line` (cleared first).
pub(super) fn apply_line(
    line: &mut Vec<u8>,
    at: Duration,
    object: &impl Serialize,
) -> serde_json::Result<()> {
    start_line(line, at, "apply");
    serde_json::to_writer(&mut *line, object)?;
    line.extend_from_slice(b"}\n");
    Ok(())
}

#[derive(Serialize)]
struct Target<'a> {
    kind: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    namespace: &'a str,
    name: &'a str,
}

/// `- {"at":"…","delete":{"kind":…,"namespace":…,"name":…}}` and a newline.
pub(super) fn delete_line(
    line: &mut Vec<u8>,
    at: Duration,
    kind: &str,
    namespace: &str,
    name: &str,
) -> serde_json::Result<()> {
    start_line(line, at, "delete");
    let target = Target {
        kind,
        namespace,
        name,
    };
    serde_json::to_writer(&mut *line, &target)?;
    line.extend_from_slice(b"}\n");
    Ok(())
}

fn start_line(line: &mut Vec<u8>, at: Duration, action: &str) {
    line.clear();
    line.extend_from_slice(b"- {\"at\":\"");
    line.extend_from_slice(format_duration(at).as_bytes());
    line.extend_from_slice(b"\",\"");
    line.extend_from_slice(action.as_bytes());
    line.extend_from_slice(b"\":");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_quantities_or_bytes() {
        assert_eq!(parse_size("512Mi"), Ok(512 << 20));
        assert_eq!(parse_size("1Gi"), Ok(1 << 30));
        assert_eq!(parse_size("100k"), Ok(100_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        for bad in [
            "",
            "0",
            "1.5Gi",
            "-1",
            "1Xi",
            "Mi",
            "99999999999999999999Ti",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn rotation_keeps_the_newest_files() {
        let dir = std::env::temp_dir().join(format!("sliced-rotate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("trace.yaml");
        let mut w = TraceWriter::create(
            &path,
            Limits {
                max_size: 10,
                max_files: 3,
            },
        )
        .unwrap();
        for i in 0..6 {
            let line = format!("- {{\"n\":{i}}}\n");
            if w.full_for(line.as_bytes()) {
                w.rotate().unwrap();
            }
            w.write_step(line.as_bytes()).unwrap();
        }
        w.flush().unwrap();
        let read = |p: &Path| std::fs::read_to_string(p).unwrap();
        assert_eq!(read(&path), "- {\"n\":5}\n");
        assert_eq!(read(&dir.join("trace.yaml.1")), "- {\"n\":4}\n");
        assert_eq!(read(&dir.join("trace.yaml.2")), "- {\"n\":3}\n");
        assert!(!dir.join("trace.yaml.3").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
