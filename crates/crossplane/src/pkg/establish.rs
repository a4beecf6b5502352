//! Installing a revision's objects (upstream `revision/establisher.go`): CRDs of a Provider, XRDs and
//! Compositions of a Configuration.
//!
//! Every object is first written as a server-side dry run; only when all of them pass are they
//! written for real, so a package with one bad object installs nothing. Each object gets the
//! controller reference to the active revision and a plain owner reference to its package. An object
//! that another package's revision (or anything else that is not this package) controls is a conflict,
//! reported in words; one that an older sibling revision of the same package controls is taken over,
//! which is how an upgrade moves its CRDs to the new revision. One that a newer sibling controls is
//! left alone: while an upgrade overlaps, the old revision stays Active until the new one is healthy,
//! and must not write its older objects back.
//!
//! A ManagedResourceDefinition is checked twice: the CRD of its name, if there is one, must not be
//! another package's either. Its `state` is never taken back from Active (an activation policy's), and
//! it carries the revision's labels so that a core with a label selector sees it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::ApiResource;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::kind::Kind;
use super::object::controller_of;
use crate::error::Error;

/// The field manager of installed objects.
pub const FIELD_MANAGER: &str = "pkg.crossplane.io/revision";

/// An object of a package to install.
#[derive(Debug, Clone)]
pub struct Install {
    /// Its API.
    pub api: ApiResource,
    /// The object as the package carries it.
    pub object: Value,
    /// Its name.
    pub name: String,
}

impl Install {
    /// The object's API resource from its apiVersion and kind (the few kinds packages install).
    pub fn of(object: &Value) -> Result<Install, String> {
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| format!("a {kind} in the package has no metadata.name"))?;
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        Ok(Install {
            api: ApiResource {
                group: group.into(),
                version: version.into(),
                api_version: api_version.into(),
                kind: kind.into(),
                plural: format!("{}s", kind.to_lowercase()),
            },
            object: object.clone(),
            name: name.to_string(),
        })
    }

    /// `Kind name`, as messages name it.
    pub fn describe(&self) -> String {
        format!("{} {}", self.api.kind, self.name)
    }
}

/// Who controls an existing object, when it is not this package.
#[derive(Debug)]
pub struct Conflict {
    /// The object.
    pub object: String,
    /// Its controller.
    pub controller: OwnerReference,
    /// The controller's package, when the controller is a revision.
    pub package: Option<String>,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let by = match &self.package {
            Some(p) => format!("{} {} of package {p}", self.controller.kind, self.controller.name),
            None => format!("{} {}", self.controller.kind, self.controller.name),
        };
        write!(
            f,
            "{} is already controlled by {by}; an object belongs to one package: uninstall the other \
             package, or install a package that does not carry {}",
            self.object, self.object
        )
    }
}

/// Installs `objects` for revision `rev` (of package `package`, kind `kind`): checks who controls
/// each, dry-runs every write, then writes. Returns the installed objects' references
/// (`status.objectRefs`).
pub async fn establish(
    client: &kube::Client,
    kind: Kind,
    rev: &DynamicObject,
    package_owner: &OwnerReference,
    rev_owner: &OwnerReference,
    objects: &[Install],
) -> Result<Vec<Value>, String> {
    let establisher = Establisher {
        client,
        revs: Api::all_with(client.clone(), &kind.revision()),
        kind,
        rev,
        package_owner,
        rev_owner,
    };
    let mut planned = Vec::new();
    let mut skipped = Vec::new();
    for install in objects {
        match establisher.plan(install).await? {
            Plan::Write(desired) => {
                let api: Api<DynamicObject> = Api::all_with(client.clone(), &install.api);
                planned.push((install, api, desired));
            }
            Plan::Skip(r) => skipped.push(r),
        }
    }
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    for (install, api, desired) in &planned {
        api.patch(&install.name, &pp.clone().dry_run(), &Patch::Apply(desired))
            .await
            .map_err(|e| {
                format!(
                    "{} cannot be installed: {}",
                    install.describe(),
                    crate::error::explain(&e)
                )
            })?;
    }
    let mut refs = skipped;
    for (install, api, desired) in &planned {
        let written = api
            .patch(&install.name, &pp, &Patch::Apply(desired))
            .await
            .map_err(|e| {
                format!(
                    "cannot install {}: {}",
                    install.describe(),
                    crate::error::explain(&e)
                )
            })?;
        refs.push(object_ref(install, written.uid()));
    }
    refs.sort_by_key(|r| (r["kind"].to_string(), r["name"].to_string()));
    Ok(refs)
}

/// An entry of `status.objectRefs`.
fn object_ref(install: &Install, uid: Option<String>) -> Value {
    json!({
        "apiVersion": install.api.api_version,
        "kind": install.api.kind,
        "name": install.name,
        "uid": uid,
    })
}

/// What [`establish`] does with one object.
enum Plan {
    /// Write it (dry run first) as this desired object.
    Write(Value),
    /// Leave it as a newer revision wrote it; its reference.
    Skip(Value),
}

/// One [`establish`] call: the revision and its owners, and its kind's revisions.
struct Establisher<'a> {
    client: &'a kube::Client,
    revs: Api<DynamicObject>,
    kind: Kind,
    rev: &'a DynamicObject,
    package_owner: &'a OwnerReference,
    rev_owner: &'a OwnerReference,
}

impl Establisher<'_> {
    /// What to do with `install`: a conflict in words, leave it to a newer revision, or write it.
    async fn plan(&self, install: &Install) -> Result<Plan, String> {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &install.api);
        let existing = api.get_opt(&install.name).await.map_err(|e| {
            format!(
                "cannot read {}: {}",
                install.describe(),
                crate::error::explain(&e)
            )
        })?;
        if install.api.kind == apis::apiextensions::mrd::KIND {
            self.check_mrd_crd(install).await?;
        }
        let mut refs = vec![self.rev_owner.clone(), self.package_owner.clone()];
        if let Some(existing) = &existing {
            match self.control(install.describe(), existing).await {
                Control::Conflict(why) => return Err(why),
                Control::Newer => {
                    // A newer revision of the package has taken it over (both are Active while an
                    // upgrade overlaps): leave it as the newer one wrote it.
                    return Ok(Plan::Skip(object_ref(install, existing.uid())));
                }
                Control::Ours => {}
            }
            // Keep every other owner; a sibling revision's controller reference becomes a plain one.
            for r in existing.owner_references() {
                if r.uid != self.rev_owner.uid && r.uid != self.package_owner.uid {
                    let mut r = r.clone();
                    r.controller = Some(false);
                    refs.push(r);
                }
            }
        }
        let desired = self.desired(install, existing.as_ref(), refs);
        Ok(Plan::Write(desired))
    }

    /// An MRD's CRD may already be there (installed before MRDs, or by another package): who
    /// controls it decides as for the MRD itself.
    async fn check_mrd_crd(&self, install: &Install) -> Result<(), String> {
        let crds: Api<DynamicObject> = Api::all_with(self.client.clone(), &crd_api());
        let crd = crds.get_opt(&install.name).await.map_err(|e| {
            format!(
                "cannot read CustomResourceDefinition {}: {}",
                install.name,
                crate::error::explain(&e)
            )
        })?;
        if let Some(crd) = &crd {
            let what = format!("CustomResourceDefinition {}", install.name);
            if let Control::Conflict(why) = self.control(what, crd).await {
                return Err(why);
            }
        }
        Ok(())
    }

    /// The object to apply: as the package carries it, with owner references `refs`, the
    /// package's common labels, and for an MRD its kept state and the revision's labels.
    fn desired(
        &self,
        install: &Install,
        existing: Option<&DynamicObject>,
        refs: Vec<OwnerReference>,
    ) -> Value {
        let mut desired = install.object.clone();
        desired["metadata"]["ownerReferences"] = json!(refs);
        if install.api.kind == apis::apiextensions::mrd::KIND {
            // An MRD's state is the activation policies' once Active (upstream's establisher keeps
            // it too); the package only ever asks for Inactive or Active.
            if existing
                .and_then(|e| e.data.pointer("/spec/state"))
                .and_then(Value::as_str)
                == Some("Active")
            {
                desired["spec"]["state"] = json!("Active");
            }
            // Inactive is the MRD's default: not stating it leaves the field to whoever activates the
            // MRD, so an apply racing an activation never asks to go back (which the MRD refuses).
            if desired["spec"]["state"] == "Inactive"
                && let Some(spec) = desired["spec"].as_object_mut()
            {
                spec.remove("state");
            }
            // Deviation: the revision's labels (its package's) go on its MRDs, so a core started
            // with a label selector reconciles the MRDs of the packages it selects.
            for (k, v) in self.rev.labels() {
                desired["metadata"]["labels"][k] = json!(v);
            }
        }
        if let Some(labels) = self
            .rev
            .data
            .pointer("/spec/commonLabels")
            .and_then(Value::as_object)
        {
            for (k, v) in labels {
                desired["metadata"]["labels"][k] = v.clone();
            }
        }
        desired
    }

    /// Who controls `existing` (described as `what`), from the point of view of this revision.
    async fn control(&self, what: String, existing: &DynamicObject) -> Control {
        let Some(c) = controller_of(existing.owner_references()).filter(|c| c.uid != self.rev_owner.uid)
        else {
            return Control::Ours;
        };
        let controller_rev = if c.kind == self.kind.revision().kind {
            self.revs.get_opt(&c.name).await.ok().flatten()
        } else {
            None
        };
        let sibling = controller_rev
            .as_ref()
            .and_then(|r| r.labels().get(apis::pkg::LABEL_PACKAGE).cloned());
        let number = |r: &DynamicObject| r.data.pointer("/spec/revision").and_then(Value::as_i64);
        if sibling.as_deref() != Some(self.package_owner.name.as_str()) {
            return Control::Conflict(
                Conflict {
                    object: what,
                    controller: c.clone(),
                    package: sibling,
                }
                .to_string(),
            );
        }
        if controller_rev.as_ref().and_then(number) > number(self.rev) {
            Control::Newer
        } else {
            Control::Ours
        }
    }
}

/// Who controls an existing object, from the point of view of revision `rev` of package `package`.
enum Control {
    /// Nobody else: no controller, this revision, or an older revision of the same package.
    Ours,
    /// A newer revision of the same package.
    Newer,
    /// Anything else: the conflict in words.
    Conflict(String),
}

/// The CRD API.
fn crd_api() -> ApiResource {
    ApiResource::erase::<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    >(&())
}

/// Releases what an inactive revision controls: its controller reference becomes a plain owner
/// reference, so the active revision can take the objects and nothing is deleted.
pub async fn release(client: &kube::Client, rev_uid: &str, object_refs: &[Value]) -> Result<(), Error> {
    for r in object_refs {
        let Ok(install) = Install::of(&json!({
            "apiVersion": r["apiVersion"], "kind": r["kind"], "metadata": {"name": r["name"]},
        })) else {
            continue;
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &install.api);
        let Some(obj) = api.get_opt(&install.name).await? else {
            continue;
        };
        let refs = obj.owner_references();
        if !refs
            .iter()
            .any(|o| o.uid == rev_uid && o.controller == Some(true))
        {
            continue;
        }
        let released: Vec<OwnerReference> = refs
            .iter()
            .cloned()
            .map(|mut o| {
                if o.uid == rev_uid {
                    o.controller = Some(false);
                }
                o
            })
            .collect();
        let patch = json!({"metadata": {
            "ownerReferences": released,
            "resourceVersion": obj.resource_version(),
        }});
        api.patch(&install.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(())
}
