//! The three package kinds (Provider, Function, Configuration) as one value: their package and
//! revision APIs, the meta kind a package of theirs must carry, and what they install. The package
//! and revision controllers are written once over this, on dynamic objects.

use kube::core::ApiResource;

use apis::pkg::GROUP;

/// A package kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `Provider` and `ProviderRevision`.
    Provider,
    /// `Function` and `FunctionRevision`.
    Function,
    /// `Configuration` and `ConfigurationRevision`.
    Configuration,
}

impl Kind {
    /// Every package kind.
    pub const ALL: [Kind; 3] = [Kind::Provider, Kind::Function, Kind::Configuration];

    /// The package kind's name (`Provider`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Provider => "Provider",
            Kind::Function => "Function",
            Kind::Configuration => "Configuration",
        }
    }

    /// The kind from its name (as the Lock and `dependsOn` write it).
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The package API (`pkg.crossplane.io/v1`, cluster scope).
    pub fn package(self) -> ApiResource {
        resource(self.name(), &format!("{}s", self.name().to_lowercase()))
    }

    /// The revision API.
    pub fn revision(self) -> ApiResource {
        let kind = format!("{}Revision", self.name());
        let plural = format!("{}s", kind.to_lowercase());
        resource(&kind, &plural)
    }

    /// The meta kind its packages carry.
    pub fn meta(self) -> xpkg::MetaKind {
        match self {
            Kind::Provider => xpkg::MetaKind::Provider,
            Kind::Function => xpkg::MetaKind::Function,
            Kind::Configuration => xpkg::MetaKind::Configuration,
        }
    }

    /// Whether its revisions run a Deployment (Providers and Functions).
    pub fn has_runtime(self) -> bool {
        self != Kind::Configuration
    }

    /// The kinds of object in its package that a revision installs (a Function's CRDs are input
    /// schemas and never installed); a Provider's webhook configurations are pointed at its runtime
    /// ([`super::webhooks`]).
    pub fn installs(self) -> &'static [&'static str] {
        match self {
            Kind::Provider => &[
                "CustomResourceDefinition",
                "MutatingWebhookConfiguration",
                "ValidatingWebhookConfiguration",
            ],
            Kind::Function => &[],
            Kind::Configuration => &["CompositeResourceDefinition", "Composition"],
        }
    }

    /// The label naming the package on its runtime's objects, if it has a runtime.
    pub fn runtime_label(self) -> Option<&'static str> {
        match self {
            Kind::Provider => Some(apis::pkg::LABEL_PROVIDER),
            Kind::Function => Some(apis::pkg::LABEL_FUNCTION),
            Kind::Configuration => None,
        }
    }
}

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: "v1".into(),
        api_version: format!("{GROUP}/v1"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apis_are_upstreams() {
        assert_eq!(Kind::Provider.package().plural, "providers");
        assert_eq!(Kind::Function.revision().plural, "functionrevisions");
        assert_eq!(Kind::Configuration.revision().kind, "ConfigurationRevision");
        assert_eq!(Kind::from_name("Function"), Some(Kind::Function));
        assert_eq!(Kind::from_name("Thing"), None);
    }
}
