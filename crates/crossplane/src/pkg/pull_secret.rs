//! Reading pull secrets (`kubernetes.io/dockerconfigjson` Secrets in the core's namespace) into
//! registry credentials: the ones a package names in `spec.packagePullSecrets`, and the one an
//! ImageConfig names in `spec.registry.authentication.pullSecretRef`. Each failure is a sentence that
//! says what is wrong and what to do.

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use xpkg::registry::PullSecrets;

/// The key of a `kubernetes.io/dockerconfigjson` Secret.
pub const DOCKER_CONFIG_KEY: &str = ".dockerconfigjson";

/// Who names a pull secret, for the messages.
#[derive(Debug, Clone, Copy)]
pub enum NamedBy<'a> {
    /// The package's (or revision's) `spec.packagePullSecrets`.
    Package,
    /// ImageConfig `.0`'s `spec.registry.authentication.pullSecretRef`.
    ImageConfig(&'a str),
}

/// Adds the credentials of Secret `name` in `namespace` to `secrets`.
pub async fn add(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    by: NamedBy<'_>,
    secrets: &mut PullSecrets,
) -> Result<(), String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = match api.get_opt(name).await {
        Ok(Some(s)) => s,
        Ok(None) => return Err(missing(namespace, name, by)),
        Err(e) => {
            return Err(format!(
                "cannot read the pull secret {namespace}/{name}{}: {}",
                by.suffix(),
                crate::error::explain(&e)
            ));
        }
    };
    let data = secret.data.as_ref().and_then(|d| d.get(DOCKER_CONFIG_KEY));
    match (by, data) {
        (NamedBy::ImageConfig(_), None) => Err(malformed(
            namespace,
            name,
            by,
            &format!("it has no {DOCKER_CONFIG_KEY} key"),
        )),
        (NamedBy::ImageConfig(_), Some(d)) => secrets
            .add_dockerconfigjson(name, &d.0)
            .map_err(|e| malformed(namespace, name, by, &reason(e))),
        // A package's pull secrets read as before: xpkg's own words.
        (NamedBy::Package, d) => secrets
            .add_dockerconfigjson(name, d.map(|b| b.0.as_slice()).unwrap_or_default())
            .map_err(|e| e.to_string()),
    }
}

/// What is wrong with a Secret's `.dockerconfigjson`, without xpkg's own advice.
fn reason(e: xpkg::Error) -> String {
    match e {
        xpkg::Error::PullSecret { reason, .. } => reason,
        other => other.to_string(),
    }
}

impl NamedBy<'_> {
    fn suffix(&self) -> String {
        match self {
            NamedBy::Package => String::new(),
            NamedBy::ImageConfig(c) => format!(" of ImageConfig {c}"),
        }
    }
}

/// The message for a pull secret that does not exist.
pub fn missing(namespace: &str, name: &str, by: NamedBy<'_>) -> String {
    match by {
        NamedBy::Package => format!(
            "the pull secret {namespace}/{name} (spec.packagePullSecrets) does not exist: create it as a \
             kubernetes.io/dockerconfigjson Secret in {namespace}, or remove it from the package"
        ),
        NamedBy::ImageConfig(c) => format!(
            "ImageConfig {c} names the pull secret {namespace}/{name} \
             (spec.registry.authentication.pullSecretRef), which does not exist: create it as a \
             kubernetes.io/dockerconfigjson Secret in {namespace}, the core's namespace, or point the \
             ImageConfig at one that exists"
        ),
    }
}

/// The message for a pull secret that cannot be used.
pub fn malformed(namespace: &str, name: &str, by: NamedBy<'_>, why: &str) -> String {
    format!(
        "the pull secret {namespace}/{name}{} cannot be used: {why}; it must be a \
         kubernetes.io/dockerconfigjson Secret (kubectl create secret docker-registry)",
        by.suffix()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_is_wrong_and_what_to_do() {
        let m = missing("crossplane-system", "creds", NamedBy::ImageConfig("mirror"));
        assert!(
            m.contains("ImageConfig mirror") && m.contains("crossplane-system/creds"),
            "{m}"
        );
        assert!(m.contains("does not exist") && m.contains("create it"), "{m}");
        let m = malformed(
            "ns",
            "creds",
            NamedBy::ImageConfig("mirror"),
            "it has no .dockerconfigjson key",
        );
        assert!(
            m.contains("of ImageConfig mirror cannot be used: it has no"),
            "{m}"
        );
        assert!(m.contains("kubectl create secret docker-registry"), "{m}");
    }
}
