//! Loading a [`Cluster`] from manifest files: `kube-tas simulate PATH...` and
//! `serve --cluster PATH...`.
//!
//! A path is a file or a folder; a folder contributes every `*.yaml`, `*.yml` and `*.json`
//! below it, recursively, sorted by path (names starting with `.` are skipped, like the
//! `..data` links of a mounted ConfigMap). A file is a stream of documents: YAML separated by
//! `---`, or concatenated JSON values for `*.json`. A `List` (or `NodeList`, `PodList`, ...)
//! is expanded into its items. Each document becomes a `serde_json::Value`, is dispatched on
//! `apiVersion`/`kind`, then decoded through `serde_path_to_error` so a bad field is named.
//!
//! Every failure names the file, the document (1-based, counting empty ones), the object and
//! the field; YAML syntax errors name the line. Unsupported kinds are skipped with a warning.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::kueue::{self, ClusterQueue, LocalQueue, ResourceFlavor, Topology};
use super::pod_requests::parse_non_negative;
use super::quantity::{parse_quantity, resource_amount};
use super::scheduling_groups;
use super::sets;
use super::workloads::{self, Seen};
use super::{Cluster, FieldError, Source};
use crate::topology::{NodeInfo, ResourceList};

/// Why a cluster could not be loaded. Every message names the file; object errors also name
/// the document, the object and the field.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A path could not be read (missing, unreadable, not UTF-8, ...).
    #[error("{}: cannot read: {source}", .path.display())]
    Read {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not valid YAML (or JSON, for `*.json`).
    #[error("{}{}: invalid {format}: {message}", .path.display(), position(.line, .column))]
    Syntax {
        /// The file.
        path: PathBuf,
        /// `"YAML"` or `"JSON"`.
        format: &'static str,
        /// 1-based line of the problem, when known.
        line: Option<u64>,
        /// 1-based column of the problem, when known.
        column: Option<u64>,
        /// The parser's message.
        message: String,
    },
    /// One object is malformed.
    #[error("{at}{}: {}", object_label(.object), field_message(.field, .message))]
    Object {
        /// Where the object is.
        at: Source,
        /// `Kind namespace/name`, `Kind name` or `Kind`; `None` when not even the kind is known.
        object: Option<String>,
        /// The field path inside the object (`status.allocatable.cpu`); empty for the whole.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// Two objects of one kind share a namespace and name.
    #[error("duplicate {object}: {second} repeats {first}")]
    Duplicate {
        /// `Kind namespace/name` or `Kind name`.
        object: String,
        /// Where it was first defined.
        first: Source,
        /// Where it was defined again.
        second: Source,
    },
    /// The paths hold no object kube-tas reads (a 0-byte file, a folder without manifests,
    /// documents of other kinds only).
    #[error(
        "nothing to load: {paths} hold no object kube-tas reads (Nodes, Pods, Jobs, JobSets, \
         LeaderWorkerSets, Topologies, ResourceFlavors, ClusterQueues, LocalQueues, \
         PodGroups, CompositePodGroups)"
    )]
    Empty {
        /// The paths given, comma-separated.
        paths: String,
    },
}

fn position(line: &Option<u64>, column: &Option<u64>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(":{l}:{c}"),
        (Some(l), None) => format!(":{l}"),
        _ => String::new(),
    }
}

fn object_label(object: &Option<String>) -> String {
    object.as_ref().map_or(String::new(), |o| format!(" ({o})"))
}

fn field_message(field: &str, message: &str) -> String {
    if field.is_empty() {
        message.to_string()
    } else {
        format!("{field}: {message}")
    }
}

impl LoadError {
    fn object(at: &Source, object: Option<&str>, e: FieldError) -> Self {
        LoadError::Object {
            at: at.clone(),
            object: object.map(str::to_string),
            field: e.field,
            message: e.message,
        }
    }
}

/// Loads every manifest under `paths` (files or folders) into one [`Cluster`].
///
/// Objects keep file order: paths in the order given, files of a folder sorted by path,
/// documents in stream order. See the module documentation for the accepted shapes.
pub fn load_paths(paths: &[impl AsRef<Path>]) -> Result<Cluster, LoadError> {
    let mut loader = Loader::default();
    for path in paths {
        let path = path.as_ref();
        let mut files = Vec::new();
        collect_files(path, &mut files, &mut BTreeSet::new())?;
        if files.is_empty() {
            loader.warn(format!(
                "{}: no *.yaml, *.yml or *.json files in this folder",
                path.display()
            ));
        }
        for file in files {
            loader.load_file(&file)?;
        }
    }
    if loader.seq == 0 {
        let paths: Vec<String> = paths
            .iter()
            .map(|p| p.as_ref().display().to_string())
            .collect();
        return Err(LoadError::Empty {
            paths: paths.join(", "),
        });
    }
    loader.finish()
}

/// Loads a cluster from manifests already in memory, as if read from a file at `path` (the
/// name in messages; `*.json` reads a JSON stream, anything else YAML).
pub fn load_text(path: &Path, text: &str) -> Result<Cluster, LoadError> {
    let mut loader = Loader::default();
    loader.load_str(path, text)?;
    if loader.seq == 0 {
        return Err(LoadError::Empty {
            paths: path.display().to_string(),
        });
    }
    loader.finish()
}

/// Adds `path` (a file) or the manifests below it (a folder, sorted) to `out`.
fn collect_files(
    path: &Path,
    out: &mut Vec<PathBuf>,
    visited: &mut BTreeSet<PathBuf>,
) -> Result<(), LoadError> {
    let read_err = |source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    };
    let meta = fs::metadata(path).map_err(read_err)?;
    if !meta.is_dir() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    // Symlinked folders can form loops; visit each real folder once.
    let real = fs::canonicalize(path).map_err(read_err)?;
    if !visited.insert(real) {
        return Ok(());
    }
    let mut found = Vec::new();
    for entry in fs::read_dir(path).map_err(read_err)? {
        let entry = entry.map_err(read_err)?;
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let child = entry.path();
        let child_meta = match fs::metadata(&child) {
            Ok(meta) => meta,
            // A dangling link or unreadable entry matters only if it looks like a manifest.
            Err(_) if !is_manifest(&child) => continue,
            Err(source) => {
                return Err(LoadError::Read {
                    path: child,
                    source,
                });
            }
        };
        if child_meta.is_dir() {
            collect_files(&child, &mut found, visited)?;
        } else if is_manifest(&child) {
            found.push(child);
        }
    }
    found.sort();
    out.extend(found);
    Ok(())
}

fn is_manifest(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
        ["yaml", "yml", "json"]
            .iter()
            .any(|m| e.eq_ignore_ascii_case(m))
    })
}

fn is_json(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

/// Splits a file into its non-empty documents, numbered from 1 (empty ones count).
fn parse_documents(path: &Path, text: &str) -> Result<Vec<(usize, Value)>, LoadError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if is_json(path) {
        return parse_json_documents(path, text);
    }
    parse_yaml_documents(path, text)
}

fn parse_json_documents(path: &Path, text: &str) -> Result<Vec<(usize, Value)>, LoadError> {
    let mut out = Vec::new();
    let stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    for (i, value) in stream.enumerate() {
        let value = value.map_err(|e| LoadError::Syntax {
            path: path.to_path_buf(),
            format: "JSON",
            line: Some(e.line() as u64),
            column: Some(e.column() as u64),
            message: strip_position(&e.to_string()),
        })?;
        out.push((i + 1, value));
    }
    Ok(out)
}

/// Streams at least this large are parsed in pieces, a thread per piece.
const PARALLEL_YAML_BYTES: usize = 1 << 20;

fn parse_yaml_documents(path: &Path, text: &str) -> Result<Vec<(usize, Value)>, LoadError> {
    if text.len() >= PARALLEL_YAML_BYTES
        && let Some(starts) = document_starts_by_markers(text)
        && let Some(docs) = parse_yaml_in_pieces(text, &starts)
    {
        return Ok(docs);
    }
    // The default budget (1,024 documents, 250k nodes) is meant for config files; a cluster
    // dump of 50k nodes needs far more. Alias/anchor limits stay at their defaults.
    let docs: Vec<serde_saphyr::Spanned<Value>> =
        serde_saphyr::from_multiple_with_options(text, yaml_options()).map_err(|e| {
            let location = e.location();
            LoadError::Syntax {
                path: path.to_path_buf(),
                format: "YAML",
                line: location.map(|l| l.line()).filter(|&l| l > 0),
                column: location.map(|l| l.column()).filter(|&c| c > 0),
                message: strip_position(&e.without_snippet().to_string()),
            }
        })?;
    // serde-saphyr drops empty documents; number the rest by where each one starts.
    let byte_offsets: Option<Vec<u64>> = docs
        .iter()
        .map(|d| d.referenced.span().byte_offset())
        .collect();
    let numbering = match (byte_offsets, document_starts_by_markers(text)) {
        (Some(offsets), Some(starts)) => Some((offsets, starts)),
        _ => document_starts_by_parsing(text).map(|starts| {
            let offsets = docs.iter().map(|d| d.referenced.span().offset()).collect();
            (offsets, starts)
        }),
    };
    Ok(docs
        .into_iter()
        .enumerate()
        .map(|(i, doc)| {
            let number = match &numbering {
                Some((offsets, starts)) => {
                    let offset = offsets.get(i).copied().unwrap_or(0);
                    starts.partition_point(|&s| s <= offset).max(1)
                }
                None => i + 1,
            };
            (number, doc.value)
        })
        .collect())
}

/// What a YAML stream may hold: the default budget (1,024 documents, 250k nodes) is meant for
/// config files; a cluster dump of 50k nodes needs far more. Alias/anchor limits stay at their
/// defaults.
pub fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_documents: 10_000_000,
            max_nodes: 500_000_000,
            max_events: 1_000_000_000,
            max_total_scalar_bytes: 1 << 30,
        },
        with_snippet: false,
    }
}

/// The documents of a large stream, parsed in pieces on as many threads as there are cores,
/// each piece a run of whole documents cut at `---` lines (`starts`, from
/// [`document_starts_by_markers`]: such a line can only be a marker). Numbered as the whole
/// stream counts them. `None` when there is a single piece, or when a piece does not parse:
/// the caller then parses the whole stream, so that an error's line counts from the file's
/// start.
fn parse_yaml_in_pieces(text: &str, starts: &[u64]) -> Option<Vec<(usize, Value)>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    let mut bounds = vec![0usize];
    for i in 1..threads {
        let target = (text.len() * i / threads) as u64;
        let Some(&at) = starts.get(starts.partition_point(|&s| s < target)) else {
            break;
        };
        if at as usize > bounds[bounds.len() - 1] {
            bounds.push(at as usize);
        }
    }
    bounds.push(text.len());
    if bounds.len() < 3 {
        return None;
    }
    let pieces: Vec<Option<Vec<(u64, Value)>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = bounds
            .windows(2)
            .map(|w| {
                let (from, to) = (w[0], w[1]);
                scope.spawn(move || {
                    let docs: Vec<serde_saphyr::Spanned<Value>> =
                        serde_saphyr::from_multiple_with_options(&text[from..to], yaml_options())
                            .ok()?;
                    docs.into_iter()
                        .map(|d| Some((from as u64 + d.referenced.span().byte_offset()?, d.value)))
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().ok().flatten())
            .collect()
    });
    let mut out = Vec::new();
    for piece in pieces {
        for (offset, value) in piece? {
            out.push((starts.partition_point(|&s| s <= offset).max(1), value));
        }
    }
    Some(out)
}

/// Byte offsets where each document starts, from the `---` lines: YAML forbids a line that
/// starts with `---` (or `...`) inside any content, so in a stream that parsed every such
/// line is a document marker. The first document may start without one. `None` when the
/// stream has `...` end markers (a document may then start bare), left to the parser.
fn document_starts_by_markers(text: &str) -> Option<Vec<u64>> {
    let is_marker = |line: &str, marker: &str| {
        line.strip_prefix(marker)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']))
    };
    let mut starts = Vec::new();
    let mut content_before_first_marker = false;
    let mut offset = 0u64;
    for line in text.split_inclusive('\n') {
        if is_marker(line, "---") {
            starts.push(offset);
        } else if is_marker(line, "...") {
            return None;
        } else if starts.is_empty() {
            let t = line.trim();
            content_before_first_marker |= !(t.is_empty() || t.starts_with(['#', '%']));
        }
        offset += line.len() as u64;
    }
    if content_before_first_marker {
        starts.insert(0, 0);
    }
    Some(starts)
}

/// Character offsets where each document starts, from the parser's events (slower; used
/// when [`document_starts_by_markers`] cannot decide). `None` if the scan fails.
fn document_starts_by_parsing(text: &str) -> Option<Vec<u64>> {
    use serde_saphyr::granit_parser::{Event, Parser};
    let mut starts = Vec::new();
    for event in Parser::new_from_str(text) {
        match event.ok()? {
            (Event::DocumentStart(..), span) => starts.push(span.start.index() as u64),
            (Event::StreamEnd, _) => break,
            _ => {}
        }
    }
    Some(starts)
}

/// Parser messages end with their own " at line L column C"; the error already shows it.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// A document (or List item) with its identity read from the raw value.
struct Raw {
    at: Source,
    api_version: String,
    kind: String,
    namespace: Option<String>,
    name: Option<String>,
    value: Value,
}

impl Raw {
    /// `Kind namespace/name` for namespaced kinds, `Kind name` otherwise, `Kind` when unnamed.
    fn label(&self, namespaced: bool) -> String {
        match (&self.name, namespaced) {
            (None, _) => self.kind.clone(),
            (Some(name), true) => format!("{} {}/{name}", self.kind, self.namespace_or_default()),
            (Some(name), false) => format!("{} {name}", self.kind),
        }
    }

    fn namespace_or_default(&self) -> String {
        self.namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| "default".to_string())
    }
}

/// The kinds kube-tas reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Kind {
    Node,
    Pod,
    Job,
    JobSet,
    LeaderWorkerSet,
    Topology,
    ResourceFlavor,
    ClusterQueue,
    LocalQueue,
    PodGroup,
    CompositePodGroup,
}

impl Kind {
    fn of(api_version: &str, kind: &str) -> Option<Kind> {
        match (api_version, kind) {
            ("v1", "Node") => Some(Kind::Node),
            ("v1", "Pod") => Some(Kind::Pod),
            ("batch/v1", "Job") => Some(Kind::Job),
            (sets::JOBSET_API_VERSION, "JobSet") => Some(Kind::JobSet),
            (sets::LWS_API_VERSION, "LeaderWorkerSet") => Some(Kind::LeaderWorkerSet),
            // Kueue served Topology as v1alpha1 before v1beta1, with the same fields.
            ("kueue.x-k8s.io/v1alpha1", "Topology") => Some(Kind::Topology),
            (v, "PodGroup") if scheduling_groups::POD_GROUP_API_VERSIONS.contains(&v) => {
                Some(Kind::PodGroup)
            }
            (v, "CompositePodGroup")
                if scheduling_groups::COMPOSITE_POD_GROUP_API_VERSIONS.contains(&v) =>
            {
                Some(Kind::CompositePodGroup)
            }
            (v, k) if kueue::API_VERSIONS.contains(&v) => match k {
                "Topology" => Some(Kind::Topology),
                "ResourceFlavor" => Some(Kind::ResourceFlavor),
                "ClusterQueue" => Some(Kind::ClusterQueue),
                "LocalQueue" => Some(Kind::LocalQueue),
                _ => None,
            },
            _ => None,
        }
    }

    fn namespaced(self) -> bool {
        matches!(
            self,
            Kind::Pod
                | Kind::Job
                | Kind::JobSet
                | Kind::LeaderWorkerSet
                | Kind::LocalQueue
                | Kind::PodGroup
                | Kind::CompositePodGroup
        )
    }
}

/// Accumulates objects across files, then assembles the [`Cluster`].
#[derive(Default)]
struct Loader {
    cluster: Cluster,
    /// (kind, namespace or "", name) → first definition, for duplicate detection.
    seen: std::collections::HashMap<(Kind, String, String), Source, foldhash::fast::RandomState>,
    /// Pods, Jobs, JobSets and LeaderWorkerSets, for [`workloads::derive`].
    objects: workloads::Objects,
    /// Load order of every object, so pods and jobs interleave as in the files.
    seq: usize,
}

impl Loader {
    fn warn(&mut self, message: String) {
        self.cluster.warnings.push(message);
    }

    fn load_file(&mut self, path: &Path) -> Result<(), LoadError> {
        let text = fs::read_to_string(path).map_err(|source| LoadError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        self.load_str(path, &text)
    }

    fn load_str(&mut self, path: &Path, text: &str) -> Result<(), LoadError> {
        for (document, value) in parse_documents(path, text)? {
            let at = Source {
                path: path.to_path_buf(),
                document,
                item: None,
            };
            self.load_document(at, value)?;
        }
        Ok(())
    }

    fn load_document(&mut self, at: Source, value: Value) -> Result<(), LoadError> {
        if is_empty(&value) {
            return Ok(());
        }
        let raw = identify(at, value, None)?;
        if raw.kind == "List" || (raw.kind.ends_with("List") && raw.value.get("items").is_some()) {
            return self.load_list(raw);
        }
        self.load_object(raw)
    }

    /// Expands a `List` (or `NodeList`, ...): items inherit the list's apiVersion and, for a
    /// typed list, its item kind, when they do not name their own.
    fn load_list(&mut self, list: Raw) -> Result<(), LoadError> {
        let item_kind = list.kind.strip_suffix("List").filter(|k| !k.is_empty());
        let items = match list.value.get("items") {
            Some(Value::Array(items)) => items.clone(),
            Some(Value::Null) | None => Vec::new(),
            Some(_) => {
                return Err(LoadError::object(
                    &list.at,
                    Some(&list.kind),
                    FieldError::new("items", "must be a list"),
                ));
            }
        };
        for (i, item) in items.into_iter().enumerate() {
            let at = Source {
                item: Some(i),
                ..list.at.clone()
            };
            if is_empty(&item) {
                continue;
            }
            let defaults = item_kind.map(|k| (list.api_version.as_str(), k));
            let raw = identify(at, item, defaults)?;
            if raw.kind == "List" {
                return Err(LoadError::object(
                    &raw.at,
                    Some("List"),
                    FieldError::new("", "a List inside a List is not supported"),
                ));
            }
            self.load_object(raw)?;
        }
        Ok(())
    }

    fn load_object(&mut self, raw: Raw) -> Result<(), LoadError> {
        let Some(kind) = Kind::of(&raw.api_version, &raw.kind) else {
            let namespaced = raw.namespace.is_some();
            self.warn(format!(
                "{} ({}): skipped: kind {} {} is not read by kube-tas",
                raw.at,
                raw.label(namespaced),
                raw.api_version,
                raw.kind
            ));
            return Ok(());
        };
        let label = raw.label(kind.namespaced());
        let fail = |e: FieldError| LoadError::object(&raw.at, Some(&label), e);
        let Some(name) = raw.name.clone().filter(|n| !n.is_empty()) else {
            return Err(fail(FieldError::new(
                "metadata.name",
                format!("missing (every {} needs a name)", raw.kind),
            )));
        };
        let namespace = if kind.namespaced() {
            raw.namespace_or_default()
        } else {
            String::new()
        };
        match self.seen.entry((kind, namespace.clone(), name.clone())) {
            std::collections::hash_map::Entry::Occupied(first) => {
                return Err(LoadError::Duplicate {
                    object: label,
                    first: first.get().clone(),
                    second: raw.at,
                });
            }
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(raw.at.clone());
            }
        }
        self.seq += 1;
        let seq = self.seq;
        let at = raw.at.clone();
        match kind {
            Kind::Node => {
                let node: Node = decode(raw.value).map_err(fail)?;
                let node = node_info(node, name).map_err(fail)?;
                self.cluster.nodes.push(node);
            }
            Kind::Pod => {
                let object = decode(raw.value).map_err(fail)?;
                self.objects.pods.push(Seen { seq, at, object });
            }
            Kind::Job => {
                let object = decode(raw.value).map_err(fail)?;
                self.objects.jobs.push(Seen { seq, at, object });
            }
            Kind::JobSet => {
                let object = decode(raw.value).map_err(fail)?;
                self.objects.jobsets.push(Seen { seq, at, object });
            }
            Kind::LeaderWorkerSet => {
                let object = decode(raw.value).map_err(fail)?;
                self.objects.lws.push(Seen { seq, at, object });
            }
            Kind::Topology => {
                let topology: Topology = decode(raw.value).map_err(fail)?;
                self.cluster.kueue.topologies.insert(name, topology);
            }
            Kind::ResourceFlavor => {
                let flavor: ResourceFlavor = decode(raw.value).map_err(fail)?;
                self.cluster.kueue.resource_flavors.insert(name, flavor);
            }
            Kind::ClusterQueue => {
                let queue: ClusterQueue = decode(raw.value).map_err(fail)?;
                check_quotas(&queue).map_err(fail)?;
                self.cluster.kueue.cluster_queues.insert(name, queue);
            }
            Kind::LocalQueue => {
                let queue: LocalQueue = decode(raw.value).map_err(fail)?;
                if queue.spec.cluster_queue.is_empty() {
                    return Err(fail(FieldError::new(
                        "spec.clusterQueue",
                        "missing (a LocalQueue must name its ClusterQueue)",
                    )));
                }
                self.cluster
                    .kueue
                    .local_queues
                    .insert((namespace, name), queue);
            }
            Kind::PodGroup | Kind::CompositePodGroup => {
                let meta: ObjectMeta =
                    decode(raw.value.get("metadata").cloned().unwrap_or_default())
                        .map_err(|e| fail(in_metadata(e)))?;
                let composite = kind == Kind::CompositePodGroup;
                let group = scheduling_groups::scheduling_group(
                    &raw.api_version,
                    composite,
                    &meta,
                    raw.value.get("spec"),
                )
                .map_err(fail)?;
                self.cluster.scheduling_groups.push(group);
            }
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Cluster, LoadError> {
        self.objects.failed_nodes = self
            .cluster
            .nodes
            .iter()
            .filter(|n| !n.ready)
            .map(|n| n.name.clone())
            .collect();
        self.objects.node_names = self.cluster.nodes.iter().map(|n| n.name.clone()).collect();
        let derived = workloads::derive(self.objects)?;
        self.cluster.bound_pods = derived.bound_pods;
        self.cluster.workloads = derived.workloads;
        self.cluster.jobs = derived.jobs;
        self.cluster.sets = derived.sets;
        self.cluster.replacements = derived.replacements;
        self.cluster.lost_pods = derived.lost_pods;
        self.cluster.scheduling_pods = derived.scheduling_pods;
        self.cluster.warnings.extend(derived.warnings);
        Ok(self.cluster)
    }
}

/// A field error found while decoding `metadata` alone, named from the object's root.
fn in_metadata(e: FieldError) -> FieldError {
    let field = if e.field.is_empty() {
        "metadata".to_string()
    } else {
        format!("metadata.{}", e.field)
    };
    FieldError::new(field, e.message)
}

/// `null`, `{}`: nothing to load.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        _ => false,
    }
}

/// Reads apiVersion, kind, namespace and name; `defaults` fill a List item's missing
/// apiVersion and kind.
fn identify(
    at: Source,
    mut value: Value,
    defaults: Option<(&str, &str)>,
) -> Result<Raw, LoadError> {
    let Value::Object(map) = &mut value else {
        return Err(LoadError::object(
            &at,
            None,
            FieldError::new(
                "",
                format!(
                    "expected a Kubernetes object (a mapping with apiVersion and kind), found {}",
                    json_type(&value)
                ),
            ),
        ));
    };
    if let Some((api_version, kind)) = defaults {
        map.entry("apiVersion")
            .or_insert_with(|| Value::String(api_version.to_string()));
        map.entry("kind")
            .or_insert_with(|| Value::String(kind.to_string()));
    }
    let metadata = map.get("metadata").and_then(Value::as_object);
    let meta_str = |key: &str| {
        metadata
            .and_then(|m: &Map<String, Value>| m.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let name = meta_str("name");
    let namespace = meta_str("namespace");
    let kind = required_str(map, "kind").map_err(|e| LoadError::object(&at, None, e))?;
    let api_version =
        required_str(map, "apiVersion").map_err(|e| LoadError::object(&at, Some(&kind), e))?;
    Ok(Raw {
        at,
        api_version,
        kind,
        namespace,
        name,
        value,
    })
}

fn required_str(map: &Map<String, Value>, key: &str) -> Result<String, FieldError> {
    match map.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        None | Some(Value::Null) => Err(FieldError::new(key, "missing")),
        Some(Value::String(_)) => Err(FieldError::new(key, "empty")),
        Some(other) => Err(FieldError::new(
            key,
            format!("must be a string, found {}", json_type(other)),
        )),
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Decodes a typed object, naming the failing field.
fn decode<T: DeserializeOwned>(value: Value) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        let field = if field == "." { String::new() } else { field };
        FieldError::new(field, e.into_inner().to_string())
    })
}

/// A Node as placement sees it (from a manifest or a watch).
pub(crate) fn node_info(node: Node, name: String) -> Result<NodeInfo, FieldError> {
    let spec = node.spec.unwrap_or_default();
    let status = node.status.unwrap_or_default();
    let mut allocatable = ResourceList::new();
    for (resource, q) in status.allocatable.iter().flatten() {
        let value = parse_non_negative(q, resource, &|| format!("status.allocatable.{resource}"))?;
        allocatable.insert(resource.clone(), resource_amount(resource, value));
    }
    let ready_condition = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready");
    let ready = ready_condition.is_some_and(|c| c.status == "True");
    let ready_since = ready_condition
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0.as_second());
    Ok(NodeInfo {
        name,
        labels: node.metadata.labels.unwrap_or_default().into(),
        taints: spec.taints.unwrap_or_default(),
        allocatable,
        ready,
        ready_condition_missing: ready_condition.is_none(),
        ready_since,
        unschedulable: spec.unschedulable.unwrap_or(false),
    })
}

/// Every quota of a ClusterQueue must be a quantity.
fn check_quotas(queue: &ClusterQueue) -> Result<(), FieldError> {
    for (g, group) in queue.spec.resource_groups.iter().enumerate() {
        for (f, flavor) in group.flavors.iter().enumerate() {
            for (r, quota) in flavor.resources.iter().enumerate() {
                let path = format!("spec.resourceGroups[{g}].flavors[{f}].resources[{r}]");
                let limits = [
                    ("nominalQuota", Some(&quota.nominal_quota)),
                    ("borrowingLimit", quota.borrowing_limit.as_ref()),
                    ("lendingLimit", quota.lending_limit.as_ref()),
                ];
                for (field, q) in limits {
                    if let Some(q) = q {
                        parse_quantity(&q.0).map_err(|e| {
                            FieldError::new(format!("{path}.{field}"), e.to_string())
                        })?;
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
