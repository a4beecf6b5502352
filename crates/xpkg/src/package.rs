//! `package.yaml`: a YAML stream of one meta object and the objects the package installs.

use serde_json::Value;

use crate::{Error, Result};

/// The API group of the meta objects that describe a package.
pub const META_GROUP: &str = "meta.pkg.crossplane.io";

/// Which kind of package the meta object describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaKind {
    /// A provider: CRDs and webhook configurations, a controller image.
    Provider,
    /// A composition function: input CRDs (never installed), a function image.
    Function,
    /// A configuration: XRDs and Compositions, no image of its own.
    Configuration,
}

impl MetaKind {
    /// The kind as written in `package.yaml`.
    pub fn as_str(self) -> &'static str {
        match self {
            MetaKind::Provider => "Provider",
            MetaKind::Function => "Function",
            MetaKind::Configuration => "Configuration",
        }
    }

    fn from_kind(kind: &str) -> Option<MetaKind> {
        match kind {
            "Provider" => Some(MetaKind::Provider),
            "Function" => Some(MetaKind::Function),
            "Configuration" => Some(MetaKind::Configuration),
            _ => None,
        }
    }
}

/// A parsed package: its meta object and the objects it carries, in stream order.
#[derive(Debug, Clone, PartialEq)]
pub struct Package {
    /// The kind of the meta object.
    pub kind: MetaKind,
    /// The meta object (`meta.pkg.crossplane.io/v1` Provider, Function or Configuration).
    pub meta: Value,
    /// Every other object (CRDs, webhook configurations, XRDs, Compositions).
    pub objects: Vec<Value>,
}

impl Package {
    /// A package of `meta` and `objects`. Fails unless `meta` is a meta object.
    pub fn new(meta: Value, objects: Vec<Value>) -> Result<Package> {
        let mut stream = vec![meta];
        stream.extend(objects);
        Package::from_objects(stream)
    }

    /// Parses a `package.yaml` stream. Empty documents are skipped; every other document must be an
    /// object with `apiVersion` and `kind`, and exactly one of them a meta object.
    pub fn parse(yaml: &[u8]) -> Result<Package> {
        let text = std::str::from_utf8(yaml).map_err(|e| Error::InvalidYaml {
            message: format!("it is not UTF-8 ({e})"),
        })?;
        let docs: Vec<Value> = serde_saphyr::from_str_multiple(text).map_err(|e| Error::InvalidYaml {
            message: e.to_string(),
        })?;
        Package::from_objects(docs.into_iter().filter(|d| !d.is_null()).collect())
    }

    fn from_objects(docs: Vec<Value>) -> Result<Package> {
        let mut metas = Vec::new();
        let mut objects = Vec::new();
        for (index, doc) in docs.into_iter().enumerate() {
            let api_version =
                doc.get("apiVersion")
                    .and_then(Value::as_str)
                    .ok_or(Error::IncompleteObject {
                        index,
                        field: "apiVersion",
                    })?;
            let kind = doc
                .get("kind")
                .and_then(Value::as_str)
                .ok_or(Error::IncompleteObject { index, field: "kind" })?;
            let group = api_version.split_once('/').map_or("", |(g, _)| g);
            match (group == META_GROUP).then(|| MetaKind::from_kind(kind)).flatten() {
                Some(k) => metas.push((k, doc)),
                None => objects.push(doc),
            }
        }
        match metas.len() {
            0 => Err(Error::NoMeta),
            1 => {
                let (kind, meta) = metas.remove(0);
                Ok(Package { kind, meta, objects })
            }
            count => Err(Error::TooManyMeta {
                count,
                kinds: metas
                    .iter()
                    .map(|(k, m)| format!("{} {}", k.as_str(), name_of(m)))
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// The meta object's name.
    pub fn name(&self) -> &str {
        name_of(&self.meta)
    }

    /// The objects of `kind` (e.g. `CustomResourceDefinition`).
    pub fn objects_of<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.objects
            .iter()
            .filter(move |o| o.get("kind").and_then(Value::as_str) == Some(kind))
    }

    /// The package as a `package.yaml` stream: the meta object first.
    pub fn to_yaml(&self) -> Result<String> {
        let mut docs = vec![&self.meta];
        docs.extend(&self.objects);
        serde_saphyr::to_string_multiple(&docs)
            .map_err(|e| Error::Build(format!("writing package.yaml: {e}")))
    }
}

fn name_of(v: &Value) -> &str {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("(unnamed)")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const META: &str =
        "apiVersion: meta.pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: provider-nop\n";
    const CRD: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: nopresources.nop.crossplane.io\n";

    #[test]
    fn parses_one_meta_and_its_objects() {
        let p = Package::parse(format!("---\n{META}---\n{CRD}---\n").as_bytes()).expect("parses");
        assert_eq!(p.kind, MetaKind::Provider);
        assert_eq!(p.name(), "provider-nop");
        assert_eq!(p.objects_of("CustomResourceDefinition").count(), 1);
        let again = Package::parse(p.to_yaml().expect("writes").as_bytes()).expect("round trip");
        assert_eq!(again, p);
    }

    #[test]
    fn zero_or_two_metas_are_one_error_each() {
        assert!(matches!(Package::parse(CRD.as_bytes()), Err(Error::NoMeta)));
        let two = format!("{META}---\n{}", META.replace("Provider", "Function"));
        match Package::parse(two.as_bytes()) {
            Err(e @ Error::TooManyMeta { count: 2, .. }) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("Provider provider-nop, Function provider-nop"),
                    "{msg}"
                );
            }
            other => panic!("expected TooManyMeta, got {other:?}"),
        }
    }

    #[test]
    fn objects_need_api_version_and_kind_and_yaml_must_parse() {
        let e = Package::parse(format!("{META}---\nkind: Foo\n").as_bytes()).expect_err("no apiVersion");
        assert!(
            matches!(
                e,
                Error::IncompleteObject {
                    index: 1,
                    field: "apiVersion"
                }
            ),
            "{e}"
        );
        let e = Package::parse(b"a: [unclosed").expect_err("bad yaml");
        assert!(matches!(e, Error::InvalidYaml { .. }), "{e}");
        let e =
            Package::new(json!({"apiVersion": "v1", "kind": "ConfigMap"}), Vec::new()).expect_err("no meta");
        assert!(matches!(e, Error::NoMeta));
    }
}
