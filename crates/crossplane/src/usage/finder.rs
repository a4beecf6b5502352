//! Which Usages protect an object: every Usage, ClusterUsage and legacy Usage whose `spec.of`
//! resource reference names it (upstream's `FindUsageOf`, which reads an index over the same key:
//! group, kind, name and namespace). Read from the apiserver on each call: the webhook runs on every
//! replica, and a live list cannot lag behind a Usage that has just been created or removed.

use kube::Api;
use kube::api::ListParams;
use kube::core::DynamicObject;

use super::model::{Flavor, Found};
use crate::error::Error;

/// An object the finder looks up, as the webhook or the controller sees it.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// Its `apiVersion`.
    pub api_version: &'a str,
    /// Its kind.
    pub kind: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Its namespace, if namespaced.
    pub namespace: Option<&'a str>,
}

/// Lists Usages of every flavor, optionally only those matching a label selector (the core's
/// `--watch-label-selector`).
#[derive(Clone)]
pub struct Finder {
    client: kube::Client,
    selector: Option<String>,
}

impl std::fmt::Debug for Finder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Finder")
            .field("selector", &self.selector)
            .finish_non_exhaustive()
    }
}

impl Finder {
    /// A finder reading through `client`.
    pub fn new(client: kube::Client, selector: Option<String>) -> Self {
        Self { client, selector }
    }

    /// The Usages protecting `target`, in flavor order. A flavor whose CRD is not installed counts as
    /// none.
    pub async fn usages_of(&self, target: Target<'_>) -> Result<Vec<Found>, Error> {
        let mut out = Vec::new();
        let mut lp = ListParams::default();
        if let Some(s) = &self.selector {
            lp = lp.labels(s);
        }
        for flavor in Flavor::ALL {
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &flavor.resource());
            let list = match api.list(&lp).await {
                Ok(l) => l,
                Err(e) if crate::error::is_not_found(&e) => continue,
                Err(e) => {
                    return Err(Error::Message(format!(
                        "cannot list {} to find what protects {} {}: {}",
                        flavor.resource().plural,
                        target.kind,
                        target.name,
                        crate::error::explain(&e)
                    )));
                }
            };
            out.extend(
                list.items
                    .iter()
                    .filter_map(|o| Found::parse(flavor, o).ok())
                    .filter(|u| u.protects(target.api_version, target.kind, target.name, target.namespace)),
            );
        }
        Ok(out)
    }
}
