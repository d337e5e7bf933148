//! A fast reading of `ExtenderArgs` for the usual request: the top-level object scanned by
//! hand, node names taken as slices of the body (no allocation and no decoding per name), the
//! `Pod` and `Nodes` values read by serde_json where they stand (one pass over each, which also
//! says where it ends).
//!
//! It reads only what it can read exactly: a body with anything unusual (an escape in a key
//! or a node name, a key other than `Pod`, `Nodes` and `NodeNames`, a key twice, a value
//! serde_json refuses, bytes after the object) is not scanned at all (`None`), and the caller
//! reads it with serde_json, which also names the problem when there is one. On every body it
//! does scan, the names and values are the ones serde_json would read (JSON strings without
//! escapes are their bytes, which must be UTF-8 without control characters).

use serde::Deserialize;

/// What [`scan`] found: the `Pod` and `Nodes` values as read and the borrowed names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgsScan<'a, P, N> {
    /// The `Pod` value.
    pub pod: P,
    /// The `Nodes` value as `N` reads it (`null` included), `None` when the key is absent.
    pub nodes: Option<N>,
    /// `NodeNames` when it is not `null`.
    pub node_names: Option<Vec<&'a str>>,
    /// The `NodeNames` array exactly as sent when it is compact (nothing between the plain
    /// names but commas): the answer can copy it whole when every name passes.
    pub compact_names: Option<&'a str>,
}

/// Scans `body` as `{"Pod": ..., "Nodes": ..., "NodeNames": [...]}` (keys in any order,
/// `Nodes` and `NodeNames` optional), reading `Pod` as `P` and `Nodes` as `N`; `None` when
/// the body needs serde_json's reading.
pub fn scan<'a, P, N>(body: &'a [u8]) -> Option<ArgsScan<'a, P, N>>
where
    P: Deserialize<'a>,
    N: Deserialize<'a>,
{
    // JSON is UTF-8 (serde_json refuses anything else in a string): checked once here, so
    // that every name is a slice of it.
    let text = std::str::from_utf8(body).ok()?;
    let mut at = skip_ws(body, 0);
    expect(body, &mut at, b'{')?;
    let (mut pod, mut nodes, mut names) = (None, None, None);
    let mut compact_names = None;
    at = skip_ws(body, at);
    if body.get(at) == Some(&b'}') {
        return None;
    }
    loop {
        let key = plain_string(text, &mut at)?.as_bytes();
        at = skip_ws(body, at);
        expect(body, &mut at, b':')?;
        at = skip_ws(body, at);
        match key {
            b"Pod" if pod.is_none() => pod = Some(read_value(body, &mut at)?),
            b"Nodes" if nodes.is_none() => nodes = Some(read_value(body, &mut at)?),
            b"NodeNames" if names.is_none() => {
                if body[at..].starts_with(b"null") {
                    names = Some(None);
                    at += 4;
                } else {
                    let start = at;
                    let list = name_list(text, &mut at)?;
                    // `[`, `]`, two quotes and a comma per name, one comma fewer.
                    let compact_len = list.iter().map(|n| n.len() + 3).sum::<usize>()
                        + usize::from(list.is_empty())
                        + 1;
                    compact_names = text.get(start..at).filter(|a| a.len() == compact_len);
                    names = Some(Some(list));
                }
            }
            _ => return None,
        }
        at = skip_ws(body, at);
        match body.get(at)? {
            b',' => at = skip_ws(body, at + 1),
            b'}' => break,
            _ => return None,
        }
    }
    if skip_ws(body, at + 1) != body.len() {
        return None;
    }
    Some(ArgsScan {
        pod: pod?,
        nodes,
        node_names: names.flatten(),
        compact_names,
    })
}

/// The JSON value at `at`, read by serde_json as `T`; moves `at` past it. `None` when serde
/// refuses it.
fn read_value<'a, T: Deserialize<'a>>(body: &'a [u8], at: &mut usize) -> Option<T> {
    let mut values = serde_json::Deserializer::from_slice(body.get(*at..)?).into_iter::<T>();
    let value = values.next()?.ok()?;
    *at += values.byte_offset();
    Some(value)
}

fn skip_ws(body: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\r' | b'\t') = body.get(at) {
        at += 1;
    }
    at
}

fn expect(body: &[u8], at: &mut usize, byte: u8) -> Option<()> {
    (body.get(*at) == Some(&byte)).then(|| *at += 1)
}

/// A string without escapes at `at` (which must be its opening quote); moves `at` past the
/// closing quote. `None` for an escape or a control character.
fn plain_string<'a>(text: &'a str, at: &mut usize) -> Option<&'a str> {
    let body = text.as_bytes();
    expect(body, at, b'"')?;
    let start = *at;
    let end = first_special(body, start)?;
    // A backslash or a control character (JSON forbids them raw; serde_json refuses them).
    if body[end] != b'"' {
        return None;
    }
    *at = end + 1;
    // Both ends are ASCII quotes, so char boundaries of the (valid UTF-8) body.
    text.get(start..end)
}

/// Eight bytes, each `b`.
const fn splat(b: u8) -> u64 {
    0x0101_0101_0101_0101 * b as u64
}

const HIGH_BITS: u64 = splat(0x80);

/// The high bit of each byte of `word` that is zero, exact up to the first one (the classic
/// "has a zero byte" test: bytes after the first zero may be flagged falsely, so only the
/// lowest flag is read).
const fn zero_bytes(word: u64) -> u64 {
    word.wrapping_sub(splat(1)) & !word & HIGH_BITS
}

/// `text` needs no escape as a JSON string: no `"`, `\` or control character in it.
pub(super) fn is_plain(text: &str) -> bool {
    first_special(text.as_bytes(), 0).is_none()
}

/// Where, from `at` on, the first byte that ends or interrupts a plain string is: `"`, `\`
/// or a control character. Eight bytes at a time.
fn first_special(body: &[u8], mut at: usize) -> Option<usize> {
    while let Some(chunk) = body.get(at..at + 8) {
        let word = u64::from_le_bytes(chunk.try_into().ok()?);
        let found = zero_bytes(word ^ splat(b'"'))
            | zero_bytes(word ^ splat(b'\\'))
            // Bytes below 0x20: subtracting 0x20 borrows into the high bit (exact up to the
            // first such byte, as above; `!word` keeps bytes of 0x80 and more out).
            | (word.wrapping_sub(splat(0x20)) & !word & HIGH_BITS);
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    body[at..]
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .map(|i| at + i)
}

/// `[ "name", ... ]` at `at`, every name a plain string; moves `at` past the `]`.
fn name_list<'a>(text: &'a str, at: &mut usize) -> Option<Vec<&'a str>> {
    let body = text.as_bytes();
    expect(body, at, b'[')?;
    // About one name per 40 bytes of the rest of the body, never more than it can hold.
    let mut names = Vec::with_capacity((body.len() - *at) / 40);
    *at = skip_ws(body, *at);
    if body.get(*at) == Some(&b']') {
        *at += 1;
        return Some(names);
    }
    loop {
        names.push(plain_string(text, at)?);
        *at = skip_ws(body, *at);
        match body.get(*at)? {
            b',' => *at = skip_ws(body, *at + 1),
            b']' => {
                *at += 1;
                return Some(names);
            }
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::Deserialize;
    use serde_json::value::RawValue;

    /// What serde_json reads from a body, in the scan's terms.
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Reference<'a> {
        #[serde(rename = "Pod", borrow)]
        pod: &'a RawValue,
        #[serde(rename = "Nodes", borrow, default)]
        nodes: Option<&'a RawValue>,
        #[serde(rename = "NodeNames", default)]
        node_names: Option<Vec<String>>,
    }

    /// The scan with both values left raw, as the tests compare them.
    fn taken(body: &[u8]) -> Option<ArgsScan<'_, &RawValue, Option<&RawValue>>> {
        scan(body)
    }

    /// What the scan reads agrees with serde_json: same names, same `Pod` and `Nodes` values.
    fn agrees(body: &[u8]) -> Result<bool, TestCaseError> {
        let Some(scan) = taken(body) else {
            return Ok(false);
        };
        let reference: Reference = serde_json::from_slice(body)
            .map_err(|e| TestCaseError::fail(format!("scanned what serde refuses: {e}")))?;
        prop_assert_eq!(scan.pod.get(), reference.pod.get());
        prop_assert_eq!(
            scan.nodes.flatten().map(RawValue::get),
            reference.nodes.map(RawValue::get)
        );
        let names: Option<Vec<String>> = scan
            .node_names
            .map(|v| v.into_iter().map(str::to_string).collect());
        if let Some(array) = scan.compact_names {
            prop_assert_eq!(
                Some(array.to_string()),
                names
                    .as_ref()
                    .map(|n| serde_json::to_string(n).unwrap_or_default())
            );
        }
        prop_assert_eq!(names, reference.node_names);
        Ok(true)
    }

    #[test]
    fn reads_what_the_scheduler_sends() {
        let body = br#"{"Pod":{"metadata":{"name":"p","labels":{"a":"}{]["}}},"Nodes":null,"NodeNames":["n1", "n-2"]}"#;
        let scan = taken(body).expect("scanned");
        assert_eq!(
            scan.pod.get(),
            r#"{"metadata":{"name":"p","labels":{"a":"}{]["}}}"#
        );
        assert!(matches!(scan.nodes, Some(None)), "{:?}", scan.nodes);
        assert_eq!(scan.node_names, Some(vec!["n1", "n-2"]));
        // A space after a comma: not compact.
        assert_eq!(scan.compact_names, None);
        let nodes = br#" { "NodeNames" : null , "Nodes" : {"items":[{"metadata":{"name":"n\"1"}}]}, "Pod" : {} } "#;
        let scan = taken(nodes).expect("scanned");
        assert_eq!(scan.node_names, None);
        assert_eq!(
            scan.nodes.flatten().map(RawValue::get),
            Some(r#"{"items":[{"metadata":{"name":"n\"1"}}]}"#)
        );
        assert_eq!(scan.pod.get(), "{}");
        // Read as the server reads them: the value's own type, where it stands.
        let typed: ArgsScan<'_, serde_json::Value, Option<Vec<u8>>> =
            super::scan(br#"{"Nodes":[1,2],"Pod":{"a":[1]},"NodeNames":[]}"#).expect("scanned");
        assert_eq!(typed.pod, serde_json::json!({"a": [1]}));
        assert_eq!(typed.nodes, Some(Some(vec![1, 2])));
        assert_eq!(typed.node_names, Some(vec![]));
        assert_eq!(typed.compact_names, Some("[]"));
        let compact = taken(br#"{"Pod":{},"NodeNames":["a","bc"]}"#).expect("scanned");
        assert_eq!(compact.compact_names, Some(r#"["a","bc"]"#));
    }

    #[test]
    fn leaves_the_unusual_to_serde() {
        for body in [
            &br#"{"Pod":{},"NodeNames":["n\u0031"]}"#[..],
            br#"{"Pod":{},"NodeNames":["n1"],"Extra":1}"#,
            br#"{"Pod":{},"Pod":{}}"#,
            br#"{"Pod":{}} x"#,
            br#"{"NodeNames":["n1"]}"#,
            br#"{"Pod":{},"NodeNames":["a"b"]}"#,
            b"{\"Pod\":{},\"NodeNames\":[\"a\tb\"]}",
            b"{\"Pod\":{},\"NodeNames\":[\"\xff\"]}",
            br#"{"Pod":{},"NodeNames":["n1",]}"#,
            br#"{"Pod":{"a":"\"}"#,
            br#"{"Pod":{}"#,
            b"",
            b"{}",
        ] {
            assert!(
                taken(body).is_none(),
                "{:?}",
                String::from_utf8_lossy(body).to_string()
            );
        }
    }

    /// Node names as the generator makes them: mostly plain, sometimes with an escape, a
    /// control character, a quote or a non-ASCII letter.
    fn name() -> impl Strategy<Value = String> {
        prop_oneof![
            8 => "[a-z0-9-]{1,40}",
            1 => "[a-z]{0,5}(\\\\u0041|\\\\n|\\\\\"|\t|\"|é|\\\\)[a-z]{0,5}",
        ]
    }

    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("null".to_string()),
            Just("{}".to_string()),
            "[0-9]{1,3}",
            "\\{\"(a|b\\\\\"|\\}|\\[)\":(\\{\\}|\\[1,\\{\\}\\]|\"[\\]\\}]\"|null)\\}",
            "\\{\"a\":\\[\\{\"b\":\"\\]\\}\"\\}\\]",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// The word-at-a-time search finds what a byte-by-byte search finds, wherever the
        /// byte sits in its word, whatever the bytes around it (all 256 values drawn).
        #[test]
        fn word_search_finds_the_first_byte(
            bytes in proptest::collection::vec(
                prop_oneof![any::<u8>(), "[a-z]".prop_map(|s| s.as_bytes()[0])], 0..40),
            from in 0usize..40,
        ) {
            let from = from.min(bytes.len());
            let naive = |hit: fn(u8) -> bool| bytes[from..].iter().position(|&b| hit(b)).map(|i| from + i);
            prop_assert_eq!(
                first_special(&bytes, from),
                naive(|b| b == b'"' || b == b'\\' || b < 0x20)
            );
        }

        /// Whatever it scans, serde_json reads the same way; and it scans the usual bodies.
        #[test]
        fn never_reads_differently_from_serde(
            pod in value(),
            nodes in proptest::option::of(value()),
            names in proptest::option::of(proptest::collection::vec(name(), 0..6)),
            order in 0usize..6,
            ws in "[ \n]{0,2}",
            cut in proptest::option::of(0usize..200),
        ) {
            let mut fields = vec![format!("\"Pod\":{ws}{pod}")];
            if let Some(n) = &nodes {
                fields.push(format!("\"Nodes\":{n}"));
            }
            if let Some(list) = &names {
                let quoted: Vec<String> = list.iter().map(|n| format!("\"{n}\"")).collect();
                fields.push(format!("\"NodeNames\":{ws}[{}]", quoted.join(&format!(",{ws}"))));
            }
            let turn = order % fields.len();
            fields.rotate_left(turn);
            let mut body = format!("{{{}}}{ws}", fields.join(",")).into_bytes();
            if let Some(c) = cut {
                // Bytes, not characters: a cut may split one, as a broken body would.
                body.truncate(c.min(body.len()));
            }
            let scanned = agrees(&body)?;
            let plain = cut.is_none()
                && names.iter().flatten().all(|n| n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
            if plain && serde_json::from_slice::<Reference>(&body).is_ok() {
                prop_assert!(scanned, "a usual body is scanned: {}", String::from_utf8_lossy(&body));
            }
        }
    }

    /// The generator makes what the property needs: bodies the scan reads, bodies it leaves
    /// to serde that serde reads, and bodies nobody reads.
    #[test]
    fn the_generator_covers_every_outcome() {
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let (mut scanned, mut left_readable, mut unreadable, mut compact) = (0, 0, 0, 0);
        for _ in 0..500 {
            let names = proptest::collection::vec(name(), 0..6)
                .new_tree(&mut runner)
                .unwrap()
                .current();
            let pod = value().new_tree(&mut runner).unwrap().current();
            let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
            let body = format!("{{\"Pod\":{pod},\"NodeNames\":[{}]}}", quoted.join(","));
            match (
                taken(body.as_bytes()).is_some(),
                serde_json::from_str::<Reference>(&body).is_ok(),
            ) {
                (true, _) => {
                    scanned += 1;
                    compact += usize::from(
                        taken(body.as_bytes()).is_some_and(|s| s.compact_names.is_some()),
                    );
                }
                (false, true) => left_readable += 1,
                (false, false) => unreadable += 1,
            }
        }
        assert!(
            scanned > 100 && compact > 100 && left_readable > 10 && unreadable > 10,
            "{scanned} scanned ({compact} compact), {left_readable} left to serde, \
             {unreadable} unreadable"
        );
    }
}
