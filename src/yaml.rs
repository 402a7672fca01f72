//! How sliced reads YAML files (manifests, traces, cluster specs): a parser budget in proportion
//! to the input, and the parser's errors in plain words.

/// Parses one YAML document of `text` into `T`; the error is [`message`]'s.
pub(crate) fn from_str<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    let options = options(text);
    let budget = options.budget.clone().unwrap_or_default();
    serde_saphyr::from_str_with_options(text, options).map_err(|e| message(&e, &budget))
}

/// Parser options for `text`, shared by every YAML loader (manifests, traces, specs). The default
/// budget suits configuration files; a cluster dump or a long trace can be far larger. Without
/// aliases, every event and node takes at least one byte of input, so a budget in proportion to
/// the text refuses nothing real. Alias limits stay, and so does the depth limit (64), which keeps
/// deserialising within a thread's stack.
pub(crate) fn options(text: &str) -> serde_saphyr::Options {
    options_for(text.len())
}

/// [`options`] for a text of `len` bytes, for parts of it parsed alone (on other threads: the
/// options are not `Sync`, so each part makes its own).
pub(crate) fn options_for(len: usize) -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    let mut budget = serde_saphyr::Budget::default();
    let size = len.saturating_mul(2).saturating_add(1024);
    budget.max_events = budget.max_events.max(size);
    budget.max_nodes = budget.max_nodes.max(size);
    budget.max_documents = budget.max_documents.max(size);
    budget.max_total_scalar_bytes = budget.max_total_scalar_bytes.max(size);
    budget.max_reader_input_bytes = None;
    options.budget = Some(budget);
    options.with_snippet = false;
    options
}

/// The parser's message in plain words, with its line and column.
pub(crate) fn message(e: &serde_saphyr::Error, budget: &serde_saphyr::Budget) -> String {
    let e = e.without_snippet();
    // A breach met while expanding an alias comes wrapped with the alias's places.
    let mut root = e;
    while let serde_saphyr::Error::AliasError { error, .. } = root {
        root = error;
    }
    match root {
        // The parser prints a breach in Debug form ("budget breached: Depth { depth: 65 }").
        serde_saphyr::Error::Budget { breach, .. } => {
            let message = breach_message(breach, budget);
            match e.location() {
                Some(at) => format!("{message} at line {}, column {}", at.line(), at.column()),
                None => message,
            }
        }
        // The parser's advice names its own options, which mean nothing to our users.
        _ => e
            .to_string()
            .replace(", set DuplicateKeyPolicy in Options if acceptable", ""),
    }
}

/// A budget breach in plain words, with the limit `budget` set.
fn breach_message(
    breach: &serde_saphyr::budget::BudgetBreach,
    budget: &serde_saphyr::Budget,
) -> String {
    use serde_saphyr::budget::BudgetBreach as B;
    match breach {
        B::Depth { .. } => format!("nested deeper than {} levels", budget.max_depth),
        B::Events { .. } => format!("too large: more than {} YAML events", budget.max_events),
        B::Nodes { .. } => format!("too large: more than {} values", budget.max_nodes),
        B::Documents { .. } => format!("too many documents: more than {}", budget.max_documents),
        B::ScalarBytes { .. } => format!(
            "too much text in values: more than {} bytes",
            budget.max_total_scalar_bytes
        ),
        B::CommentBytes { .. } => format!(
            "too much text in comments: more than {} bytes",
            budget.max_total_comment_bytes
        ),
        B::InputBytes { input_bytes } => format!(
            "too large: more than {} bytes",
            budget.max_reader_input_bytes.unwrap_or(*input_bytes)
        ),
        B::Aliases { .. } => format!(
            "too many aliases (`*name`): more than {}",
            budget.max_aliases
        ),
        B::Anchors { .. } => format!(
            "too many anchors (`&name`): more than {}",
            budget.max_anchors
        ),
        B::AliasAnchorRatio { aliases, anchors } => format!(
            "too many aliases (`*name`): {aliases} of {anchors} {} (`&name`), \
             more than {} per anchor",
            if *anchors == 1 { "anchor" } else { "anchors" },
            budget.alias_anchor_ratio_multiplier
        ),
        B::RecordedAnchorEvents { .. } | B::RecordedAnchorBytes { .. } => {
            "aliases (`*name`) repeat too much of the file".to_owned()
        }
        B::MergeKeys { .. } => format!(
            "too many merge keys (`<<`): more than {}",
            budget.max_merge_keys
        ),
        B::SequenceUnbalanced => "a list or mapping ends that never began".to_owned(),
        // Includes and properties, which sliced does not enable.
        _ => "too large or too complex to read".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_breaches_in_plain_words() {
        use serde_saphyr::budget::BudgetBreach as B;
        let budget = serde_saphyr::Budget::default();
        let cases = [
            (B::Depth { depth: 65 }, "nested deeper than 64 levels"),
            (
                B::Events { events: 1 },
                "too large: more than 1000000 YAML events",
            ),
            (B::Nodes { nodes: 1 }, "too large: more than 250000 values"),
            (
                B::Documents { documents: 1 },
                "too many documents: more than 1024",
            ),
            (
                B::Aliases { aliases: 1 },
                "too many aliases (`*name`): more than 50000",
            ),
            (
                B::Anchors { anchors: 1 },
                "too many anchors (`&name`): more than 50000",
            ),
            (
                B::AliasAnchorRatio {
                    aliases: 300,
                    anchors: 2,
                },
                "too many aliases (`*name`): 300 of 2 anchors (`&name`), more than 10 per anchor",
            ),
            (
                B::MergeKeys { merge_keys: 1 },
                "too many merge keys (`<<`): more than 10000",
            ),
            (
                B::ScalarBytes {
                    total_scalar_bytes: 1,
                },
                "too much text in values: more than 67108864 bytes",
            ),
            (
                B::InputBytes { input_bytes: 1 },
                "too large: more than 268435456 bytes",
            ),
            (
                B::RecordedAnchorBytes {
                    recorded_anchor_bytes: 1,
                },
                "aliases (`*name`) repeat too much of the file",
            ),
            (
                B::SequenceUnbalanced,
                "a list or mapping ends that never began",
            ),
        ];
        for (breach, want) in cases {
            assert_eq!(breach_message(&breach, &budget), want);
        }
    }
}
