//! The YAML item path (documents and List items cut by line, each parsed alone, in parallel)
//! against the whole-file value path: the same objects, warnings, objects as given and first
//! error. Where a cut could change what the text means, the item path declines and the file is
//! read whole; these tests also check which path ran, so that none passes by declining.

use serde_json::{Value, json};
use sliced::kube::manifest::{LoadError, Manifest, load_str, load_str_whole, load_yaml_by_items};

use super::upstream_items as items;

/// What the item path loads, or `None` where it declined.
fn by_items(text: &str) -> Option<Result<Manifest, LoadError>> {
    load_yaml_by_items("f.yaml", text).transpose()
}

/// The item path takes `text` and loads what the whole-file path loads; `load_str` does too.
fn assert_cut_alike(case: &str, text: &str) {
    let Some(cut) = by_items(text) else {
        panic!("{case}: the item path declined");
    };
    super::assert_alike(case, cut, load_str_whole("f.yaml", text));
    super::assert_alike(
        case,
        load_str("f.yaml", text),
        load_str_whole("f.yaml", text),
    );
}

/// The item path declines `text`, and `load_str` loads what the whole-file path loads.
fn assert_declined(case: &str, text: &str) {
    assert!(by_items(text).is_none(), "{case}: the item path took it");
    super::assert_alike(
        case,
        load_str("f.yaml", text),
        load_str_whole("f.yaml", text),
    );
}

fn namespace(name: &str) -> String {
    format!("- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: {name}\n")
}

#[test]
fn the_upstream_cluster_is_cut_into_its_items() {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items()});
    let yaml = serde_saphyr::to_string(&list).unwrap();
    assert!(yaml.contains("\nitems:\n- "), "kubectl's layout");
    assert_cut_alike("the cluster", &yaml);
    let loaded = by_items(&yaml).unwrap().unwrap();
    assert_eq!(loaded.objects.pods.len(), 1083);
    // The same items indented under `items:`, as some tools print them.
    let mut in_items = false;
    let indented: String = yaml
        .lines()
        .map(|line| {
            if in_items && !line.starts_with(['-', ' ']) {
                in_items = false;
            }
            let line = if in_items {
                format!("  {line}\n")
            } else {
                format!("{line}\n")
            };
            in_items |= line == "items:\n";
            line
        })
        .collect();
    assert!(indented.contains("\nitems:\n  - "));
    assert_cut_alike("the cluster, items indented", &indented);
    // Windows line ends.
    assert_cut_alike("the cluster, CRLF", &yaml.replace('\n', "\r\n"));
}

#[test]
fn streams_of_documents_and_lists_are_cut_alike() {
    let services: Vec<Value> = items()
        .into_iter()
        .filter(|i| i["kind"] == "Service")
        .collect();
    let service = serde_saphyr::to_string(&services[0]).unwrap();
    let text = format!(
        "# a dump\n---\napiVersion: v1\nitems:\n{}{}kind: List\nmetadata:\n  resourceVersion: \"\"\n\
         ---\n{service}...\n# between\n---\n# an empty document\n---\n\
         kind: List\napiVersion: v1\nitems:\n  # a comment in the items\n  {}\n  {}\n",
        namespace("a"),
        namespace("b"),
        namespace("c").replace('\n', "\n  ").trim_end(),
        namespace("d").replace('\n', "\n  ").trim_end(),
    );
    assert_cut_alike("a stream", &text);
    let loaded = by_items(&text).unwrap().unwrap();
    assert_eq!(loaded.objects.namespaces.len(), 4);
    assert_eq!(loaded.objects.services.len(), 1);
}

#[test]
fn lists_without_items_and_documents_that_are_not_lists_are_alike() {
    let cases = [
        ("items inline", "apiVersion: v1\nkind: List\nitems: []\n"),
        (
            "items null",
            "apiVersion: v1\nkind: List\nitems:\nmetadata: {}\n",
        ),
        (
            "items of another kind of object",
            "apiVersion: v1\nkind: Widget\nitems:\n- a\n- b\nmetadata:\n  name: w\n",
        ),
        (
            "a List without an apiVersion",
            "kind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n",
        ),
        (
            "a PodList lending its kind",
            "apiVersion: v1\nkind: NamespaceList\nitems:\n- metadata:\n    name: a\n- metadata:\n    name: b\n",
        ),
        (
            "an item that is not an object",
            "apiVersion: v1\nkind: List\nitems:\n- 3\n- apiVersion: v1\n  kind: Namespace\n",
        ),
        (
            "an empty item",
            "apiVersion: v1\nkind: List\nitems:\n-\n- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: a\n",
        ),
        (
            "a nested List",
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items:\n  - apiVersion: v1\n    kind: Namespace\n    metadata:\n      name: a\n",
        ),
    ];
    for (case, text) in cases {
        assert_cut_alike(case, text);
    }
}

#[test]
fn the_first_error_is_the_whole_files() {
    let bad_item = "- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: [x]\n";
    let broken_item = "- apiVersion: v1\n  kind: Namespace\n  metadata: {name: [\n";
    let head = "apiVersion: v1\nkind: List\nitems:\n";
    // An object that does not convert: named by document and item, as the whole path does.
    let text = format!("{head}{}{bad_item}", namespace("a"));
    assert_cut_alike("a bad item", &text);
    assert!(
        load_str("f.yaml", &text)
            .unwrap_err()
            .to_string()
            .contains("item 2")
    );
    // A later item that does not parse: the whole parse's syntax error comes first.
    let text = format!("{head}{bad_item}{}{broken_item}", namespace("a"));
    assert_declined("a syntax error after a bad item", &text);
    // A later document that does not parse.
    let text = format!("{head}{bad_item}---\nkind: [\n");
    assert_declined("a bad document after a bad item", &text);
}

#[test]
fn cuts_that_could_change_the_meaning_are_declined() {
    let head = "apiVersion: v1\nkind: List\nitems:\n";
    // A quoted value whose next line starts at column 0 with `- `: one value to the parser.
    let text =
        format!("{head}- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: \"a\n- b\"\n");
    assert_declined("a quoted value over a line that looks like an item", &text);
    // Anchors and aliases tie items together.
    let text = format!(
        "{head}- apiVersion: v1\n  kind: Namespace\n  metadata: &m\n    name: a\n- apiVersion: v1\n  kind: Namespace\n  metadata: *m\n"
    );
    assert_declined("an alias to another item", &text);
    // A directive applies to the whole document.
    let text = format!("%YAML 1.2\n---\n{head}{}", namespace("a"));
    assert_declined("a directive", &text);
    // Two `items` keys.
    let text = format!("{head}{}items:\n{}", namespace("a"), namespace("b"));
    assert_declined("two items keys", &text);
    // Items at two columns.
    let text = format!("{head}{}  {}", namespace("a"), namespace("b").trim_end());
    super::assert_alike(
        "items at two columns",
        load_str("f.yaml", &text),
        load_str_whole("f.yaml", &text),
    );
}

/// An item parsed alone sits at another depth than in its List: the parser's depth limit must
/// still refuse exactly what it refuses in the whole file.
#[test]
fn the_depth_limit_is_the_whole_files() {
    let mut refused = 0;
    for depth in 55..70 {
        let nested = "[".repeat(depth) + &"]".repeat(depth);
        let text = format!(
            "apiVersion: v1\nkind: List\nitems:\n{}  spec:\n    x: {nested}\n",
            namespace("a").trim_end().to_owned() + "\n"
        );
        let whole = load_str_whole("f.yaml", &text);
        refused += usize::from(whole.is_err());
        let cut = by_items(&text);
        if whole.is_ok() {
            assert!(cut.is_some(), "depth {depth}: the item path declined");
        }
        super::assert_alike(&format!("depth {depth}"), load_str("f.yaml", &text), whole);
    }
    assert!(
        refused > 0 && refused < 15,
        "the limit lies within the range"
    );
}

/// A file large enough that its mapped pages are let go behind the parsing (past 16 MB, and more
/// items than one parallel chunk) loads what its text loads.
#[test]
fn a_large_mapped_yaml_file_loads_as_its_text() {
    let text = serde_saphyr::to_string(&super::upstream_copies(20)).unwrap();
    let from_text = by_items(&text).expect("the item path takes it").unwrap();
    assert_eq!(from_text.objects.pods.len(), 20 * 1083);
    super::assert_file_loads_as_text(&text, "yaml", &from_text);
}
