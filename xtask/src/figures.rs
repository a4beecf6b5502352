//! The README's figures, rendered by `cargo xtask generate` from the JSON files the measuring commands
//! wrote (`cargo xtask chaos` → `docs/reliability.json`, `cargo xtask fencing` → `docs/fencing.json`),
//! between markers, so that `generate --check` fails when a paragraph and its artifact disagree.

use std::path::Path;

use anyhow::Context;
use serde_json::Value;

/// One generated paragraph: its marker name, its source file under `docs/`, and its renderer.
struct Block {
    name: &'static str,
    source: &'static str,
    render: fn(&Value) -> anyhow::Result<String>,
}

const BLOCKS: [Block; 2] = [
    Block {
        name: "reliability",
        source: "reliability.json",
        render: reliability,
    },
    Block {
        name: "fencing",
        source: "fencing.json",
        render: fencing,
    },
];

fn begin(name: &str, source: &str) -> String {
    format!("<!-- figures:{name}:begin (cargo xtask generate, from docs/{source}) -->")
}

fn end(name: &str) -> String {
    format!("<!-- figures:{name}:end -->")
}

/// `current` with every figure block re-rendered from `docs`.
pub fn readme(current: &str, docs: &Path) -> anyhow::Result<String> {
    let mut out = current.to_owned();
    for b in BLOCKS {
        let path = docs.join(b.source);
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let json: Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let rendered =
            (b.render)(&json).with_context(|| format!("rendering figures from {}", path.display()))?;
        out = replace_block(&out, &begin(b.name, b.source), &end(b.name), &rendered)?;
    }
    Ok(out)
}

fn replace_block(text: &str, begin: &str, end: &str, body: &str) -> anyhow::Result<String> {
    let start = text
        .find(begin)
        .with_context(|| format!("README.md lacks the marker {begin}"))?;
    let stop = text
        .find(end)
        .with_context(|| format!("README.md lacks the marker {end}"))?;
    anyhow::ensure!(stop > start, "README.md has {end} before {begin}");
    Ok(format!("{}{begin}\n{body}{}", &text[..start], &text[stop..]))
}

/// A count as the README writes it: thousands separated by a space (`6 712`).
fn count(v: &Value) -> anyhow::Result<String> {
    let n = v.as_u64().with_context(|| format!("{v} is not a count"))?;
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    Ok(out)
}

fn at<'a>(v: &'a Value, pointer: &str) -> anyhow::Result<&'a Value> {
    v.pointer(pointer).with_context(|| format!("no {pointer}"))
}

fn n(v: &Value, pointer: &str) -> anyhow::Result<String> {
    count(at(v, pointer)?)
}

/// The answers to frozen leaders' late writes, as `1 × 403, 12 × 409`.
fn codes(v: &Value) -> String {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(code, k)| format!("{} × {code}", k.as_u64().unwrap_or(0)))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "none".to_owned())
}

fn reliability(j: &Value) -> anyhow::Result<String> {
    let mut s = format!(
        "From the last run there (verdict {}, {} min): {} faults, {} leadership changes, **{} violations in \
         {} controller writes** ({} with the fence off: {} violations; {} with it on: {} violations); {} late \
         writes, {} of them from frozen leaders, answered {}; {} refused by the fence with 403.",
        at(j, "/verdict")?.as_str().unwrap_or("?"),
        at(j, "/minutes")?.as_str().unwrap_or("?"),
        n(j, "/faults")?,
        n(j, "/leadership_changes")?,
        n(j, "/violations")?,
        n(j, "/writes_checked")?,
        n(j, "/fence_off/writes_checked")?,
        n(j, "/fence_off/violations")?,
        n(j, "/fence_on/writes_checked")?,
        n(j, "/fence_on/violations")?,
        n(j, "/late_writes")?,
        n(j, "/frozen_writes")?,
        codes(at(j, "/frozen_writes_by_code")?),
        n(j, "/fence_on/fence_refusals")?,
    );
    if let Some(go) = j.get("client_go").filter(|g| !g.is_null()) {
        s += &format!(
            " client-go's candidate led {} terms and sent {} writes; {} of them were late, {} refused, {} \
             violations.",
            n(go, "/terms")?,
            n(go, "/writes_checked")?,
            n(go, "/late_writes")?,
            n(go, "/late_writes_refused")?,
            n(go, "/violations")?,
        );
    }
    s += &format!(
        " {} of {} resources Ready, {} lost; {} audited requests, {} unparsable lines.\n",
        n(j, "/resources/ready")?,
        n(j, "/resources/expected")?,
        n(j, "/resources/lost")?,
        n(j, "/audit_log/requests")?,
        n(j, "/audit_log/unparsable_lines")?,
    );
    Ok(s)
}

fn fencing(j: &Value) -> anyhow::Result<String> {
    let a = at(j, "/tests/refuses_pods_that_do_not_hold_the_lease")?;
    let b = at(j, "/tests/refuses_writes_delayed_past_the_takeover")?;
    Ok(format!(
        "From the last run there: the replica without election sent {} writes and had {} admitted; the \
         frozen leader had {} writes admitted before the takeover, and of the {} it had in flight that \
         arrived after it, {} were admitted, {} refused by the fence (403) and {} by the stale \
         resourceVersion check before it (409); of the {} writes held past a takeover by a candidate that \
         writes nothing else, {} came back 403, {} were admitted, and {} of {} objects were unchanged.\n",
        n(a, "/rogue_writes")?,
        n(a, "/rogue_admitted")?,
        n(a, "/frozen_leader_admitted_before_takeover")?,
        n(a, "/frozen_leader_writes_after_takeover")?,
        n(a, "/frozen_leader_admitted_after_takeover")?,
        n(a, "/frozen_leader_refused_after_takeover")?,
        n(a, "/frozen_leader_conflict_after_takeover")?,
        n(b, "/late_writes")?,
        n(b, "/refused_403")?,
        n(b, "/admitted")?,
        n(b, "/objects_unchanged")?,
        n(b, "/held_creates")?,
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn counts_group_thousands_with_a_space() -> anyhow::Result<()> {
        assert_eq!(count(&json!(7))?, "7");
        assert_eq!(count(&json!(6712))?, "6 712");
        assert_eq!(count(&json!(46740))?, "46 740");
        assert_eq!(count(&json!(1234567))?, "1 234 567");
        assert!(count(&json!("x")).is_err());
        Ok(())
    }

    #[test]
    fn a_block_is_replaced_between_its_markers_only() -> anyhow::Result<()> {
        let text = "a\n<!-- b -->\nold\n<!-- e -->\nz\n";
        assert_eq!(
            replace_block(text, "<!-- b -->", "<!-- e -->", "new\n")?,
            "a\n<!-- b -->\nnew\n<!-- e -->\nz\n"
        );
        assert!(replace_block("no markers", "<!-- b -->", "<!-- e -->", "x").is_err());
        Ok(())
    }

    #[test]
    fn the_committed_artifacts_render() -> anyhow::Result<()> {
        let docs = testenv::harness::repo_root().join("docs");
        for b in BLOCKS {
            let json: Value = serde_json::from_str(&std::fs::read_to_string(docs.join(b.source))?)?;
            let text = (b.render)(&json)?;
            assert!(text.ends_with(".\n"), "{text}");
        }
        Ok(())
    }
}
