//! The house's one wall, checked: below the adapter (`kube`) and the command line (`cli`,
//! `main.rs`), no module names kube, k8s-openapi, tokio or hyper, nor reaches up into the adapter
//! or the command line. The core then builds, runs and is tested without a cluster or a runtime.

use std::path::{Path, PathBuf};

/// What core code must not name.
const FORBIDDEN: &[&str] = &[
    "kube::",
    "kube_runtime",
    "kube_client",
    "k8s_openapi",
    "tokio",
    "hyper",
    "crate::kube",
    "crate::cli",
];

/// Directories and files above the wall.
const ADAPTER: &[&str] = &["kube", "cli", "main.rs"];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every line of code in `text` that names something forbidden, up to its tests (which may build
/// their inputs with the adapter's decoders): a test module, or a whole file of tests.
fn crossings(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .take_while(|(_, line)| !matches!(line.trim(), "#[cfg(test)]" | "#![cfg(test)]"))
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .filter(|(_, line)| FORBIDDEN.iter().any(|f| line.contains(f)))
        .map(|(i, line)| (i + 1, line.trim().to_owned()))
        .collect()
}

#[test]
fn the_core_names_nothing_of_the_adapter() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let core: Vec<&PathBuf> = files
        .iter()
        // This file names what is forbidden.
        .filter(|f| f.strip_prefix(root).ok() != Some(Path::new(file!())))
        .filter(|f| {
            let top = f
                .strip_prefix(&src)
                .ok()
                .and_then(|p| p.components().next());
            !top.is_some_and(|c| ADAPTER.contains(&c.as_os_str().to_string_lossy().as_ref()))
        })
        .collect();
    assert!(core.len() > 50, "found only {} core files", core.len());
    let mut found = Vec::new();
    for file in core {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for (line, code) in crossings(&text) {
            found.push(format!("{}:{line}: {code}", file.display()));
        }
    }
    assert!(
        found.is_empty(),
        "the core crosses the wall:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_crossing_is_seen() {
    let text = "use crate::model::Pod;\nuse tokio::sync::mpsc;\n// tokio in a comment\n#[cfg(test)]\nuse crate::kube::convert;\n";
    assert_eq!(crossings(text), [(2, "use tokio::sync::mpsc;".to_owned())]);
}
