//! The repository's kustomizations (`manifests/`, `certs/`), rendered for the tests the way
//! `kubectl apply -k` renders them: resources (files and other kustomizations' folders),
//! `images:` and `secretGenerator:`, with kustomize's own refusals: a file outside the
//! kustomization's folder, a folder that contains one already being rendered (kustomize's
//! "cycle detected"), a field this reader does not implement (so a new kustomize feature is
//! never silently ignored), two objects with the same identity.
//!
//! A generated Secret names its files but is not read from them: the development certificate
//! files only exist once `kube-tas certs` has run.
#![allow(dead_code)] // each test binary uses its own subset

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The kustomization file name kustomize looks for first (the only one used here).
pub const KUSTOMIZATION: &str = "kustomization.yaml";

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `path` relative to the repository, for messages.
pub fn shown(path: &Path) -> String {
    let root = repo().canonicalize().unwrap_or_else(|_| repo());
    path.strip_prefix(&root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Every document of a multi-document YAML file (empty documents left out).
pub fn read_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: cannot read: {e}", path.display()));
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .unwrap_or_else(|e| panic!("{}: not YAML: {e}", path.display()));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// A kustomization, with only the fields this reader implements.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Kustomization {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default)]
    pub images: Vec<ImageEntry>,
    #[serde(default)]
    pub secret_generator: Vec<SecretGenerator>,
}

/// An `images:` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ImageEntry {
    pub name: String,
    pub new_name: Option<String>,
    pub new_tag: Option<String>,
}

/// A `secretGenerator:` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SecretGenerator {
    pub name: String,
    pub namespace: Option<String>,
    #[serde(rename = "type")]
    pub type_: Option<String>,
    #[serde(default)]
    pub files: Vec<String>,
    pub options: Option<GeneratorOptions>,
}

/// A generator's `options:`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GeneratorOptions {
    pub disable_name_suffix_hash: Option<bool>,
}

/// Reads `dir/kustomization.yaml`.
pub fn kustomization(dir: &Path) -> Kustomization {
    let path = dir.join(KUSTOMIZATION);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: cannot read: {e}", path.display()));
    let k: Kustomization =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", shown(&path)));
    assert_eq!(
        k.api_version,
        "kustomize.config.k8s.io/v1beta1",
        "{}",
        shown(&path)
    );
    assert_eq!(k.kind, "Kustomization", "{}", shown(&path));
    k
}

/// What a kustomization renders to.
#[derive(Debug, Default)]
pub struct Rendered {
    /// The objects, in kustomize's accumulation order.
    pub objects: Vec<Value>,
    /// Every file read (kustomizations and resources), canonical.
    pub files: BTreeSet<PathBuf>,
    /// Every generator's source file, canonical (not read: it may not exist yet).
    pub generator_files: BTreeSet<PathBuf>,
    /// Every generator, with the folder of its kustomization.
    pub generators: Vec<(PathBuf, SecretGenerator)>,
}

/// Renders the kustomization in `dir` (relative to the repository, or absolute).
pub fn render(dir: impl AsRef<Path>) -> Rendered {
    let dir = repo().join(dir);
    let dir = dir
        .canonicalize()
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut out = Rendered::default();
    render_into(&dir, &[], &mut out);
    out
}

fn render_into(dir: &Path, visiting: &[PathBuf], out: &mut Rendered) {
    let k = kustomization(dir);
    out.files.insert(dir.join(KUSTOMIZATION));
    let first = out.objects.len();
    let mut chain = visiting.to_vec();
    chain.push(dir.to_path_buf());
    for resource in &k.resources {
        let path = dir.join(resource);
        let path = path.canonicalize().unwrap_or_else(|e| {
            panic!(
                "{}: resource {resource:?}: {e}",
                shown(&dir.join(KUSTOMIZATION))
            )
        });
        if path.is_dir() {
            // kustomize: "cycle detected: candidate root ... contains visited root ...".
            if let Some(inner) = chain.iter().find(|v| v.starts_with(&path)) {
                panic!(
                    "{}: resource {resource:?} contains {}, which is being rendered: kustomize \
                     refuses this (cycle detected)",
                    shown(&dir.join(KUSTOMIZATION)),
                    shown(inner)
                );
            }
            render_into(&path, &chain, out);
        } else {
            // kustomize's default load restrictor: files only from the kustomization's folder.
            assert!(
                path.starts_with(dir),
                "{}: resource {resource:?} is outside the kustomization's folder: kustomize \
                 refuses to load it",
                shown(&dir.join(KUSTOMIZATION))
            );
            out.files.insert(path.clone());
            for doc in read_docs(&path) {
                add(out, doc, &path);
            }
        }
    }
    for entry in &k.images {
        for object in &mut out.objects[first..] {
            set_image(object, entry);
        }
    }
    for generator in &k.secret_generator {
        let mut data = serde_json::Map::new();
        for file in &generator.files {
            assert!(
                !file.contains("..") && !file.contains('=') && !Path::new(file).is_absolute(),
                "{}: generator file {file:?}: only a plain name inside the kustomization's \
                 folder is read here (kustomize allows no folder above it)",
                shown(&dir.join(KUSTOMIZATION))
            );
            out.generator_files.insert(dir.join(file));
            let key = Path::new(file).file_name().unwrap().to_string_lossy();
            let stand_in = base64::engine::general_purpose::STANDARD
                .encode(format!("<the contents of {file}>"));
            data.insert(key.into_owned(), json!(stand_in));
        }
        let mut meta = json!({"name": generator.name});
        if let Some(ns) = &generator.namespace {
            meta["namespace"] = json!(ns);
        }
        let mut secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta,
            "data": data});
        if let Some(t) = &generator.type_ {
            secret["type"] = json!(t);
        }
        let source = dir.join(KUSTOMIZATION);
        add(out, secret, &source);
        out.generators.push((dir.to_path_buf(), generator.clone()));
    }
}

/// `(group, kind, namespace, name)`: an object's identity, as kustomize keeps them apart.
pub fn identity(object: &Value) -> (String, String, String, String) {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    (
        group.to_string(),
        str_at(object, "/kind").to_string(),
        str_at(object, "/metadata/namespace").to_string(),
        str_at(object, "/metadata/name").to_string(),
    )
}

fn add(out: &mut Rendered, object: Value, from: &Path) {
    let id = identity(&object);
    assert!(
        !id.1.is_empty() && !id.3.is_empty(),
        "{}: an object without kind or name",
        shown(from)
    );
    assert!(
        !out.objects.iter().any(|o| identity(o) == id),
        "{}: {id:?} is already there: kustomize refuses two objects of one identity",
        shown(from)
    );
    out.objects.push(object);
}

/// Splits `image` into (name, tag or digest suffix).
pub fn split_image(image: &str) -> (&str, &str) {
    if let Some(at) = image.find('@') {
        return (&image[..at], &image[at..]);
    }
    // A colon after the last slash is a tag; one before it is a registry's port.
    let slash = image.rfind('/').map_or(0, |i| i + 1);
    match image[slash..].rfind(':') {
        Some(colon) => (&image[..slash + colon], &image[slash + colon..]),
        None => (image, ""),
    }
}

fn set_image(object: &mut Value, entry: &ImageEntry) {
    let Some(spec) = object.pointer_mut("/spec/template/spec") else {
        return;
    };
    for list in ["containers", "initContainers"] {
        for container in spec[list].as_array_mut().into_iter().flatten() {
            let Some(image) = container["image"].as_str() else {
                continue;
            };
            let (name, suffix) = split_image(image);
            if name != entry.name {
                continue;
            }
            let name = entry.new_name.as_deref().unwrap_or(name);
            let suffix = match &entry.new_tag {
                Some(tag) => format!(":{tag}"),
                None => suffix.to_string(),
            };
            container["image"] = json!(format!("{name}{suffix}"));
        }
    }
}

/// The string at a JSON pointer, "" when absent.
pub fn str_at<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

impl Rendered {
    /// Every object of `kind`.
    pub fn all(&self, kind: &str) -> Vec<&Value> {
        self.objects.iter().filter(|o| o["kind"] == kind).collect()
    }

    /// The only object of `kind`.
    pub fn only(&self, kind: &str) -> &Value {
        let found = self.all(kind);
        assert_eq!(found.len(), 1, "exactly one {kind}, found {}", found.len());
        found[0]
    }

    /// The only object of `kind` as its Kubernetes type.
    pub fn only_typed<T: DeserializeOwned>(&self, kind: &str) -> T {
        typed(self.only(kind))
    }

    /// Every object of `kind` as its Kubernetes type.
    pub fn all_typed<T: DeserializeOwned>(&self, kind: &str) -> Vec<T> {
        self.all(kind).into_iter().map(typed).collect()
    }

    /// The object of `kind` named `name`.
    pub fn named(&self, kind: &str, name: &str) -> Option<&Value> {
        self.objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
    }
}

/// `object` as `T`, or a panic naming the object and the field.
pub fn typed<T: DeserializeOwned>(object: &Value) -> T {
    serde_path_to_error::deserialize(object).unwrap_or_else(|e| {
        panic!(
            "{} {}: {e}",
            str_at(object, "/kind"),
            str_at(object, "/metadata/name")
        )
    })
}

/// Whether `selector` (matchLabels only; anything else fails the test so that it is
/// implemented here first) selects an object with `labels`.
pub fn selects(
    selector: &BTreeMap<String, String>,
    expressions: bool,
    labels: &BTreeMap<String, String>,
) -> bool {
    assert!(
        !expressions,
        "matchExpressions are not read by these tests; teach them first"
    );
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}
