//! What this Crossplane tells every function it calls it can do (`RequestMeta.capabilities`), as
//! upstream's core does since v2.2, so that a function can tell a field we ignore from one we honour.

use function::proto::v1;

/// The capabilities of this core: every one upstream's v2.2 core advertises, since each is honoured here
/// (required resources and schemas, credentials, conditions), and the advertisement itself.
pub const SUPPORTED: [v1::Capability; 5] = [
    v1::Capability::Capabilities,
    v1::Capability::RequiredResources,
    v1::Capability::Credentials,
    v1::Capability::Conditions,
    v1::Capability::RequiredSchemas,
];

/// The metadata of a request tagged `tag`.
pub fn request_meta(tag: String) -> v1::RequestMeta {
    v1::RequestMeta {
        tag,
        capabilities: SUPPORTED.iter().map(|c| *c as i32).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_request_advertises_the_capabilities_and_the_advertisement() {
        let meta = request_meta("t".into());
        assert_eq!(meta.tag, "t");
        let caps: Vec<v1::Capability> = meta.capabilities().collect();
        assert_eq!(caps, SUPPORTED.to_vec());
        assert!(caps.contains(&v1::Capability::Capabilities));
        assert!(!caps.contains(&v1::Capability::Unspecified));
    }
}
