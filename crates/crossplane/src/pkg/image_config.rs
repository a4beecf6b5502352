//! Which ImageConfig applies to an image (upstream's image config store, `xpkg.ImageConfigStore`):
//! for each purpose (a pull secret, a prefix rewrite) the ImageConfig whose `matchImages` prefix is
//! the longest one the image starts with wins, among the ImageConfigs that configure that purpose.
//! Two equally long prefixes: the ImageConfig with the smaller name wins, so the choice is stable.
//!
//! Pure functions of the ImageConfigs; reading them and their Secrets is [`super::fetch`]'s.

use apis::pkg::{ImageConfig, ImageConfigSpec};
use kube::ResourceExt;
use serde_json::{Value, json};

/// The applied reason of an ImageConfig whose pull secret was used (upstream's).
pub const REASON_PULL_SECRET: &str = "SetImagePullSecret";
/// The applied reason of an ImageConfig whose prefix rewrite was used (upstream's).
pub const REASON_REWRITE: &str = "RewriteImage";

/// An ImageConfig that was applied, and why: an entry of `status.appliedImageConfigRefs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The ImageConfig's name.
    pub name: String,
    /// [`REASON_PULL_SECRET`] or [`REASON_REWRITE`].
    pub reason: &'static str,
}

/// The `appliedImageConfigRefs` status value of `applied`: null (absent) when none applied.
pub fn status_refs(applied: &[Applied]) -> Value {
    if applied.is_empty() {
        return Value::Null;
    }
    Value::Array(
        applied
            .iter()
            .map(|a| json!({"name": a.name, "reason": a.reason}))
            .collect(),
    )
}

/// The prefixes of `spec` (only the `Prefix` match type exists; an unset type is `Prefix`).
fn prefixes(spec: &ImageConfigSpec) -> impl Iterator<Item = &str> {
    spec.match_images
        .iter()
        .filter(|m| m.match_type.as_deref().is_none_or(|t| t == "Prefix"))
        .map(|m| m.prefix.as_str())
}

/// The ImageConfig among `configs` for which `wants` holds whose prefix is the longest that `image`
/// starts with (ties: the smaller name), with that prefix.
pub fn best_match<'a>(
    configs: &'a [ImageConfig],
    image: &str,
    wants: impl Fn(&ImageConfigSpec) -> bool,
) -> Option<(&'a ImageConfig, &'a str)> {
    configs
        .iter()
        .filter(|c| wants(&c.spec))
        .flat_map(|c| prefixes(&c.spec).map(move |p| (c, p)))
        .filter(|(_, p)| image.starts_with(p))
        .min_by(|(a, pa), (b, pb)| {
            pb.len()
                .cmp(&pa.len())
                .then_with(|| a.name_any().cmp(&b.name_any()))
        })
}

/// The pull secret an ImageConfig names, if it names one.
pub fn pull_secret_name(spec: &ImageConfigSpec) -> Option<&str> {
    spec.registry
        .as_ref()
        .and_then(|r| r.authentication.as_ref())
        .map(|a| a.pull_secret_ref.name.as_str())
        .filter(|n| !n.is_empty())
}

/// The rewritten prefix an ImageConfig gives, if it rewrites.
fn rewrite_prefix(spec: &ImageConfigSpec) -> Option<&str> {
    spec.rewrite_image.as_ref().map(|r| r.prefix.as_str())
}

/// `image` with the matched prefix of the best rewriting ImageConfig replaced: the ImageConfig's name
/// and the new image, or `None` when no ImageConfig rewrites it.
pub fn rewrite(configs: &[ImageConfig], image: &str) -> Option<(String, String)> {
    let (config, prefix) = best_match(configs, image, |s| rewrite_prefix(s).is_some())?;
    let to = rewrite_prefix(&config.spec)?;
    Some((config.name_any(), format!("{to}{}", &image[prefix.len()..])))
}

/// The best ImageConfig with a pull secret for `image`: its name and the Secret's name.
pub fn pull_secret(configs: &[ImageConfig], image: &str) -> Option<(String, String)> {
    let (config, _) = best_match(configs, image, |s| pull_secret_name(s).is_some())?;
    Some((config.name_any(), pull_secret_name(&config.spec)?.to_string()))
}

/// Whether ImageConfig `spec` (with a pull secret or a rewrite) matches any of `images` (a package's
/// source and resolved source), so that a change to it must reconcile the package again.
pub fn affects<'a>(spec: &ImageConfigSpec, images: impl IntoIterator<Item = &'a str>) -> bool {
    if pull_secret_name(spec).is_none() && rewrite_prefix(spec).is_none() {
        return false;
    }
    images
        .into_iter()
        .any(|i| prefixes(spec).any(|p| i.starts_with(p)))
}

#[cfg(test)]
mod tests {
    use apis::pkg::image_config::{ImageMatch, ImageRewrite, RegistryAuthentication, RegistryConfig};
    use apis::pkg::package::LocalObjectReference;

    use super::*;

    fn config(name: &str, prefixes: &[&str], secret: Option<&str>, rewrite: Option<&str>) -> ImageConfig {
        let spec = ImageConfigSpec {
            match_images: prefixes
                .iter()
                .map(|p| ImageMatch {
                    match_type: Some("Prefix".into()),
                    prefix: (*p).into(),
                })
                .collect(),
            registry: secret.map(|s| RegistryConfig {
                authentication: Some(RegistryAuthentication {
                    pull_secret_ref: LocalObjectReference { name: s.into() },
                }),
            }),
            rewrite_image: rewrite.map(|p| ImageRewrite { prefix: p.into() }),
            ..Default::default()
        };
        ImageConfig::new(name, spec)
    }

    #[test]
    fn the_longest_prefix_wins() {
        let configs = [
            config("registry", &["xpkg.example.org/"], Some("all"), None),
            config(
                "org",
                &["other.example/", "xpkg.example.org/acme/"],
                Some("acme"),
                None,
            ),
        ];
        assert_eq!(
            pull_secret(&configs, "xpkg.example.org/acme/provider-x:v1"),
            Some(("org".into(), "acme".into()))
        );
        assert_eq!(
            pull_secret(&configs, "xpkg.example.org/other/provider-x:v1"),
            Some(("registry".into(), "all".into()))
        );
    }

    #[test]
    fn no_match_is_none() {
        let configs = [config(
            "a",
            &["xpkg.example.org/acme/"],
            Some("s"),
            Some("mirror.local/"),
        )];
        assert_eq!(pull_secret(&configs, "ghcr.io/acme/provider-x:v1"), None);
        assert_eq!(rewrite(&configs, "ghcr.io/acme/provider-x:v1"), None);
        assert_eq!(pull_secret(&[], "ghcr.io/acme/provider-x:v1"), None);
        // A prefix is a string prefix, not a path: `acme` does not match `acme-two`'s `acme/`.
        assert_eq!(rewrite(&configs, "xpkg.example.org/acme-two/p:v1"), None);
    }

    #[test]
    fn each_purpose_picks_among_the_configs_that_have_it() {
        // The longer prefix only rewrites; the pull secret comes from the shorter one.
        let configs = [
            config("creds", &["xpkg.example.org/"], Some("creds"), None),
            config(
                "mirror",
                &["xpkg.example.org/acme/"],
                None,
                Some("127.0.0.1:5000/mirror/"),
            ),
        ];
        let image = "xpkg.example.org/acme/provider-x:v1";
        assert_eq!(
            rewrite(&configs, image),
            Some(("mirror".into(), "127.0.0.1:5000/mirror/provider-x:v1".into()))
        );
        assert_eq!(
            pull_secret(&configs, image),
            Some(("creds".into(), "creds".into()))
        );
    }

    #[test]
    fn equal_prefixes_pick_the_smaller_name_and_other_match_types_are_ignored() {
        let mut odd = config("a-odd", &["xpkg.example.org/acme/provider-x"], Some("odd"), None);
        odd.spec.match_images[0].match_type = Some("Regex".into());
        let configs = [
            config("b", &["xpkg.example.org/acme/"], Some("b"), None),
            config("a", &["xpkg.example.org/acme/"], Some("a"), None),
            odd,
        ];
        assert_eq!(
            pull_secret(&configs, "xpkg.example.org/acme/provider-x:v1"),
            Some(("a".into(), "a".into()))
        );
    }

    #[test]
    fn a_rewrite_replaces_only_the_matched_prefix() {
        let configs = [config("m", &["xpkg.example.org/"], None, Some("127.0.0.1:5000/"))];
        assert_eq!(
            rewrite(&configs, "xpkg.example.org/acme/p@sha256:ab"),
            Some(("m".into(), "127.0.0.1:5000/acme/p@sha256:ab".into()))
        );
    }

    #[test]
    fn affects_only_matching_images_of_configs_that_do_something() {
        let c = config("m", &["xpkg.example.org/"], None, Some("127.0.0.1:5000/"));
        assert!(affects(&c.spec, ["ghcr.io/x:v1", "xpkg.example.org/x:v1"]));
        assert!(!affects(&c.spec, ["ghcr.io/x:v1"]));
        let idle = config("idle", &["xpkg.example.org/"], None, None);
        assert!(!affects(&idle.spec, ["xpkg.example.org/x:v1"]));
    }

    #[test]
    fn status_refs_are_null_when_none_applied() {
        assert_eq!(status_refs(&[]), Value::Null);
        let a = [Applied {
            name: "m".into(),
            reason: REASON_REWRITE,
        }];
        assert_eq!(status_refs(&a), json!([{"name": "m", "reason": "RewriteImage"}]));
    }
}
