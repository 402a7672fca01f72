//! `sliced tune`: the sweep over a small generated cluster's rolling update, its JSON, the
//! recommendation under each bound, and bad lists refused with status 2.

use std::process::{Command, Output};

use serde_json::Value;

fn sliced(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sliced"))
        .arg("tune")
        .args(["--pods", "2000", "--services", "20", "--steps", "3000"])
        .args(args)
        .output()
        .expect("run sliced")
}

fn json(args: &[&str]) -> Value {
    let out = sliced(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

#[test]
fn a_longer_batch_period_trades_writes_for_latency() {
    let out = json(&["--batch-period", "0s,2s", "-o", "json"]);
    let rows = out["settings"].as_array().expect("settings");
    assert_eq!(rows.len(), 2);
    let (now, batched) = (&rows[0], &rows[1]);
    assert_eq!(batched["batchPeriod"], "2s");
    assert!(f(&now["writes"]) > 0.0, "{now}");
    assert!(
        f(&batched["writes"]) * 2.0 < f(&now["writes"]),
        "batching halves the writes at least: {now} {batched}"
    );
    assert!(
        f(&batched["latencyMs"]["p50"]) > f(&now["latencyMs"]["p50"]),
        "{now} {batched}"
    );
    // A change waits for its batch: never more than the period beyond an unbatched sync, at
    // the median.
    assert!(f(&batched["latencyMs"]["p50"]) <= 2000.0 + f(&now["latencyMs"]["p99"]));
    assert!(f(&now["podChangesCarried"]) > 0.0);
    for row in rows {
        assert!(f(&row["peakWritesPerSecond"]) >= f(&row["meanWritesPerSecond"]));
        assert!(f(&row["latencyMs"]["max"]) >= f(&row["latencyMs"]["p99"]));
        assert!(f(&row["bytes"]) > f(&row["writes"]) * 100.0, "{row}");
    }
    // Without a bound, the fewest writes; with a tight latency bound, the unbatched setting.
    assert_eq!(out["recommended"], 1);
    let bounded = json(&[
        "--batch-period",
        "0s,2s",
        "-o",
        "json",
        "--p99-latency",
        "1s",
    ]);
    assert_eq!(bounded["recommended"], 0, "{bounded}");
}

#[test]
fn the_table_marks_the_recommendation() {
    let out = sliced(&["--batch-period", "0s,1s"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().next().is_some_and(|l| l.contains("p99")),
        "{text}"
    );
    assert!(text.contains("recommended (*): batch 1s"), "{text}");
    assert_eq!(
        text.lines().filter(|l| l.starts_with('*')).count(),
        1,
        "{text}"
    );
}

#[test]
fn bad_lists_exit_2_naming_the_flag() {
    for (flag, value) in [
        ("--batch-period", "soon"),
        ("--max-endpoints-per-slice", "0"),
        ("--workers", ""),
    ] {
        let out = sliced(&[flag, value]);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(flag),
            "{flag}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_plot_labels_every_setting_and_the_recommendation() {
    let dir = std::env::temp_dir().join(format!("sliced-tune-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let svg = dir.join("tune.svg");
    let out = sliced(&[
        "--batch-period",
        "0s,1s",
        "--plot",
        svg.to_str().expect("path"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).expect("the plot is written");
    assert!(text.starts_with("<svg"), "{text}");
    assert!(text.contains("batch 0s, 100/slice, 2 workers"), "{text}");
    assert!(
        text.contains("batch 1s, 100/slice, 2 workers (recommended)"),
        "{text}"
    );
    assert!(text.contains("p99 latency"), "{text}");
    let pdf = dir.join("tune.pdf");
    let out = sliced(&[
        "--batch-period",
        "0s",
        "--plot",
        pdf.to_str().expect("path"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(".svg or .png"));
}

/// A PNG is drawn with the embedded font: the labels are there on a machine without fonts, in
/// the recommended point's red as well as the others' blue.
#[test]
fn the_png_plot_draws_its_labels() {
    let dir = std::env::temp_dir().join(format!("sliced-tune-png-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let png = dir.join("tune.png");
    let out = sliced(&[
        "--batch-period",
        "0s,1s",
        "--plot",
        png.to_str().expect("path"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let image = image::open(&png).expect("a PNG").to_rgb8();
    assert_eq!(image.dimensions(), (900, 600));
    let count = |want: fn(&image::Rgb<u8>) -> bool| image.pixels().filter(|p| want(p)).count();
    let red = count(|p| p[0] > 200 && p[1] < 80 && p[2] < 80);
    let blue = count(|p| p[2] > 200 && p[0] < 80 && p[1] < 80);
    let dark = count(|p| p[0] < 80 && p[1] < 80 && p[2] < 80);
    // Two dots of 5 px radius are ~80 pixels each; labels, caption and axes add thousands.
    assert!(
        red > 300 && blue > 300,
        "red {red}, blue {blue}: labels drawn"
    );
    assert!(
        dark > 2000,
        "{dark} dark pixels: caption and axis text drawn"
    );
}

/// `auto`: on a rolling update over budget, fewer writes than no batch period, no change waits
/// longer than `--max-batch-period`, and an isolated change waits not at all (p50 0); under
/// budget (a readiness flap at 1,000 writes a second allowed) it is exactly the unbatched run.
#[test]
fn an_adaptive_batch_period_widens_only_over_budget_and_within_its_ceiling() {
    let over = json(&[
        "--batch-period",
        "0s,auto",
        "--max-write-qps",
        "20",
        "-o",
        "json",
    ]);
    let rows = over["settings"].as_array().expect("settings");
    let (now, auto) = (&rows[0], &rows[1]);
    assert_eq!(auto["batchPeriod"], "auto");
    assert!(
        f(&auto["writes"]) < 0.75 * f(&now["writes"]),
        "{now} {auto}"
    );
    assert!(f(&auto["latencyMs"]["max"]) <= 1000.0, "{auto}");
    assert!(
        f(&auto["latencyMs"]["p99"]) > 0.0,
        "some changes waited: {auto}"
    );
    assert_eq!(f(&auto["latencyMs"]["p50"]), 0.0, "{auto}");

    let calm = json(&[
        "--trace",
        "readiness-flap",
        "--batch-period",
        "0s,auto",
        "--max-write-qps",
        "1000",
        "-o",
        "json",
    ]);
    let rows = calm["settings"].as_array().expect("settings");
    for field in ["writes", "bytes", "syncs"] {
        assert_eq!(rows[0][field], rows[1][field], "{field}: {calm}");
    }
    assert_eq!(f(&rows[1]["latencyMs"]["max"]), 0.0);
}
