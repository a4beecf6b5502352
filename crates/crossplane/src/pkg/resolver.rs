//! Dependencies through the Lock (upstream `internal/dag`, `revision/dependency.go` and the resolver
//! controller).
//!
//! An active revision records itself in the one Lock (`lock`): its source, version and `dependsOn`.
//! Then each dependency is looked up by source: one in the Lock is *found*, and *installed* when its
//! version meets the semver constraint (or equals the digest); one whose version does not is a
//! conflict, reported in words. A dependency missing from the Lock is installed: the highest tag in its
//! repository that meets the constraint becomes a new package named after its repository (unless a
//! package of that source exists already); none meeting it is a condition. A cycle through the Lock
//! is a condition too.
//!
//! Deviation: upstream's separate resolver controller watches the Lock and installs one missing
//! dependency per reconcile; here the revision installs its own missing dependencies, which is the
//! same outcome with one controller fewer.

use std::collections::{BTreeMap, BTreeSet};

use apis::pkg::LOCK_NAME;
use apis::pkg::lock::{Dependency as LockDependency, Lock, LockPackage};
use apis::pkg::meta::Meta;
use kube::api::{DynamicObject, ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use xpkg::Reference;

use super::constraint::{Constraint, parse_version};
use super::fetch::Source;
use super::kind::Kind;
use crate::error::Error;

/// What resolving found.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Resolved {
    /// Dependencies in the Lock.
    pub found: i64,
    /// Dependencies in the Lock at a version that meets the constraint.
    pub installed: i64,
    /// Dependencies in the Lock at a version that does not.
    pub invalid: i64,
    /// Dependencies still being installed, in words, if any.
    pub waiting: Option<String>,
}

/// One dependency as the Lock records it.
fn dependencies(meta: &Meta) -> Vec<LockDependency> {
    meta.spec
        .depends_on
        .iter()
        .filter_map(|d| {
            let kind = d.kind.clone().or_else(|| {
                if d.provider.is_some() {
                    Some("Provider".into())
                } else if d.configuration.is_some() {
                    Some("Configuration".into())
                } else if d.function.is_some() {
                    Some("Function".into())
                } else {
                    None
                }
            });
            Some(LockDependency {
                package: d.source()?.to_string(),
                api_version: Some(
                    d.api_version
                        .clone()
                        .unwrap_or_else(|| "pkg.crossplane.io/v1".into()),
                ),
                kind,
                package_type: None,
                constraints: d.version.clone(),
            })
        })
        .collect()
}

/// The entry of a revision in the Lock.
pub fn entry(kind: Kind, revision: &str, reference: &Reference, meta: &Meta) -> LockPackage {
    LockPackage {
        name: revision.to_string(),
        api_version: Some("pkg.crossplane.io/v1".into()),
        kind: Some(kind.name().into()),
        package_type: None,
        source: reference.source(),
        version: reference
            .tag
            .clone()
            .or_else(|| reference.digest.clone())
            .unwrap_or_default(),
        dependencies: dependencies(meta),
    }
}

/// A cycle through the Lock that starts and ends at `source`, as `a → b → a`.
pub fn cycle(packages: &[LockPackage], source: &str) -> Option<String> {
    let edges: BTreeMap<&str, BTreeSet<&str>> = packages.iter().fold(BTreeMap::new(), |mut m, p| {
        m.entry(p.source.as_str())
            .or_default()
            .extend(p.dependencies.iter().map(|d| d.package.as_str()));
        m
    });
    fn walk<'a>(
        edges: &BTreeMap<&'a str, BTreeSet<&'a str>>,
        at: &'a str,
        goal: &str,
        path: &mut Vec<&'a str>,
        seen: &mut BTreeSet<&'a str>,
    ) -> bool {
        for next in edges.get(at).into_iter().flatten() {
            if *next == goal {
                path.push(next);
                return true;
            }
            if seen.insert(next) {
                path.push(next);
                if walk(edges, next, goal, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![source];
    walk(&edges, source, source, &mut path, &mut BTreeSet::new()).then(|| path.join(" → "))
}

/// Whether a locked `version` meets `constraints` (a semver range, or a digest).
pub fn satisfies(constraints: &str, version: &str) -> Result<bool, String> {
    if constraints.starts_with("sha256:") {
        return Ok(constraints == version);
    }
    Ok(Constraint::parse(constraints)?.matches(version))
}

/// The highest of `tags` meeting `constraints`.
pub fn best_tag(constraints: &str, tags: &[String]) -> Result<Option<String>, String> {
    let c = Constraint::parse(constraints)?;
    Ok(tags
        .iter()
        .filter(|t| c.matches(t))
        .filter_map(|t| parse_version(t).map(|v| (v, t)))
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, t)| t.clone()))
}

/// The name of a package installed as a dependency: its repository as a DNS label.
pub fn dependency_name(source: &str) -> String {
    let repo = source.split_once('/').map_or(source, |(_, r)| r);
    let label: String = repo
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let label: String = label.trim_matches('-').chars().take(63).collect();
    label.trim_end_matches('-').to_string()
}

/// Records `rev` in the Lock. A conflicting write comes back as a Kube error (retried quietly).
pub async fn lock(client: &kube::Client, me: LockPackage) -> Result<Vec<LockPackage>, Error> {
    let api: Api<Lock> = Api::all(client.clone());
    let mut lock = match api.get_opt(LOCK_NAME).await? {
        Some(l) => l,
        None => {
            let l = Lock {
                metadata: kube::api::ObjectMeta {
                    name: Some(LOCK_NAME.into()),
                    ..Default::default()
                },
                ..Default::default()
            };
            match dynamic(client)
                .create(&PostParams::default(), &as_dynamic(&l)?)
                .await
            {
                Ok(_) => api.get(LOCK_NAME).await?,
                Err(kube::Error::Api(s)) if s.code == 409 => api.get(LOCK_NAME).await?,
                Err(e) => return Err(e.into()),
            }
        }
    };
    if lock.packages.contains(&me) {
        return Ok(lock.packages);
    }
    lock.packages.retain(|p| p.name != me.name);
    lock.packages.push(me);
    lock.packages.sort_by(|a, b| a.name.cmp(&b.name));
    dynamic(client)
        .replace(LOCK_NAME, &PostParams::default(), &as_dynamic(&lock)?)
        .await?;
    Ok(lock.packages)
}

/// Removes revision `name` from the Lock.
pub async fn unlock(client: &kube::Client, name: &str) -> Result<(), Error> {
    let api: Api<Lock> = Api::all(client.clone());
    let Some(mut lock) = api.get_opt(LOCK_NAME).await? else {
        return Ok(());
    };
    let before = lock.packages.len();
    lock.packages.retain(|p| p.name != name);
    if lock.packages.len() != before {
        dynamic(client)
            .replace(LOCK_NAME, &PostParams::default(), &as_dynamic(&lock)?)
            .await?;
    }
    Ok(())
}

/// The Lock's API as dynamic objects: the Lock type serialises without apiVersion and kind.
fn dynamic(client: &kube::Client) -> Api<DynamicObject> {
    use kube::core::{ApiResource, GroupVersionKind};
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(apis::pkg::GROUP, "v1beta1", "Lock"),
        "locks",
    );
    Api::all_with(client.clone(), &ar)
}

fn as_dynamic(lock: &Lock) -> Result<DynamicObject, Error> {
    let mut v = serde_json::to_value(lock)?;
    v["apiVersion"] = json!("pkg.crossplane.io/v1beta1");
    v["kind"] = json!("Lock");
    Ok(serde_json::from_value(v)?)
}

/// Resolves the dependencies of `me` against the Lock `packages`, installing missing ones with the
/// labels `labels`. `Err(Ok(message))` is a condition in words; `Err(Err(e))` a request that failed.
pub async fn resolve(
    client: &kube::Client,
    source: &Source,
    me: &LockPackage,
    packages: &[LockPackage],
    labels: &BTreeMap<String, String>,
) -> Result<Resolved, Result<String, Error>> {
    if let Some(path) = cycle(packages, &me.source) {
        return Err(Ok(format!(
            "the package's dependencies form a cycle ({path}); a package cannot depend on itself, \
             directly or through others: remove one of the dependsOn entries"
        )));
    }
    let mut out = Resolved::default();
    let mut waiting = Vec::new();
    let mut invalid = Vec::new();
    for dep in &me.dependencies {
        let locked: Vec<&LockPackage> = packages.iter().filter(|p| p.source == dep.package).collect();
        if !locked.is_empty() {
            out.found += 1;
            let mut ok = false;
            for p in &locked {
                ok |= satisfies(&dep.constraints, &p.version).map_err(|e| Ok(bad_constraint(dep, &e)))?;
            }
            if ok {
                out.installed += 1;
            } else {
                out.invalid += 1;
                let versions: Vec<&str> = locked.iter().map(|p| p.version.as_str()).collect();
                invalid.push(format!(
                    "{} is installed at {}, which does not satisfy {:?}",
                    dep.package,
                    versions.join(", "),
                    dep.constraints
                ));
            }
            continue;
        }
        let kind = dep.kind.as_deref().and_then(Kind::from_name).ok_or_else(|| {
            Ok(format!(
                "dependency {} names no kind (Provider, Function or Configuration)",
                dep.package
            ))
        })?;
        waiting.push(install(client, source, kind, dep, labels).await?);
    }
    if !invalid.is_empty() {
        return Err(Ok(format!(
            "dependency conflict: {}; install a version of the dependency that satisfies every package \
             that needs it, or change the constraint",
            invalid.join("; ")
        )));
    }
    if !waiting.is_empty() {
        out.waiting = Some(format!("waiting for dependencies: {}", waiting.join("; ")));
    }
    Ok(out)
}

fn bad_constraint(dep: &LockDependency, e: &str) -> String {
    format!(
        "dependency {} has a version constraint that cannot be read: {e}",
        dep.package
    )
}

/// Installs a missing dependency (or notes that its package exists already). The text says what is
/// being waited for.
async fn install(
    client: &kube::Client,
    source: &Source,
    kind: Kind,
    dep: &LockDependency,
    labels: &BTreeMap<String, String>,
) -> Result<String, Result<String, Error>> {
    let pkgs: Api<DynamicObject> = Api::all_with(client.clone(), &kind.package());
    let existing = pkgs
        .list(&ListParams::default())
        .await
        .map_err(|e| Err(e.into()))?;
    if let Some(p) = existing.items.iter().find(|p| {
        super::object::str_at(p, "/spec/package")
            .and_then(|r| Reference::parse(r).ok())
            .is_some_and(|r| r.source() == dep.package)
    }) {
        return Ok(format!(
            "{} {} ({}) is not in the Lock yet",
            kind.name(),
            p.name_any(),
            dep.package
        ));
    }
    let reference = Reference::parse(&format!("{}:latest", dep.package))
        .map_err(|e| Ok(format!("dependency {} is not a package source: {e}", dep.package)))?;
    let tag = if dep.constraints.starts_with("sha256:") {
        format!("@{}", dep.constraints)
    } else {
        let tags = source.tags(client, &reference.to_string()).await.map_err(|e| {
            Ok(format!(
                "cannot list the versions of dependency {}: {e}",
                dep.package
            ))
        })?;
        match best_tag(&dep.constraints, &tags).map_err(|e| Ok(bad_constraint(dep, &e)))? {
            Some(t) => format!(":{t}"),
            None => {
                return Err(Ok(format!(
                    "dependency {} {:?} cannot be satisfied: its repository has {}; push a version that \
                     satisfies the constraint, or change the constraint",
                    dep.package,
                    dep.constraints,
                    if tags.is_empty() {
                        "no tags".to_string()
                    } else {
                        format!("the tags {}", tags.join(", "))
                    }
                )));
            }
        }
    };
    let name = dependency_name(&dep.package);
    let labels: BTreeMap<&String, &String> = labels
        .iter()
        .filter(|(k, _)| !k.starts_with("pkg.crossplane.io/"))
        .collect();
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": kind.package().api_version,
        "kind": kind.name(),
        "metadata": {"name": name, "labels": labels},
        "spec": {"package": format!("{}{tag}", dep.package)},
    }))
    .map_err(|e| Err(e.into()))?;
    match pkgs.create(&PostParams::default(), &obj).await {
        Ok(_) => tracing::info!(dependency = %dep.package, package = %name, "installed a missing dependency"),
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(Err(e.into())),
    }
    Ok(format!(
        "installing {} {name} ({}{tag})",
        kind.name(),
        dep.package
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkg(source: &str, deps: &[&str]) -> LockPackage {
        LockPackage {
            name: source.into(),
            source: source.into(),
            version: "v1.0.0".into(),
            dependencies: deps
                .iter()
                .map(|d| LockDependency {
                    package: (*d).into(),
                    constraints: ">=v1.0.0".into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn finds_cycles_through_the_lock() {
        let lock = [
            pkg("r/a", &["r/b"]),
            pkg("r/b", &["r/c"]),
            pkg("r/c", &["r/a"]),
            pkg("r/d", &["r/a"]),
        ];
        assert_eq!(cycle(&lock, "r/a").as_deref(), Some("r/a → r/b → r/c → r/a"));
        assert_eq!(cycle(&lock, "r/d"), None);
        assert_eq!(cycle(&[pkg("r/x", &["r/y"])], "r/x"), None);
    }

    #[test]
    fn picks_the_highest_satisfying_tag_and_checks_digests() {
        let tags: Vec<String> = ["v1.0.0", "v1.2.0", "v2.0.0", "latest"].map(String::from).into();
        assert_eq!(best_tag(">=v1.0.0, <v2.0.0", &tags), Ok(Some("v1.2.0".into())));
        assert_eq!(best_tag(">=v9.0.0", &tags), Ok(None));
        assert_eq!(satisfies("sha256:ab", "sha256:ab"), Ok(true));
        assert_eq!(satisfies(">=v1.1.0", "v1.0.0"), Ok(false));
        assert_eq!(
            dependency_name("127.0.0.1:5000/org/provider-nop"),
            "org-provider-nop"
        );
    }
}
