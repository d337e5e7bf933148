//! kube-scheduler's extender wire format (`k8s.io/kube-scheduler/extender/v1`).
//!
//! The Go structs carry no JSON tags, so every key is the Go field name: PascalCase, with the
//! initialisms `PodUID`, `NumPDBViolations` and `UID` spelled out (serde's `PascalCase` would
//! write `PodUid`). The scheduler sends `null` for the unused one of `Nodes` / `NodeNames`, and
//! reads responses case-insensitively; we still answer in the exact Go spelling.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write;

use k8s_openapi::List;
use k8s_openapi::api::core::v1::{Node, Pod, PodSpec};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::cluster::meta_view::MetaView;
use crate::cluster::pod_view::PodSpecView;

/// The lowest score an extender may give a host.
pub const MIN_EXTENDER_PRIORITY: i64 = 0;
/// The highest score an extender may give a host (the scheduler multiplies by weight × 10).
pub const MAX_EXTENDER_PRIORITY: i64 = 10;

/// The body of `filter` and `prioritize` (`ExtenderArgs`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ExtenderArgs {
    /// The pod being scheduled.
    pub pod: Pod,
    /// Candidate nodes as full objects (`nodeCacheCapable: false`), else `null`.
    #[serde(default)]
    pub nodes: Option<List<Node>>,
    /// Candidate node names (`nodeCacheCapable: true`), else `null`.
    #[serde(default)]
    pub node_names: Option<Vec<String>>,
}

/// `ExtenderArgs` as the server reads it on the hot path: node names borrowed from the body
/// (no allocation per name) and the pod reduced to what placement reads ([`SchedulingPod`]);
/// every other field of the pod is skipped unparsed.
#[derive(Debug, Deserialize)]
pub struct ExtenderArgsRef<'a> {
    /// The pod being scheduled.
    #[serde(rename = "Pod")]
    pub pod: SchedulingPod,
    /// Candidate nodes as full objects (`nodeCacheCapable: false`), else `null`.
    #[serde(rename = "Nodes", default)]
    pub nodes: Option<List<Node>>,
    /// Candidate node names (`nodeCacheCapable: true`), else `null`.
    #[serde(rename = "NodeNames", default, borrow)]
    pub node_names: Option<Vec<NodeName<'a>>>,
}

/// An `ExtenderArgs` as the services take it, however it was read: the reduced pod, the node
/// objects or the names (borrowed from the body).
#[derive(Debug)]
pub struct CandidateRequest<'a> {
    /// The pod being scheduled.
    pub pod: RequestPod<'a>,
    /// Candidate nodes as full objects (`nodeCacheCapable: false`).
    pub nodes: Option<List<Node>>,
    /// Candidate node names (`nodeCacheCapable: true`).
    pub node_names: Option<&'a [&'a str]>,
    /// `NodeNames` exactly as sent when it was scanned compact ([`super::scan::ArgsScan`]).
    pub compact_names: Option<&'a str>,
}

/// A node name read from a request body: borrowed from it, owned only when the JSON string
/// has escapes. (serde's own `Cow<str>` always allocates when it sits inside a `Vec`.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeName<'a>(pub Cow<'a, str>);

impl AsRef<str> for NodeName<'_> {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for NodeName<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = NodeName<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a node name")
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                v: &'de str,
            ) -> Result<Self::Value, E> {
                Ok(NodeName(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(NodeName(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(NodeName(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

/// The parts of a Pod that placement reads: metadata, and from the spec the resources of
/// every container, overhead, pod-level resources, nodeSelector, tolerations and node
/// affinity. Everything else (volumes, env, probes, status, ...) is skipped.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SchedulingPod {
    /// `metadata`, without `managedFields`.
    #[serde(default)]
    pub metadata: MetaView,
    /// The placement-relevant part of `spec`.
    #[serde(default)]
    pub spec: Option<PodSpecView>,
}

impl SchedulingPod {
    /// The Pod with only the fields placement reads.
    pub fn into_pod(self) -> Pod {
        Pod {
            metadata: self.metadata.into(),
            spec: self.spec.map(PodSpec::from),
            status: None,
        }
    }
}

/// The pod of a request: its metadata, and its spec read or still as sent.
///
/// Read from JSON, `metadata` comes first (as the API server writes a Pod): when the pod
/// oracle of [`with_pod_oracle`] says the plan book answers this pod at this
/// `resourceVersion` from memory, the spec is only checked to be JSON and kept as sent;
/// otherwise it is read as [`SchedulingPod`] reads it, in the same single pass. Any other
/// field is skipped. A key twice is refused, as the derived readers refuse it.
#[derive(Debug)]
pub struct RequestPod<'a> {
    /// `metadata`, without `managedFields`.
    pub metadata: MetaView,
    spec: SpecText<'a>,
}

// One value on the stack for one request: boxing the read spec would cost an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum SpecText<'a> {
    Read(Option<PodSpecView>),
    AsSent(Option<&'a RawValue>),
}

impl<'a> RequestPod<'a> {
    /// A pod read whole.
    pub fn read(pod: SchedulingPod) -> Self {
        Self {
            metadata: pod.metadata,
            spec: SpecText::Read(pod.spec),
        }
    }

    /// `metadata.uid` and `metadata.resourceVersion`, when the pod has both.
    pub fn version(&self) -> Option<(&str, &str)> {
        let meta = &self.metadata;
        Some((meta.uid.as_deref()?, meta.resource_version.as_deref()?))
            .filter(|(uid, version)| !uid.is_empty() && !version.is_empty())
    }

    /// The Pod with only the fields placement reads (its spec read now if it was left as
    /// sent; the error names the field).
    pub fn into_pod(self) -> Result<Pod, String> {
        let spec = match self.spec {
            SpecText::Read(spec) => spec,
            SpecText::AsSent(None) => None,
            SpecText::AsSent(Some(raw)) => {
                let mut de = serde_json::Deserializer::from_str(raw.get());
                let spec = serde_path_to_error::deserialize::<_, PodSpecView>(&mut de).map_err(
                    |e| match e.path().to_string().as_str() {
                        "." => format!("cannot read ExtenderArgs: Pod.spec: {}", e.inner()),
                        path => format!("cannot read ExtenderArgs: Pod.spec.{path}: {}", e.inner()),
                    },
                )?;
                Some(spec)
            }
        };
        Ok(SchedulingPod {
            metadata: self.metadata,
            spec,
        }
        .into_pod())
    }
}

/// Says whether the plan book answers the pod `uid` at `resourceVersion` from memory.
pub type PodOracle = Box<dyn Fn(&str, &str) -> bool>;

thread_local! {
    /// The oracle the pods read on this thread consult, while [`with_pod_oracle`] runs.
    static POD_ORACLE: std::cell::RefCell<Option<PodOracle>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `read` (the reading of a request) with `oracle` deciding which pods' specs are left
/// unread ([`RequestPod`]); without it every spec is read.
pub fn with_pod_oracle<R>(oracle: PodOracle, read: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            POD_ORACLE.with(|o| o.borrow_mut().take());
        }
    }
    POD_ORACLE.with(|o| *o.borrow_mut() = Some(oracle));
    let _reset = Reset;
    read()
}

fn answered_from_memory(metadata: &MetaView) -> bool {
    let (Some(uid), Some(version)) = (
        metadata.uid.as_deref(),
        metadata.resource_version.as_deref(),
    ) else {
        return false;
    };
    !uid.is_empty()
        && !version.is_empty()
        && POD_ORACLE.with(|o| o.borrow().as_ref().is_some_and(|known| known(uid, version)))
}

impl<'de: 'a, 'a> Deserialize<'de> for RequestPod<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::{Error, IgnoredAny, MapAccess, Visitor};

        /// The keys [`RequestPod`] reads; anything else is skipped.
        enum Key {
            Metadata,
            Spec,
            Other,
        }
        impl<'de> Deserialize<'de> for Key {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct KeyVisitor;
                impl Visitor<'_> for KeyVisitor {
                    type Value = Key;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str("a field name")
                    }
                    fn visit_str<E: Error>(self, v: &str) -> Result<Key, E> {
                        Ok(match v {
                            "metadata" => Key::Metadata,
                            "spec" => Key::Spec,
                            _ => Key::Other,
                        })
                    }
                }
                d.deserialize_identifier(KeyVisitor)
            }
        }

        struct PodVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for PodVisitor<'a> {
            type Value = RequestPod<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("struct Pod")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut metadata: Option<MetaView> = None;
                let mut spec: Option<SpecText<'a>> = None;
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Metadata if metadata.is_some() => {
                            return Err(M::Error::duplicate_field("metadata"));
                        }
                        Key::Metadata => metadata = Some(map.next_value()?),
                        Key::Spec if spec.is_some() => {
                            return Err(M::Error::duplicate_field("spec"));
                        }
                        Key::Spec => {
                            let unread = metadata.as_ref().is_some_and(answered_from_memory);
                            spec = Some(if unread {
                                SpecText::AsSent(map.next_value::<Option<&'de RawValue>>()?)
                            } else {
                                SpecText::Read(map.next_value::<Option<PodSpecView>>()?)
                            });
                        }
                        Key::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(RequestPod {
                    metadata: metadata.unwrap_or_default(),
                    spec: spec.unwrap_or(SpecText::Read(None)),
                })
            }
        }

        deserializer.deserialize_struct(
            "Pod",
            &["metadata", "spec"],
            PodVisitor(std::marker::PhantomData),
        )
    }
}

/// The answer to `filter` (`ExtenderFilterResult`).
///
/// Exactly one of `nodes` / `node_names` is set, in the mode the request came in: the
/// scheduler treats "both null" as "no node passes".
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "PascalCase")]
pub struct ExtenderFilterResult {
    /// Passing nodes as full objects (non-cache mode), echoed unchanged.
    pub nodes: Option<List<Node>>,
    /// Passing node names (cache mode).
    pub node_names: Option<Vec<String>>,
    /// Rejected nodes that preemption might free: node name → reason.
    pub failed_nodes: BTreeMap<String, String>,
    /// Rejected nodes that preemption cannot help: node name → reason.
    pub failed_and_unresolvable_nodes: BTreeMap<String, String>,
    /// A non-empty string fails the scheduling attempt. The scheduler passes it to
    /// `fmt.Errorf` as a format string, so it must never contain `%`.
    pub error: String,
}

/// A candidate `filter` turned down, as its answer lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnedDown<'a> {
    pub name: &'a str,
    pub reason: &'a str,
    /// Listed under `FailedAndUnresolvableNodes` (preemption cannot help), else `FailedNodes`.
    pub unresolvable: bool,
}

/// Writes `{"Nodes":null,"NodeNames":[...],...}`, the JSON of an [`ExtenderFilterResult`]
/// in node-cache mode whose names are `names[i]` for each `i` of `pass`, straight from the
/// request's own names (no `String` per name); `compact_names` is the request's array as
/// sent when the scan read it compact (every name plain). `turned_down` fills the two maps
/// in its order, without a map or a `String` per entry: byte for byte what serde_json writes
/// for the owned result when they come in name order, each name once (JSON gives an object's
/// members no order, and kube-scheduler reads them into a map, the last of a name kept, as
/// the owned result keeps it).
pub fn write_filter_names(
    out: &mut Vec<u8>,
    names: &[&str],
    pass: &[usize],
    compact_names: Option<&str>,
    turned_down: &[TurnedDown<'_>],
) {
    let all_pass = pass.len() == names.len() && pass.iter().enumerate().all(|(k, &i)| k == i);
    let names_len = match compact_names {
        Some(array) if all_pass => array.len(),
        // Brackets, and quotes and a comma per name but the last.
        _ => 2 + pass.iter().map(|&i| names[i].len() + 3).sum::<usize>() - pass.len().min(1),
    };
    // Once, the whole answer when nothing needs an escape: growing it as it is written
    // would copy it over again at every doubling.
    out.reserve_exact(FILTER_FRAME_BYTES + names_len + maps_len(turned_down));
    out.extend_from_slice(br#"{"Nodes":null,"NodeNames":"#);
    match compact_names {
        // The array as it came: what writing each name would give, byte for byte.
        Some(array) if all_pass => out.extend_from_slice(array.as_bytes()),
        _ => {
            out.push(b'[');
            for (k, &i) in pass.iter().enumerate() {
                if k > 0 {
                    out.push(b',');
                }
                if compact_names.is_some() {
                    // Scanned names are plain.
                    out.push(b'"');
                    out.extend_from_slice(names[i].as_bytes());
                    out.push(b'"');
                } else {
                    write_str(out, names[i]);
                }
            }
            out.push(b']');
        }
    }
    out.extend_from_slice(br#","FailedNodes":"#);
    write_turned_down(out, turned_down, false);
    out.extend_from_slice(br#","FailedAndUnresolvableNodes":"#);
    write_turned_down(out, turned_down, true);
    out.extend_from_slice(br#","Error":""}"#);
}

/// Writes the `HostPriority` array of `scores` (host, score), as serde_json writes it.
pub fn write_priorities<'a>(out: &mut Vec<u8>, scores: impl Iterator<Item = (&'a str, i64)>) {
    out.push(b'[');
    for (i, (host, score)) in scores.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(br#"{"Host":"#);
        write_str(out, host);
        out.extend_from_slice(br#","Score":"#);
        // Writing to a Vec cannot fail.
        let _ = write!(out, "{score}");
        out.push(b'}');
    }
    out.push(b']');
}

/// A JSON string: the bytes as they are when nothing needs an escape (the usual node name),
/// else serde_json's escaping.
fn write_str(out: &mut Vec<u8>, text: &str) {
    if super::scan::is_plain(text) {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else {
        // Writing to a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, text);
    }
}

/// The bytes of `write_filter_names`'s answer around its names and maps.
const FILTER_FRAME_BYTES: usize =
    br#"{"Nodes":null,"NodeNames":,"FailedNodes":,"FailedAndUnresolvableNodes":,"Error":""}"#.len();

/// The bytes `write_turned_down` writes for both maps when nothing needs an escape.
fn maps_len(turned_down: &[TurnedDown<'_>]) -> usize {
    // Braces, and per entry four quotes, a colon and a comma but for each map's last.
    let unresolvable = turned_down.iter().filter(|t| t.unresolvable).count();
    let resolvable = turned_down.len() - unresolvable;
    4 + (turned_down.iter())
        .map(|t| t.name.len() + t.reason.len() + 6)
        .sum::<usize>()
        - resolvable.min(1)
        - unresolvable.min(1)
}

/// Writes the map of the entries of `turned_down` that are `unresolvable` (or not). A reason
/// shared by many entries (one rejection for every node a hold keeps out) is escaped once
/// and copied after that.
fn write_turned_down(out: &mut Vec<u8>, turned_down: &[TurnedDown<'_>], unresolvable: bool) {
    out.push(b'{');
    let mut last: Option<(*const u8, usize, std::ops::Range<usize>)> = None;
    let entries = turned_down
        .iter()
        .filter(|t| t.unresolvable == unresolvable);
    for (i, entry) in entries.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, entry.name);
        out.push(b':');
        let reason = (entry.reason.as_ptr(), entry.reason.len());
        match &last {
            Some((ptr, len, written)) if (*ptr, *len) == reason => {
                out.extend_from_within(written.clone());
            }
            _ => {
                let start = out.len();
                write_str(out, entry.reason);
                last = Some((reason.0, reason.1, start..out.len()));
            }
        }
    }
    out.push(b'}');
}

/// One host's score in the answer to `prioritize` (the answer is a bare JSON array of these).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase")]
pub struct HostPriority {
    /// The node name.
    pub host: String,
    /// 0..=10.
    pub score: i64,
}

/// The body of `bind` (`ExtenderBindingArgs`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
pub struct ExtenderBindingArgs {
    /// The pod's name.
    #[serde(rename = "PodName")]
    pub pod_name: String,
    /// The pod's namespace.
    #[serde(rename = "PodNamespace")]
    pub pod_namespace: String,
    /// The pod's UID.
    #[serde(rename = "PodUID")]
    pub pod_uid: String,
    /// The node the scheduler chose.
    #[serde(rename = "Node")]
    pub node: String,
}

/// The answer to `bind` (`ExtenderBindingResult`); an empty `Error` means bound.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase")]
pub struct ExtenderBindingResult {
    /// Why binding failed (never containing `%`), or empty.
    pub error: String,
}

/// Makes a message safe for the scheduler's `fmt.Errorf(result.Error)`: `%` becomes
/// `percent`, so Go never reads it as a verb.
pub fn go_format_safe(message: &str) -> String {
    message.replace('%', " percent")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_args_use_go_spellings() {
        let text = r#"{"PodName":"p","PodNamespace":"ns","PodUID":"u-1","Node":"n1"}"#;
        let args: ExtenderBindingArgs = serde_json::from_str(text).unwrap();
        assert_eq!(args.pod_uid, "u-1");
        assert_eq!(serde_json::to_string(&args).unwrap(), text);
    }

    #[test]
    fn filter_result_keys_are_pascal_case_with_nulls() {
        let r = ExtenderFilterResult {
            node_names: Some(vec!["a".into()]),
            ..Default::default()
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"Nodes": null, "NodeNames": ["a"], "FailedNodes": {},
                "FailedAndUnresolvableNodes": {}, "Error": ""})
        );
    }

    #[test]
    fn args_accept_null_nodes_and_missing_type_meta() {
        let text = r#"{"Pod":{"metadata":{"name":"p","uid":"u"},"spec":{"containers":[]}},
                       "Nodes":null,"NodeNames":["n1","n2"]}"#;
        let args: ExtenderArgs = serde_json::from_str(text).unwrap();
        assert_eq!(args.node_names.unwrap().len(), 2);
        assert!(args.nodes.is_none());
        let text = r#"{"Pod":{"metadata":{"name":"p"}},"NodeNames":null,
                       "Nodes":{"metadata":{},"items":[{"metadata":{"name":"n1"}}]}}"#;
        let args: ExtenderArgs = serde_json::from_str(text).unwrap();
        assert_eq!(args.nodes.unwrap().items.len(), 1);
    }

    #[test]
    fn node_names_are_borrowed_unless_escaped() {
        let text = r#"{"Pod":{},"NodeNames":["n1","n\u0032"]}"#;
        let args: ExtenderArgsRef = serde_json::from_str(text).unwrap();
        let names = args.node_names.unwrap();
        assert!(matches!(names[0].0, Cow::Borrowed("n1")), "{:?}", names[0]);
        assert!(
            matches!(&names[1].0, Cow::Owned(s) if s == "n2"),
            "{:?}",
            names[1]
        );
        let wrong: Result<ExtenderArgsRef, _> =
            serde_json::from_str(r#"{"Pod":{},"NodeNames":[5]}"#);
        assert!(
            wrong
                .unwrap_err()
                .to_string()
                .contains("expected a node name")
        );
    }

    proptest::proptest! {
        /// The hand-written answers are the serde_json ones, byte for byte, whatever the
        /// names, reasons and errors hold.
        #[test]
        fn written_answers_are_serde_json_answers(
            names in proptest::collection::vec("([a-z0-9.-]{1,12}|.{0,6})", 0..5),
            failed in proptest::collection::btree_map(".{0,6}", ".{0,8}", 0..3),
            unresolvable in proptest::collection::btree_map("[a-z]{1,4}", ".{0,8}", 0..3),
            score in -20i64..20,
            skip in 0usize..2,
        ) {
            let result = ExtenderFilterResult {
                nodes: None,
                node_names: Some(names.clone()),
                failed_nodes: failed,
                failed_and_unresolvable_nodes: unresolvable,
                // An error is answered whole by serde_json, never by the writer.
                error: String::new(),
            };
            let borrowed: Vec<&str> = names.iter().map(String::as_str).collect();
            let all: Vec<usize> = (0..names.len()).collect();
            let expected = serde_json::to_string(&result).unwrap();
            let down = turned_down_of(&result);
            let mut out = Vec::new();
            write_filter_names(&mut out, &borrowed, &all, None, &down);
            proptest::prop_assert_eq!(String::from_utf8(out).unwrap(), expected.as_str());
            // As the scan hands them: the compact array when every name is plain, copied
            // whole when all pass and written name by name when some do not.
            let plain = names.iter().all(|n| super::super::scan::is_plain(n));
            let sent = serde_json::to_string(&names).unwrap();
            if plain {
                let mut out = Vec::new();
                write_filter_names(&mut out, &borrowed, &all, Some(&sent), &down);
                proptest::prop_assert_eq!(String::from_utf8(out).unwrap(), expected.as_str());
                let some: Vec<usize> = all.iter().copied().filter(|i| (i + skip) % 2 == 0).collect();
                let partial = ExtenderFilterResult {
                    node_names: Some(some.iter().map(|&i| names[i].clone()).collect()),
                    ..result.clone()
                };
                let mut out = Vec::new();
                write_filter_names(&mut out, &borrowed, &some, Some(&sent), &down);
                proptest::prop_assert_eq!(
                    String::from_utf8(out).unwrap(),
                    serde_json::to_string(&partial).unwrap()
                );
            }
            let scores: Vec<HostPriority> = names
                .iter()
                .map(|n| HostPriority { host: n.clone(), score })
                .collect();
            let mut out = Vec::new();
            write_priorities(&mut out, names.iter().map(|n| (n.as_str(), score)));
            proptest::prop_assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(&scores).unwrap()
            );
        }
    }

    /// The entries of `result`'s maps as the writer takes them, each map in name order.
    fn turned_down_of(result: &ExtenderFilterResult) -> Vec<TurnedDown<'_>> {
        fn entries(map: &BTreeMap<String, String>, unresolvable: bool) -> Vec<TurnedDown<'_>> {
            (map.iter())
                .map(|(name, reason)| TurnedDown {
                    name,
                    reason,
                    unresolvable,
                })
                .collect()
        }
        let mut all = entries(&result.failed_nodes, false);
        all.extend(entries(&result.failed_and_unresolvable_nodes, true));
        all
    }

    #[test]
    fn a_reason_shared_by_many_nodes_is_written_in_full_for_each() {
        // One rejection for every node a hold keeps out: the same text, escaped once and
        // copied, interleaved with another and with unresolvable entries.
        let held: &str = "held by 1 plan (Job \"default/a\") for pods not bound yet";
        let other: &str = "no room";
        let names = ["n1", "n2", "n3", "n4", "n5"];
        let down = [
            (0, held, false),
            (1, held, false),
            (2, other, true),
            (3, held, false),
            (4, other, false),
        ]
        .map(|(i, reason, unresolvable)| TurnedDown {
            name: names[i],
            reason,
            unresolvable,
        });
        let mut out = Vec::new();
        write_filter_names(&mut out, &names, &[], None, &down);
        let parsed: ExtenderFilterResult = serde_json::from_slice(&out).unwrap();
        let owned = |entries: &[(usize, &str)]| -> BTreeMap<String, String> {
            (entries.iter())
                .map(|&(i, r)| (names[i].to_string(), r.to_string()))
                .collect()
        };
        assert_eq!(
            parsed,
            ExtenderFilterResult {
                node_names: Some(Vec::new()),
                failed_nodes: owned(&[(0, held), (1, held), (3, held), (4, other)]),
                failed_and_unresolvable_nodes: owned(&[(2, other)]),
                ..Default::default()
            }
        );
        // In name order, byte for byte serde_json's.
        assert_eq!(
            String::from_utf8(out).unwrap(),
            serde_json::to_string(&parsed).unwrap()
        );
    }

    #[test]
    fn a_plain_filter_answer_is_written_in_the_room_reserved_for_it() {
        let names = ["host-a", "host-b", "host-c"];
        let sent = serde_json::to_string(&names).unwrap();
        let down = [
            TurnedDown {
                name: "host-b",
                reason: "held by a plan",
                unresolvable: false,
            },
            TurnedDown {
                name: "host-c",
                reason: "tainted",
                unresolvable: true,
            },
        ];
        for (pass, compact) in [(&[0][..], None), (&[0], Some(sent.as_str()))] {
            for down in [&down[..], &down[..1], &down[1..], &[]] {
                let mut out = Vec::new();
                write_filter_names(&mut out, &names, pass, compact, down);
                assert_eq!(
                    out.capacity(),
                    out.len(),
                    "{}",
                    String::from_utf8_lossy(&out)
                );
            }
        }
        let mut out = Vec::new();
        write_filter_names(&mut out, &names, &[0, 1, 2], Some(&sent), &[]);
        assert_eq!(
            out.capacity(),
            out.len(),
            "{}",
            String::from_utf8_lossy(&out)
        );
    }

    #[test]
    fn names_that_need_escapes_are_escaped() {
        let mut out = Vec::new();
        let names = ["a\"b", "c\\", "d\n", "é"];
        write_filter_names(&mut out, &names, &[0, 1, 2, 3], None, &[]);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(r#"["a\"b","c\\","d\n","é"]"#), "{text}");
    }

    #[test]
    fn percent_never_reaches_go_format() {
        assert!(!go_format_safe("100% full").contains('%'));
    }
}
